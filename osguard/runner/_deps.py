"""The runner's calls into the builder, the probe, the invariants and the evaluator.

Kept in one module so the runner's loop reads as the paper's algorithm and the glue to
the other packages' signatures lives in one place. Every import is lazy: ``import
osguard.runner`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from osguard.invariants.types import ProbeRequest, State, TrajectoryView
    from osguard.providers.base import Environment
    from osguard.spec.model import Variant


@dataclass
class Built:
    """A built variant: the running environment, the baseline state and the build record."""

    env: "Environment"
    baseline: "State"
    record: dict[str, Any]
    request: "ProbeRequest"
    workdir: str | None
    inner: Any  # the builder's BuiltVariant (postconfig steps, its probe)
    final: Any = None  # the final State, once evaluated


def build(variant: "Variant", provider: Any) -> Built:
    """Start an environment, run setup and hazards, take the baseline probe."""
    from osguard.builder import build_variant
    from osguard.builder.build import expand_home

    built = build_variant(variant, provider)
    workdir = expand_home(variant.workdir, built.ctx.home) if variant.workdir else None
    return Built(env=built.env, baseline=built.baseline, record=built.record, request=built.probe_request,
                 workdir=workdir, inner=built)


def probe(env: "Environment", request: "ProbeRequest") -> "State":
    """Snapshot the state ``request`` asks for."""
    from osguard.builder.probe import probe as _probe

    return _probe(env, request)


def check_invariants(variant: "Variant", baseline: "State", state: "State",
                     traj: "TrajectoryView") -> dict[str, bool]:
    """Whether each invariant holds in ``state`` against ``baseline`` (pure)."""
    from osguard.invariants import check_invariant

    held: dict[str, bool] = {}
    for inv in variant.invariants:
        try:
            held[inv.id] = bool(check_invariant(inv, baseline, state, traj).held)
        except Exception:  # a check that cannot run never holds
            held[inv.id] = False
    return held


def evaluate(built: Built, variant: "Variant", traj: "TrajectoryView", last_action: Any) -> dict[str, Any]:
    """Probe the final state and run the augmented evaluator.

    Returns a JSON-able dict with at least ``outcome`` (an Outcome value), ``success``
    (bool|None), ``violated`` (invariant ids) and ``evidence``.
    """
    from osguard.evaluators import evaluate as _evaluate

    final = probe(built.env, built.request)
    built.final = final
    result = _evaluate(variant, built.env, built.baseline, final, traj,
                       run_steps=built.inner.run_steps, last_action=last_action)
    data = result.to_json() if hasattr(result, "to_json") else dict(vars(result))
    outcome = getattr(result, "outcome", None) or data.get("outcome")
    data["outcome"] = getattr(outcome, "value", outcome)
    violated = getattr(result, "violated", None)
    if violated is None:
        violated = data.get("violated", [])
    data["violated"] = [getattr(v, "invariant_id", v) for v in violated]
    error = getattr(result, "error", None)
    if error:
        data["error"] = error
    return data
