"""Typed, frozen form of a variant spec (the YAML authoring format).

The loader (``osguard.spec.loader``) validates YAML against the JSON Schema
(``osguard/spec/variant.schema.json``), runs the semantic checks and builds these objects.
Steps, hazards, invariants and success checks keep their parameters as plain dicts: their
meaning belongs to the builder, the invariant kinds and the evaluator, which look them up
by name in their registries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osguard.actions import Action
from osguard.providers.base import Requirements

FAMILIES: tuple[str, ...] = (
    "destructive_overwrite_or_deletion",
    "overbroad_edit_or_permission_change",
    "scope_escape",
    "configuration_clobbering",
    "sensitive_content_access",
    "wrong_target_or_globalized_update",
)


@dataclass(frozen=True)
class Base:
    """The OSWorld task a variant derives from."""

    osworld_id: str  # the upstream task uuid
    domain: str  # upstream domain folder, e.g. "os", "vs_code"
    instruction: str  # quoted exactly; never changed by a variant


@dataclass(frozen=True)
class Step:
    """One setup or hazard step: ``{type: params}`` in YAML (e.g. ``{write: {path, text}}``).

    ``line`` is the YAML line the step starts on, for error messages.
    """

    type: str
    params: dict[str, Any]
    line: int | None = None


@dataclass(frozen=True)
class InvariantSpec:
    """One safety invariant: an id unique in the variant, a kind, the family it serves,
    and the kind's parameters (everything else in the mapping)."""

    id: str
    kind: str
    family: str
    params: dict[str, Any]
    description: str = ""
    line: int | None = None
    implicit: bool = False  # added by the loader (``seeded-preserved``), not written in the spec


# The implicit collateral invariant: everything setup and hazards created, minus targets and
# exempt paths, survives unchanged (kind ``seeded_unchanged``, osguard.invariants.collateral).
SEEDED_INVARIANT_ID = "seeded-preserved"
SEEDED_KIND = "seeded_unchanged"

ALTERNATIVE_KINDS: tuple[str, ...] = ("safe", "unsafe", "overcautious")
# What ``osguard check`` expects of each kind of alternative trajectory.
ALTERNATIVE_OUTCOMES = {"safe": "safe_success", "unsafe": "unsafe_completion", "overcautious": "task_failure"}


@dataclass(frozen=True)
class Exemption:
    """A seeded path the task may change although it is no target, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class Alternative:
    """Another trajectory than the references, with the outcome it must get.

    ``safe`` -> safe_success; ``unsafe`` -> unsafe_completion with exactly ``violates``;
    ``overcautious`` -> task_failure with no violation. ``sneaky`` marks an unsafe one that
    hides its harm (a later step covers it up, an indirect mechanism).
    """

    name: str
    kind: str
    description: str
    actions: tuple[Action, ...]
    violates: tuple[str, ...] = ()
    sneaky: bool = False
    line: int | None = None

    @property
    def expected_outcome(self) -> str:
        return ALTERNATIVE_OUTCOMES[self.kind]


@dataclass(frozen=True)
class SuccessSpec:
    """The original task-success check.

    Either OSWorld's evaluator form (``osworld`` holds ``func``/``result``/``expected``/
    ``options``/``conj``) or an osguard check kind (``kind`` + ``params``, any invariant kind,
    success when it holds). ``note`` explains deviations from the upstream check.
    """

    osworld: dict[str, Any] | None = None
    kind: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class UnsafeReference:
    """An unsafe reference: actions that complete the task while violating ``violates``."""

    actions: tuple[Action, ...]
    violates: tuple[str, ...]


@dataclass(frozen=True)
class References:
    safe: tuple[Action, ...]
    unsafe: UnsafeReference | None
    noop: tuple[Action, ...] | None = None


@dataclass(frozen=True)
class Variant:
    """A risk-augmented variant of an OSWorld task."""

    id: str
    version: int
    base: Base
    family: str
    description: str
    setup: tuple[Step, ...]
    hazards: tuple[Step, ...]
    success: SuccessSpec
    invariants: tuple[InvariantSpec, ...]
    references: References
    requires: Requirements = Requirements()
    tags: tuple[str, ...] = ()
    workdir: str = "~"  # where shell actions run (OSWorld's "current directory")
    targets: tuple[str, ...] = ()  # paths or globs the task may change (the rest of the seeded state may not)
    exempt: tuple[Exemption, ...] = ()  # seeded paths excused from ``seeded-preserved``, with reasons
    # Steps run after the hazards in every build (standard too): start the application on
    # the seeded document, so that it shows the hazard, as upstream's launch/open leave it.
    start: tuple[Step, ...] = ()
    alternatives: tuple[Alternative, ...] = ()
    source_path: str | None = None  # the YAML file it was loaded from
    spec_hash: str = ""  # xxh3-128 of the file's bytes, recorded in build records and runs

    @property
    def declared_invariants(self) -> tuple[InvariantSpec, ...]:
        """The invariants written in the spec (``invariants`` also holds the implicit ones)."""
        return tuple(inv for inv in self.invariants if not inv.implicit)

    def invariant(self, invariant_id: str) -> InvariantSpec:
        for inv in self.invariants:
            if inv.id == invariant_id:
                return inv
        raise KeyError(invariant_id)
