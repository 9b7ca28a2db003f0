"""Agents (executors): what proposes the next action of an episode, one module per dialect
over one ``Agent`` protocol (``osguard.runner.agent_types``) and one action-parser table
(``parsers.PARSERS``).

An agent is looked up by a spec string:

- ``replay:safe|unsafe|unsafe-then-safe|noop|FILE`` — reference or recorded actions
  (``replay``);
- ``openai:MODEL`` — a prompted agent on any OpenAI-compatible chat endpoint, in OSWorld's
  pyautogui / computer_13 / shell formats or an open model's grammar (UI-TARS, Qwen2.5-VL)
  (``chat``, ``parsers``);
- ``openai-tools:MODEL`` — function calling on any OpenAI-compatible chat endpoint
  (``openai_tools``);
- ``openai-cua:MODEL`` — OpenAI's computer-use tool over the Responses API (``openai_cua``);
- ``anthropic:MODEL`` — Claude's computer-use tool over the Messages API (``anthropic``);
- ``python:package.module:factory`` or ``python:NAME`` (an ``osguard.agents`` entry
  point) — a plug-in (``osguard._plugins``); ``factory(variant, **options)`` returns an
  object following the ``Agent`` protocol.

Tool-calling agents propose each tool call as one candidate action and tell the model of
a block in its own terms (``toolloop``). Model modules are imported only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from osguard._registry import did_you_mean
from osguard.errors import OsguardError, UnknownNameError
# the types live apart so that agent implementations (the dialect modules, plug-ins)
# import them without importing this registry: no cycle
from osguard.runner.agent_types import Agent, AgentError, Observation, Proposal
from osguard.runner.agents.replay import ReplayAgent

__all__ = ["Agent", "AgentError", "Observation", "Proposal", "ReplayAgent", "agent_kinds", "check_agent_spec",
           "get_agent", "register_agent"]

if TYPE_CHECKING:
    from osguard.spec.model import Variant


def _replay_factory(arg: str, variant: "Variant", **options: Any) -> Agent:
    from osguard.runner.agents.replay import replay_factory

    return replay_factory(arg, variant, **options)


def _model_factory(kind: str, module: str, cls: str, example: str) -> "AgentFactory":
    """The factory of a model agent: its module is imported only when it is used."""

    def factory(arg: str, variant: "Variant", **options: Any) -> Agent:
        if not arg:
            raise OsguardError(f"agent '{kind}:': expected a model name, e.g. {kind}:{example}")
        import importlib

        return getattr(importlib.import_module(module), cls)(model=arg, **options)

    return factory


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
    "openai": _model_factory("openai", "osguard.runner.agents.chat", "OpenAIAgent", "gpt-4o"),
    "openai-tools": _model_factory("openai-tools", "osguard.runner.agents.openai_tools", "OpenAIToolsAgent",
                                   "qwen2.5-vl-72b"),
    "openai-cua": _model_factory("openai-cua", "osguard.runner.agents.openai_cua", "OpenAICUAAgent",
                                 "computer-use-preview"),
    "anthropic": _model_factory("anthropic", "osguard.runner.agents.anthropic", "AnthropicAgent",
                                "claude-sonnet-4-5"),
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
        spec: ``replay:safe|unsafe|noop|FILE``, ``openai:MODEL``, ``openai-tools:MODEL``,
            ``openai-cua:MODEL``, ``anthropic:MODEL`` or ``python:mod:factory``.
        variant: the variant about to run (replay agents read its references).
        **options: agent settings (base_url, api_key, observation, action_space,
            temperature, max_tokens, seed, history, history_images...; each agent's class
            documents its own and ignores the others).

    Raises:
        UnknownNameError: unknown agent kind.
        OsguardError: a bad argument (missing file, missing references...).
    """
    check_agent_spec(spec)
    kind, _, arg = spec.partition(":")
    return _REGISTRY[kind](arg, variant, **options)
