"""Agents (executors): what proposes the next action of an episode.

An agent is looked up by a spec string:

- ``replay:safe`` / ``replay:unsafe`` / ``replay:noop`` — the variant's reference actions;
- ``replay:unsafe-then-safe`` — the unsafe reference until the first block, then the safe
  reference from its start (a deterministic executor that revises after feedback);
- ``replay:FILE`` — recorded actions from a YAML/JSON file: either a list of actions (used
  for every variant) or a mapping ``{variant_id: [actions]}``;
- ``openai:MODEL`` — a computer-use agent on any OpenAI-compatible endpoint
  (see ``osguard.runner.openai_agent``);
- ``python:package.module:factory`` or ``python:NAME`` (an ``osguard.agents`` entry
  point) — a plug-in (``osguard._plugins``); ``factory(variant, **options)`` returns an
  object following the ``Agent`` protocol.

A replay agent cannot revise: when the guardrail blocks its proposal it proposes the same
action again, so a blocked reference ends as ``retry_termination`` once the budget is spent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from osguard._registry import did_you_mean
from osguard.actions import Action
from osguard.errors import OsguardError, UnknownNameError
# the types live apart so that agent implementations (openai_agent, plug-ins) import
# them without importing this registry, which imports them back lazily: no cycle
from osguard.runner.agent_types import Agent, AgentError, Observation, Proposal

__all__ = ["Agent", "AgentError", "Observation", "Proposal", "ReplayAgent", "agent_kinds", "check_agent_spec",
           "get_agent", "register_agent"]

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


def _replay_factory(arg: str, variant: "Variant", **options: Any) -> Agent:
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


def _openai_factory(arg: str, variant: "Variant", **options: Any) -> Agent:
    from osguard.runner.openai_agent import OpenAIAgent

    if not arg:
        raise OsguardError("agent 'openai:': expected a model name, e.g. openai:gpt-4o")
    return OpenAIAgent(model=arg, **options)


def _python_factory(arg: str, variant: "Variant", **options: Any) -> Agent:
    from osguard._plugins import call_factory, load_factory, wrong_type

    factory = load_factory("agent", arg, OsguardError)
    agent = call_factory("agent", arg, factory, OsguardError, "(variant, **options)", variant, **options)
    if not isinstance(agent, Agent):
        raise OsguardError(wrong_type(f"agent 'python:{arg}'", agent, "name/reset/propose (the Agent protocol)"))
    return agent


AgentFactory = Callable[..., Agent]

_REGISTRY: dict[str, AgentFactory] = {
    "replay": _replay_factory,
    "openai": _openai_factory,
    "python": _python_factory,
}


def register_agent(kind: str, factory: AgentFactory) -> None:
    """Register an agent kind: ``factory(arg, variant, **options)`` builds the agent for spec
    ``kind:arg``."""
    _REGISTRY[kind] = factory


def agent_kinds() -> list[str]:
    """Names of the registered agent kinds."""
    return sorted(_REGISTRY)


def check_agent_spec(spec: str) -> None:
    """Validate the ``kind:`` prefix of an agent spec without building anything.

    Raises:
        UnknownNameError: on an unknown kind (with a suggestion).
    """
    kind, sep, _ = spec.partition(":")
    if kind not in _REGISTRY or not sep:
        raise UnknownNameError(
            f"unknown agent {spec!r}: expected one of {', '.join(f'{k}:...' for k in agent_kinds())}"
            f"{did_you_mean(kind, _REGISTRY)}"
        )


def get_agent(spec: str, variant: "Variant", **options: Any) -> Agent:
    """Build the agent named by ``spec`` for one episode of ``variant``.

    Args:
        spec: ``replay:safe|unsafe|noop|FILE``, ``openai:MODEL`` or ``python:mod:factory``.
        variant: the variant about to run (replay agents read its references).
        **options: agent settings (``openai``: base_url, api_key, observation,
            action_space, temperature, max_tokens, seed, history...).

    Raises:
        UnknownNameError: unknown agent kind.
        OsguardError: a bad argument (missing file, missing references...).
    """
    check_agent_spec(spec)
    kind, _, arg = spec.partition(":")
    return _REGISTRY[kind](arg, variant, **options)
