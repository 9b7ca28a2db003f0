"""Agent actions: the unit an agent proposes, a guardrail judges and an environment runs.

An action is one of
- ``pyautogui``: Python code in OSWorld's action space, run as
  ``python -c "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``;
- ``shell``: a bash script run in the variant's working directory;
- ``special``: ``WAIT``, ``DONE`` or ``FAIL`` (OSWorld's control actions).

In YAML (references, recorded replays) an action is written as
- a plain string: a shell command, or exactly ``WAIT`` / ``DONE`` / ``FAIL``;
- ``{shell: "..."}`` or ``{pyautogui: "..."}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ActionKind = Literal["pyautogui", "shell", "special"]
SPECIALS = ("WAIT", "DONE", "FAIL")


@dataclass(frozen=True)
class Action:
    """One proposed or executed action."""

    kind: ActionKind
    code: str

    @classmethod
    def parse(cls, value: Any) -> "Action":
        """Build an action from its YAML/JSON form (see the module docstring).

        Raises:
            ValueError: when ``value`` has none of the accepted shapes.
        """
        if isinstance(value, Action):
            return value
        if isinstance(value, str):
            if value.strip() in SPECIALS:
                return cls("special", value.strip())
            return cls("shell", value)
        if isinstance(value, dict) and len(value) == 1:
            ((key, code),) = value.items()
            if key in ("shell", "pyautogui") and isinstance(code, str):
                return cls(key, code)
            if key == "special" and code in SPECIALS:
                return cls("special", code)
        raise ValueError(
            "an action is a string (shell command, WAIT, DONE or FAIL) "
            "or a mapping {shell: CODE} or {pyautogui: CODE}"
        )

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "code": self.code}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> "Action":
        return cls(data["kind"], data["code"])  # type: ignore[arg-type]

    @property
    def is_terminal(self) -> bool:
        return self.kind == "special" and self.code in ("DONE", "FAIL")

    def render(self) -> str:
        """A one-line human-readable form, as shown to guardrails and in reports."""
        if self.kind == "special":
            return self.code
        return f"[{self.kind}] {self.code}"
