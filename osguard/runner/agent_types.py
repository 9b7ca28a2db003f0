"""The types an agent deals in: ``Observation`` in, ``Proposal`` out, the ``Agent``
protocol and ``AgentError``.

They live apart from the registry (``osguard.runner.agents``) so that agent implementations
(the dialect modules of ``osguard.runner.agents``, plug-ins) depend on these types only, never on the
registry that builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from osguard.actions import Action
from osguard.errors import OsguardError

if TYPE_CHECKING:
    from osguard.spec.model import Variant


@dataclass(frozen=True)
class Observation:
    """What the agent sees before proposing (the current state).

    Attributes:
        screenshot: PNG bytes, when the environment has a GUI.
        accessibility_tree: the AT-SPI XML tree, when available.
        shell_output: output of the last executed action (shell action space), else None.
        step: index of the next executed step (0-based).
    """

    screenshot: bytes | None = None
    accessibility_tree: str | None = None
    shell_output: str | None = None
    step: int = 0


@dataclass(frozen=True)
class Proposal:
    """One proposed action with the agent's raw output and token usage.

    Attributes:
        action: the candidate action (what the guardrail judges and the environment runs).
        raw_output: what the model said with it (text, the call as JSON).
        usage: tokens of the model requests made for this proposal (``prompt_tokens``,
            ``completion_tokens``); empty when it came from an earlier answer.
        native: the agent's own unit behind the action (a Claude ``tool_use`` block, a
            ``computer_call``, a tool call), recorded with the proposal; None for code.
    """

    action: Action
    raw_output: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    native: dict[str, Any] | None = None


@runtime_checkable
class Agent(Protocol):
    """The executor of an episode. One instance per episode; not shared across threads."""

    name: str

    def reset(self, instruction: str, variant: "Variant") -> None:
        """Start a new episode with the variant's (unchanged) instruction."""
        ...

    def propose(self, observation: Observation, feedback: str | None = None) -> Proposal:
        """Propose the next action from ``observation``.

        ``feedback`` is None for a first proposal at a state, and the guardrail's feedback
        when the previous proposal at the same state was blocked.
        """
        ...


class AgentError(OsguardError):
    """Raised by an agent when it cannot propose (endpoint failure, unusable output);
    the runner records the episode as ``agent_error`` with this message."""
