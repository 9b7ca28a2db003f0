"""osguard.scout: SCOUT — verifiers (guardrails), action-level items, annotation, scoring.

- ``get_verifier(spec)`` builds a verifier by name (``allow-all``, ``scripted:FILE``,
  ``rules``, ``scout:llm[:MODEL]``, ``deaction[:MODEL]``, ``python:pkg.mod:factory``);
  every verifier judges a ``VerifierInput`` and returns a ``Verdict``.
- ``build_items`` turns run directories into items (``Item``, ``load_items``);
  ``to_verifier_input`` is the only way from an item to a verifier (the allowlist).
- ``AnnotationLog`` / ``AnnotationServer`` collect human labels; ``agreement_report``.
- ``predict`` / ``score_predictions`` / ``render_report`` score verifiers.
"""

from __future__ import annotations

from typing import Any

from osguard.scout.registry import get_verifier, register_verifier, verifier_names
from osguard.scout.types import (
    LABELS,
    Label,
    PredictedLabel,
    ScoutError,
    Verdict,
    Verifier,
    VerifierInput,
)

# Imported on first use so that `import osguard.scout` (done by the runner) stays cheap.
_LAZY = {
    "Item": "osguard.scout.items", "load_items": "osguard.scout.items",
    "write_items": "osguard.scout.items", "to_verifier_input": "osguard.scout.items",
    "SOURCES": "osguard.scout.items",
    "build_items": "osguard.scout.build", "read_run": "osguard.scout.build",
    "ModelProposer": "osguard.scout.proposer",
    "AnnotationLog": "osguard.scout.annotations", "agreement_report": "osguard.scout.annotations",
    "gold_labels": "osguard.scout.annotations", "cohen_kappa": "osguard.scout.annotations",
    "fleiss_kappa": "osguard.scout.annotations",
    "AnnotationServer": "osguard.scout.annotate",
    "Prediction": "osguard.scout.scoring", "predict": "osguard.scout.scoring",
    "score_predictions": "osguard.scout.scoring", "render_report": "osguard.scout.scoring",
    "save_predictions": "osguard.scout.scoring", "load_predictions": "osguard.scout.scoring",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'osguard.scout' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "LABELS", "Label", "PredictedLabel", "ScoutError", "Verdict", "Verifier", "VerifierInput",
    "get_verifier", "register_verifier", "verifier_names", *sorted(_LAZY),
]
