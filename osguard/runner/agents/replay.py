"""Replay agents (``replay:safe|unsafe|unsafe-then-safe|noop|FILE``): a fixed list of
actions, the variant's references or a recorded file.

A replay agent cannot revise: when the guardrail blocks its proposal it proposes the same
action again, so a blocked reference ends as ``retry_termination`` once the budget is spent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osguard.actions import Action
from osguard.errors import OsguardError
from osguard.runner.agent_types import Agent, Observation, Proposal

if TYPE_CHECKING:
    from osguard.spec.model import Variant


class ReplayAgent:
    """Proposes a fixed list of actions in order, then ``DONE``.

    With ``fallback`` (``replay:unsafe-then-safe``), the first block switches it to the
    fallback list from its start: a deterministic executor that revises after feedback.
    """

    def __init__(self, actions: list[Action], source: str, fallback: list[Action] | None = None):
        self.name = f"replay:{source}"
        self._initial = list(actions)
        self._actions = list(actions)
        self._fallback = list(fallback) if fallback is not None else None
        self._source = source
        self._next = 0

    def reset(self, instruction: str, variant: "Variant") -> None:
        self._actions = list(self._initial)
        self._next = 0

    def propose(self, observation: Observation, feedback: str | None = None) -> Proposal:
        if feedback is not None and self._fallback is not None and self._actions is not self._fallback:
            self._actions, self._next = self._fallback, 0
        elif feedback is not None and self._next > 0:
            # A blocked proposal is proposed again: a recording has no alternative to offer.
            self._next -= 1
        action = self._actions[self._next] if self._next < len(self._actions) else Action("special", "DONE")
        self._next += 1
        return Proposal(action=action, raw_output=f"{self.name}#{self._next - 1}")

    def describe(self) -> dict[str, Any]:
        # the actions differ per variant; they are in each episode's steps.jsonl
        return {"kind": "replay", "source": self._source}


def _load_recorded(path: Path, variant: "Variant") -> list[Action]:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OsguardError(f"replay file {path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise OsguardError(f"replay file {path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if isinstance(data, dict):
        if variant.id not in data:
            raise OsguardError(
                f"replay file {path}: no actions for variant {variant.id!r} "
                f"(the file maps {len(data)} variant id(s): {', '.join(sorted(map(str, data))[:5])})"
            )
        data = data[variant.id]
        where = f"$.{variant.id}"
    else:
        where = "$"
    if not isinstance(data, list):
        raise OsguardError(f"replay file {path}: {where}: expected a list of actions, got {type(data).__name__}")
    actions = []
    for i, item in enumerate(data):
        try:
            actions.append(Action.parse(item))
        except ValueError as exc:
            raise OsguardError(f"replay file {path}: {where}[{i}]: {exc}") from None
    return actions


def replay_factory(arg: str, variant: "Variant", **options: Any) -> Agent:
    refs = variant.references
    if arg == "safe":
        return ReplayAgent(list(refs.safe), "safe")
    if arg == "unsafe":
        if refs.unsafe is None:
            raise OsguardError(f"variant {variant.id}: replay:unsafe needs references.unsafe, which it lacks")
        return ReplayAgent(list(refs.unsafe.actions), "unsafe")
    if arg == "unsafe-then-safe":
        if refs.unsafe is None:
            raise OsguardError(f"variant {variant.id}: replay:unsafe-then-safe needs references.unsafe, which it lacks")
        return ReplayAgent(list(refs.unsafe.actions), "unsafe-then-safe", fallback=list(refs.safe))
    if arg == "noop":
        return ReplayAgent(list(refs.noop or (Action("special", "DONE"),)), "noop")
    path = Path(arg).expanduser()
    if not path.is_file():
        raise OsguardError(
            f"agent 'replay:{arg}': expected safe, unsafe, unsafe-then-safe, noop or a YAML/JSON file of actions; "
            f"no file {path}"
        )
    return ReplayAgent(_load_recorded(path, variant), str(path))
