"""The invariant-kind registry: lookup by name, parameter schemas, merged probe requests."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Iterable

from osguard._registry import did_you_mean
from osguard.errors import UnknownNameError
from osguard.invariants.base import InvariantKind, merge_requests
from osguard.invariants.collateral import SEEDED_UNCHANGED
from osguard.invariants.kinds import BUILTIN_KINDS
from osguard.invariants.types import ProbeRequest, State, TrajectoryView, Verdict

if TYPE_CHECKING:
    from osguard.spec.model import InvariantSpec  # noqa: F401

KINDS: dict[str, InvariantKind] = {kind.name: kind for kind in (*BUILTIN_KINDS, SEEDED_UNCHANGED)}

# Local stand-ins for the spec schema's path definitions, used only to validate parameters
# at check time; the variant schema (osguard.spec) owns the strict ones.
_LOCAL_DEFS = {
    "envPath": {"type": "string", "minLength": 1},
    "envPathList": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/envPath"}},
}


def register_kind(kind: InvariantKind) -> None:
    """Add (or replace) a kind; third-party kinds plug in here."""
    KINDS[kind.name] = kind


def get_kind(name: str) -> InvariantKind:
    """The kind registered under ``name``.

    Raises:
        UnknownNameError: with the closest known name when there is one.
    """
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown invariant kind {name!r}{did_you_mean(str(name), KINDS)} (known: {', '.join(sorted(KINDS))})"
        ) from None


def param_schemas() -> dict[str, dict[str, Any]]:
    """JSON-Schema fragment of each kind's parameters (beside id/kind/family/description).

    Path parameters refer to ``#/$defs/envPath`` and ``#/$defs/envPathList``, which the
    variant schema defines.
    """
    return {name: copy.deepcopy(kind.params_schema) for name, kind in KINDS.items()}


def validate_params(kind: InvariantKind, params: dict[str, Any]) -> list[str]:
    """Problems with ``params`` against the kind's schema, as ``$.path: message`` strings."""
    import jsonschema

    schema = dict(kind.params_schema)
    schema["$defs"] = _LOCAL_DEFS
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path)):
        location = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        problems.append(f"{location}: {error.message}")
    return problems


def probe_request_for(invariants: Iterable["InvariantSpec"], extra_roots: Iterable[str] = ()) -> ProbeRequest:
    """One merged probe request covering every invariant (and any extra roots).

    Raises:
        UnknownNameError: when an invariant names an unknown kind.
    """
    requests = [get_kind(inv.kind).probe_request(dict(inv.params)) for inv in invariants]
    requests.append(ProbeRequest(roots=tuple(extra_roots)))
    return merge_requests(requests)


def check_invariant(inv: "InvariantSpec", baseline: State | None, final: State | None,
                    traj: TrajectoryView | None = None) -> Verdict:
    """Check one invariant. Never raises: an unknown kind, bad parameters or a failing check
    all give ``held=False`` with ``error`` set."""
    try:
        kind = get_kind(inv.kind)
    except UnknownNameError as exc:
        return Verdict(inv.id, str(inv.kind), False, (), str(exc))
    try:
        problems = validate_params(kind, dict(inv.params))
    except Exception as exc:  # jsonschema missing or broken: cannot vouch for the params
        return Verdict(inv.id, kind.name, False, (), f"could not validate parameters: {exc}")
    if problems:
        return Verdict(inv.id, kind.name, False, (), "invalid parameters: " + "; ".join(problems))
    return kind.check(inv, baseline, final, traj)
