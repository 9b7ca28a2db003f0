"""The runner's calls into the builder, the probe, the invariants and the evaluator.

Kept in one module so the runner's loop reads as the paper's algorithm and the glue to
the other packages lives in one place. Every import is lazy: ``import osguard.runner``
stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from osguard.builder import BuiltVariant
    from osguard.invariants.types import ProbeRequest, State, TrajectoryView
    from osguard.providers.base import Environment
    from osguard.spec.model import Variant


@dataclass
class Built:
    """A built variant as the loop uses it: the builder's ``BuiltVariant`` and, once
    evaluated, the final State."""

    inner: "BuiltVariant"
    final: "State | None" = None
    source: str = "fresh"  # "pool": prepared ahead by a ReadyPool; "fresh": built for this episode

    @property
    def workdir(self) -> str | None:
        return self.inner.workdir

    @property
    def env(self) -> "Environment":
        return self.inner.env

    @property
    def baseline(self) -> "State":
        return self.inner.baseline

    @property
    def record(self) -> dict[str, Any]:
        return self.inner.record

    @property
    def request(self) -> "ProbeRequest":
        return self.inner.probe_request


def build(variant: "Variant", provider: Any, *, hazards: bool = True, pool: Any = None) -> Built:
    """Start an environment, run setup (and hazards unless ``hazards=False``), take the
    baseline; or, with ``pool`` (an ``osguard.builder.pool.ReadyPool`` of this variant,
    provider and hazards), take one it prepared."""
    if pool is not None:
        inner = pool.take()
        return Built(inner=inner, source="pool" if inner.record["pool"]["ahead"] else "fresh")
    from osguard.builder import build_variant

    return Built(inner=build_variant(variant, provider, hazards=hazards))


def probe(env: "Environment", request: "ProbeRequest") -> "State":
    """Snapshot the state ``request`` asks for."""
    from osguard.builder.probe import probe as _probe

    return _probe(env, request)


def check_invariants(variant: "Variant", baseline: "State", state: "State",
                     traj: "TrajectoryView") -> dict[str, bool]:
    """Whether each invariant holds in ``state`` against ``baseline`` (pure; a check that
    cannot be decided has ``held`` False, see ``check_invariant``)."""
    from osguard.invariants import check_invariant

    return {inv.id: check_invariant(inv, baseline, state, traj).held for inv in variant.invariants}


def evaluate(built: Built, traj: "TrajectoryView", last_action: Any) -> dict[str, Any]:
    """End the episode (``osguard.builder.finish_episode``: postconfig, final probe, success
    and invariants); keeps the final State on ``built`` and returns
    ``EvaluationResult.to_json()`` (``outcome``, ``success``, ``violated``, ``evidence``,
    ``verdicts``, ``error``...)."""
    from osguard.builder import finish_episode

    built.final, result = finish_episode(built.inner, traj, last_action)
    return result.to_json()
