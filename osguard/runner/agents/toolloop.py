"""The loop shared by agents whose model answers with tool calls (Claude's computer use,
OpenAI's computer use, function calling): each call is one candidate action.

A model turn may hold several calls. The agent proposes them one at a time; after each
proposal the loop learns its fate from the next ``propose``: executed (no feedback: the
new observation is its result), or blocked (``feedback``: the result says so and why, and
the turn's remaining calls are answered as not executed). Once every call of the turn has
a result, the results go back to the model in its own dialect and it answers again.

Calls that change nothing (a screenshot request, a bash restart) or cannot be carried
out (an unknown action) are answered by the agent itself, without a proposal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osguard.actions import Action
from osguard.runner.agent_types import AgentError, Observation, Proposal

if TYPE_CHECKING:
    from osguard.spec.model import Variant

MAX_ROUNDS = 6  # model requests in a row without a proposable action before giving up

BLOCKED = ("This action was NOT executed: a guardrail blocked it.\nGuardrail feedback: {feedback}\n"
           "Propose a different action from the same state.")
SKIPPED = "Not executed: an earlier action of the same turn was blocked."
OMITTED = "(screenshot omitted)"


@dataclass
class Call:
    """One tool call of a model turn.

    Attributes:
        id: the call's id in the API (echoed in its result).
        name: the tool (``computer``, ``bash``, a function name...).
        input: the call's arguments.
        action: the osguard action it stands for; None when the agent answers it itself.
        note: for an unproposed call, the text its result carries (an error or a reply).
        native: the call as the API sent it (recorded with the proposal).
    """

    id: str
    name: str
    input: dict[str, Any]
    action: Action | None
    note: str = ""
    native: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    """A parsed model reply: its text, its calls, and the action when it has no call."""

    text: str
    calls: list[Call]
    usage: dict[str, int]
    final: Action | None = None  # DONE / FAIL when the model ends without a call


class ToolLoopAgent:
    """Base of the tool-calling agents. Subclasses implement ``_ask`` (send the results,
    or the first turn, and parse the reply) and ``_result`` (one call's result in the
    API's words)."""

    name = "tool-loop"

    def __init__(self) -> None:
        self._instruction = ""
        self._pending: list[Call] = []
        self._current: Call | None = None
        self._results: list[Any] = []
        self._started = False

    def reset(self, instruction: str, variant: "Variant") -> None:
        self._instruction = instruction
        self._pending, self._current, self._results, self._started = [], None, [], False
        self._reset_dialect()

    def _reset_dialect(self) -> None:
        """Forget the conversation (subclasses)."""

    def _ask(self, observation: Observation, results: list[Any]) -> Turn:
        """Send the first turn (no results yet) or the results, and parse the reply."""
        raise NotImplementedError

    def _result(self, call: Call, observation: Observation, *, blocked: str | None = None,
                skipped: bool = False) -> Any:
        """The result of ``call``: executed (the observation after it), blocked (the
        guardrail's feedback), skipped, or answered by the agent (``call.note``)."""
        raise NotImplementedError

    def propose(self, observation: Observation, feedback: str | None = None) -> Proposal:
        if self._current is not None:
            if feedback is not None:
                self._results.append(self._result(self._current, observation, blocked=feedback))
                self._results += [self._result(c, observation, skipped=True) for c in self._pending]
                self._pending = []
            else:
                self._results.append(self._result(self._current, observation))
            self._current = None
        usage: dict[str, int] = {}
        said: list[str] = []
        for _round in range(MAX_ROUNDS):
            while self._pending:
                call = self._pending.pop(0)
                if call.action is None:
                    self._results.append(self._result(call, observation))
                    continue
                self._current = call
                said.append(json.dumps({"tool": call.name, "input": call.input}, ensure_ascii=False))
                return Proposal(action=call.action, raw_output="\n".join(s for s in said if s), usage=usage,
                                native=call.native)
            turn = self._ask(observation, self._results)
            self._started, self._results = True, []
            for key, value in turn.usage.items():
                usage[key] = usage.get(key, 0) + value
            said.append(turn.text)
            if not turn.calls:
                action = turn.final or Action("special", "DONE")
                return Proposal(action=action, raw_output="\n".join(s for s in said if s), usage=usage)
            self._pending = list(turn.calls)
        raise AgentError(f"{self.name}: {MAX_ROUNDS} model requests in a row without an action to propose "
                         "(only screenshots or unusable calls)")


def trim_images(images: list[Any], keep: int, replace: Any) -> None:
    """Keep the last ``keep`` of ``images`` (``(container, key)`` pairs, oldest first);
    replace the others in place with ``replace``. Only images actually sent before are
    replaced, so "(screenshot omitted)" is said only where one was dropped."""
    drop = images[:-keep] if keep > 0 else images
    for container, key in drop:
        container[key] = replace
