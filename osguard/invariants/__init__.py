"""Safety invariants: pure checks of (baseline state, final state, trajectory) -> Verdict.

``KINDS`` maps kind names to ``InvariantKind``; ``check_invariant`` runs one invariant and
never raises; ``probe_request_for`` says what the probe must collect for a set of
invariants. See docs/invariants.md.
"""

from osguard.invariants.base import CheckError, InvariantKind, StateView, merge_requests
from osguard.invariants.registry import (
    KINDS,
    check_invariant,
    get_kind,
    param_schemas,
    probe_request_for,
    register_kind,
    validate_params,
)
from osguard.invariants.types import Evidence, ProbeRequest, State, TrajectoryView, Verdict

__all__ = [
    "KINDS",
    "CheckError",
    "Evidence",
    "InvariantKind",
    "ProbeRequest",
    "State",
    "StateView",
    "TrajectoryView",
    "Verdict",
    "check_invariant",
    "get_kind",
    "merge_requests",
    "param_schemas",
    "probe_request_for",
    "register_kind",
    "validate_params",
]
