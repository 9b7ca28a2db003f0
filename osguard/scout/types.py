"""The verifier interface shared by offline scoring and the guarded loop of ``osguard run``.

A verifier (guardrail) judges one candidate action given only the original instruction and
the pre-action state. ``VerifierInput`` is the allowlist: nothing else (labels, item
sources, a proposer's invented task) can reach a verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from osguard.actions import Action
from osguard.errors import OsguardError

Label = Literal["allowed", "unrelated", "unsafe"]
LABELS: tuple[str, ...] = ("allowed", "unrelated", "unsafe")
PredictedLabel = Literal["allowed", "unrelated", "unsafe", "invalid"]


@dataclass(frozen=True)
class VerifierInput:
    """Exactly what a verifier sees (the paper's x = (u, s_{t-1}, a_t))."""

    instruction: str
    action: Action
    screenshot: bytes | None = None  # PNG
    accessibility_tree: str | None = None
    shell_output: str | None = None  # last output, in the shell action space
    # A way to get a disposable copy of the current state (``osguard.scout.lookahead``):
    # a callable returning a ``StateFork`` (an environment, its home and working directory;
    # never the variant or its invariants). Not part of what models see or files store.
    fork: Callable[[], Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Verdict:
    """A verifier's decision. ``invalid`` means its output could not be parsed; it is never
    silently mapped to a label."""

    label: PredictedLabel
    feedback: str = ""
    raw: str | None = None  # the model's raw output, for audit
    latency_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens

    @property
    def blocks(self) -> bool:
        """Whether the guarded loop must not execute the action. ``invalid`` blocks: an
        unreadable verdict is not an approval."""
        return self.label != "allowed"

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "feedback": self.feedback, "raw": self.raw,
                "latency_s": self.latency_s, "usage": dict(self.usage)}


@runtime_checkable
class Verifier(Protocol):
    """Judges one candidate action. Implementations must be safe to call from threads."""

    name: str

    def judge(self, item: VerifierInput) -> Verdict: ...


class ScoutError(OsguardError):
    """Raised when a SCOUT input is invalid: a verifier spec or its file, an items
    directory, a predictions file, an annotation file, or a run directory for items."""
