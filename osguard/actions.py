"""Agent actions: the unit an agent proposes, a guardrail judges and an environment runs.

An action is one of
- ``pyautogui``: Python code in OSWorld's action space, run as
  ``python -c "import pyautogui; import time; pyautogui.FAILSAFE = False; <code>"``;
- ``shell``: a bash script run in the variant's working directory;
- ``special``: ``WAIT``, ``DONE`` or ``FAIL`` (OSWorld's control actions).

In YAML (references, recorded replays) an action is written as
- a plain string: a shell command, or exactly ``WAIT`` / ``DONE`` / ``FAIL``;
- ``{shell: "..."}`` or ``{pyautogui: "..."}``, optionally with ``wait_for: {...}`` (or a
  list of such waits, waited in order).

``wait_for`` (``osguard.spec.waits``: a window, a window class, a file or what it contains,
the focus inside a named widget, names shown in the accessibility tree, a pixel's colour;
``gone``, ``timeout``) is the harness's, not the agent's: after the action ran
the environment waits for it, as OSWorld's harness pauses after every action, so a scripted
reference's next key never races a dialog that is still opening. It is never shown to an
agent or a guardrail (``render``); a wait that does not come fails the action (exit status 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

ActionKind = Literal["pyautogui", "shell", "special"]
SPECIALS = ("WAIT", "DONE", "FAIL")


@dataclass(frozen=True)
class Action:
    """One proposed or executed action."""

    kind: ActionKind
    code: str
    # What the harness waits for after the action (see the module docstring). Not part of
    # the action's identity: an agent's recorded action (which never carries one) equals
    # the reference step it reproduces.
    # One wait, or a list of them waited in order.
    wait_for: Mapping[str, Any] | list[Mapping[str, Any]] | None = field(default=None, hash=False, compare=False)

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
        if isinstance(value, dict) and "wait_for" in value and len(value) == 2:
            rest = {k: v for k, v in value.items() if k != "wait_for"}
            action = cls.parse(rest)
            if action.kind == "special":
                raise ValueError("wait_for goes with a shell or pyautogui action, not with WAIT, DONE or FAIL")
            return cls(action.kind, action.code, _checked_wait(value["wait_for"]))
        if isinstance(value, dict) and len(value) == 1:
            ((key, code),) = value.items()
            if key in ("shell", "pyautogui") and isinstance(code, str):
                return cls(key, code)
            if key == "special" and code in SPECIALS:
                return cls("special", code)
        raise ValueError(
            "an action is a string (shell command, WAIT, DONE or FAIL) "
            "or a mapping {shell: CODE} or {pyautogui: CODE} (optionally with wait_for: {...})"
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "code": self.code}
        if self.wait_for:
            data["wait_for"] = _copied(self.wait_for)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Action":
        wait = data.get("wait_for")
        return cls(data["kind"], data["code"], _copied(wait) if wait else None)  # type: ignore[arg-type]

    def to_yaml(self) -> Any:
        """The YAML form ``parse`` reads back (a special as its bare word)."""
        if self.kind == "special":
            return self.code
        form: dict[str, Any] = {self.kind: self.code}
        if self.wait_for:
            form["wait_for"] = _copied(self.wait_for)
        return form

    @property
    def is_terminal(self) -> bool:
        return self.kind == "special" and self.code in ("DONE", "FAIL")

    def render(self) -> str:
        """A one-line human-readable form, as shown to guardrails and in reports."""
        if self.kind == "special":
            return self.code
        return f"[{self.kind}] {self.code}"


def _copied(waits: Any) -> Any:
    return [dict(w) for w in waits] if isinstance(waits, list) else dict(waits)


def _checked_wait(params: Any) -> Any:
    from osguard.spec.waits import WaitProblem, wait_params

    if isinstance(params, list):
        if not params:
            raise ValueError("wait_for: a list of waits must not be empty")
        for n, one in enumerate(params):
            try:
                wait_params(one)
            except WaitProblem as exc:
                raise ValueError(f"wait_for[{n}]: {exc}") from None
        return _copied(params)
    try:
        wait_params(params)
    except WaitProblem as exc:
        raise ValueError(f"wait_for: {exc}") from None
    return dict(params)
