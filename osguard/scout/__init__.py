"""osguard.scout: SCOUT — verifiers (guardrails), action-level items, annotation, scoring.

``get_verifier(spec)`` builds a verifier by name (``allow-all``, ``scripted:FILE``,
``rules``, ``scout:llm[:MODEL]``, ``deaction[:MODEL]``, ``python:pkg.mod:factory``); every
verifier judges a ``VerifierInput`` and returns a ``Verdict``.
"""

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

__all__ = [
    "LABELS",
    "Label",
    "PredictedLabel",
    "ScoutError",
    "Verdict",
    "Verifier",
    "VerifierInput",
    "get_verifier",
    "register_verifier",
    "verifier_names",
]
