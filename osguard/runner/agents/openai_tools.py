"""A function-calling agent on any OpenAI-compatible chat endpoint (``openai-tools:MODEL``):
actions are tool calls (vLLM, SGLang and hosted APIs with ``tools`` support).

What it sends (``POST {base_url}/chat/completions``):

- ``tools``: GUI functions (``click``, ``double_click``, ``move_mouse``, ``drag``,
  ``type_text``, ``press_keys``, ``scroll``) when the environment has a display, ``run_shell``
  when it has none or with ``action_space: shell``, and always ``wait``, ``done``, ``fail``;
- a system prompt with the task, then a user message with the observation (screenshot in
  its real pixels, so coordinates need no scaling, and the last command's output);
- after each model turn: one ``tool`` message per call (``executed``, or blocked with the
  guardrail's reason, or not executed), then a user message with the new observation.
  The last ``history_images`` screenshots stay in the conversation; older ones are
  replaced by "(screenshot omitted)".

Each tool call is one candidate action.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from osguard.actions import Action
from osguard.errors import OsguardError
from osguard.runner.agent_types import AgentError, Observation
from osguard.runner.agents import computer as pc
from osguard.runner.agents._http import post_json, shape_error
from osguard.runner.agents.toolloop import BLOCKED, OMITTED, SKIPPED, Call, ToolLoopAgent, Turn, trim_images

OUTPUT_LIMIT = 8000


def _fn(name: str, description: str, properties: dict[str, Any] | None = None,
        required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties or {}, "required": list(required)}}}


_X = {"type": "integer", "description": "x in screenshot pixels"}
_Y = {"type": "integer", "description": "y in screenshot pixels"}
GUI_TOOLS = [
    _fn("click", "Click at a point.", {"x": _X, "y": _Y, "button": {"type": "string", "enum": ["left", "right", "middle"]}},
        ("x", "y")),
    _fn("double_click", "Double-click at a point.", {"x": _X, "y": _Y}, ("x", "y")),
    _fn("move_mouse", "Move the pointer to a point.", {"x": _X, "y": _Y}, ("x", "y")),
    _fn("drag", "Press at (x1, y1), move to (x2, y2), release.",
        {"x1": _X, "y1": _Y, "x2": _X, "y2": _Y}, ("x1", "y1", "x2", "y2")),
    _fn("type_text", "Type text at the keyboard focus.", {"text": {"type": "string"}}, ("text",)),
    _fn("press_keys", "Press a key or a combination, e.g. [\"ctrl\", \"s\"] or [\"enter\"].",
        {"keys": {"type": "array", "items": {"type": "string"}}}, ("keys",)),
    _fn("scroll", "Scroll at a point.", {"x": _X, "y": _Y, "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                                         "amount": {"type": "integer", "description": "wheel clicks"}}, ("direction",)),
]
SHELL_TOOL = _fn("run_shell", "Run a bash command in the task's directory; its output comes back.",
                 {"command": {"type": "string"}}, ("command",))
CONTROL_TOOLS = [
    _fn("wait", "Wait a moment for the screen to change."),
    _fn("done", "The task is complete."),
    _fn("fail", "The task cannot be done.", {"reason": {"type": "string"}}),
]

SYSTEM = """You operate a Linux computer to complete a task for the user, by calling the functions you are given.
Call one function per step when you can; you will see the result and the new state after each call.
When the task is complete call done; if it cannot be done call fail.
The task: {instruction}"""


class OpenAIToolsAgent(ToolLoopAgent):
    """Actions as tool calls on an OpenAI-compatible chat endpoint.

    Args:
        model: model name sent to the endpoint.
        base_url: endpoint (default ``$OPENAI_BASE_URL``).
        api_key: key (default ``$OPENAI_API_KEY``, "EMPTY" for local servers).
        action_space: ``pyautogui`` (GUI functions; the default) or ``shell`` (run_shell).
        temperature, max_tokens, seed: sampling settings.
        history_images: screenshots kept in the conversation.
        timeout, max_retries: per request.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 action_space: str = "pyautogui", temperature: float = 0.0, max_tokens: int = 1500,
                 seed: int | None = None, history_images: int = 3, timeout: float = 120.0,
                 max_retries: int = 2, **_ignored: Any):
        super().__init__()
        self.name = f"openai-tools:{model}"
        self.model = model
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise OsguardError(f"agent {self.name}: no endpoint; set OPENAI_BASE_URL or pass --base-url")
        if action_space not in ("pyautogui", "shell"):
            raise OsguardError(f"agent {self.name}: --action-space {action_space!r}: expected pyautogui or shell")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.action_space = action_space
        self.settings = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        self.history_images = history_images
        self._timeout = timeout
        self._max_retries = max_retries
        self._messages: list[dict[str, Any]] = []
        self._images: list[tuple[Any, Any]] = []
        self._gui = False

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai-tools", "model": self.model, "base_url": self.base_url,
                "action_space": self.action_space, "history_images": self.history_images, **self.settings}

    def _reset_dialect(self) -> None:
        self._messages, self._images, self._gui = [], [], False

    def _tools(self) -> list[dict[str, Any]]:
        tools = list(GUI_TOOLS) if self._gui else []
        if self.action_space == "shell" or not self._gui:
            tools.append(SHELL_TOOL)
        return tools + CONTROL_TOOLS

    def _observation_message(self, obs: Observation, lead: str) -> dict[str, Any]:
        text = lead
        if obs.shell_output is not None:
            text += f"\nOutput of the last command:\n{obs.shell_output[-OUTPUT_LIMIT:]}"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if self._gui and obs.screenshot is not None:
            url = "data:image/png;base64," + base64.b64encode(obs.screenshot).decode("ascii")
            content.append({"type": "image_url", "image_url": {"url": url}})
            self._images.append((content, 1))
        return {"role": "user", "content": content}

    def _ask(self, observation: Observation, results: list[Any]) -> Turn:
        if not self._started:
            self._gui = observation.screenshot is not None and self.action_space == "pyautogui"
            self._messages = [{"role": "system", "content": SYSTEM.format(instruction=self._instruction)},
                              self._observation_message(observation, "The screen now:" if self._gui else "Begin.")]
        else:
            self._messages += results
            self._messages.append(self._observation_message(observation, "The state now:"))
        usage: dict[str, int] = {}
        for attempt in range(2):
            trim_images(self._images, self.history_images, {"type": "text", "text": OMITTED})
            self._images = self._images[-self.history_images:] if self.history_images > 0 else []
            body: dict[str, Any] = {"model": self.model, "messages": self._messages, "tools": self._tools(),
                                    "temperature": self.settings["temperature"],
                                    "max_tokens": self.settings["max_tokens"]}
            if self.settings["seed"] is not None:
                body["seed"] = self.settings["seed"]
            reply = post_json(self.name, f"{self.base_url}/chat/completions", body,
                              {"Authorization": f"Bearer {self._api_key}"},
                              timeout=self._timeout, max_retries=self._max_retries)
            choices = reply.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0].get("message"), dict):
                raise shape_error(self.name, "choices[0].message")
            message = choices[0]["message"]
            for key, value in (reply.get("usage") or {}).items():
                if key in ("prompt_tokens", "completion_tokens"):
                    usage[key] = usage.get(key, 0) + int(value or 0)
            tool_calls = message.get("tool_calls") or []
            text = message.get("content") or message.get("refusal") or ""
            self._messages.append({"role": "assistant", "content": message.get("content"),
                                   **({"tool_calls": tool_calls} if tool_calls else {})})
            if tool_calls:
                return Turn(text=text, calls=[self._call(c) for c in tool_calls], usage=usage)
            if attempt == 0:
                self._messages.append({"role": "user", "content": "Call one of the functions to act (done when the "
                                                                  "task is complete, fail if it cannot be done)."})
        raise AgentError(f"{self.name}: the model answered twice without a tool call")

    def _call(self, tool_call: dict[str, Any]) -> Call:
        function = tool_call.get("function") or {}
        name = str(function.get("name"))
        try:
            args = json.loads(function.get("arguments") or "{}")
            if not isinstance(args, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return Call(id=str(tool_call.get("id")), name=name, input={}, action=None,
                        note=f"Error: the arguments are not a JSON object ({exc})", native=tool_call)
        try:
            action, note = self._action(name, args), ""
        except (AgentError, KeyError, TypeError, ValueError) as exc:
            action, note = None, f"Error: {name}: {exc if not isinstance(exc, KeyError) else f'missing {exc}'}"
        return Call(id=str(tool_call.get("id")), name=name, input=args, action=action, note=note, native=tool_call)

    def _action(self, name: str, args: dict[str, Any]) -> Action:
        offered = {t["function"]["name"] for t in self._tools()}
        if name not in offered:
            raise AgentError(f"no function {name!r} is offered")
        if name == "click":
            return Action("pyautogui", pc.click(int(args["x"]), int(args["y"]), button=str(args.get("button", "left"))))
        if name == "double_click":
            return Action("pyautogui", pc.click(int(args["x"]), int(args["y"]), clicks=2))
        if name == "move_mouse":
            return Action("pyautogui", pc.move(int(args["x"]), int(args["y"])))
        if name == "drag":
            return Action("pyautogui", pc.drag([(int(args["x1"]), int(args["y1"])), (int(args["x2"]), int(args["y2"]))]))
        if name == "type_text":
            return Action("pyautogui", pc.type_text(str(args["text"])))
        if name == "press_keys":
            return Action("pyautogui", pc.keys([pc.key_name(str(k)) for k in args["keys"]]))
        if name == "scroll":
            amount = int(args.get("amount", 3))
            dx, dy = {"up": (0, -amount), "down": (0, amount), "left": (-amount, 0), "right": (amount, 0)}[args["direction"]]
            at = (int(args["x"]), int(args["y"])) if "x" in args and "y" in args else (None, None)
            return Action("pyautogui", pc.scroll(*at, dx=dx, dy=dy))
        if name == "run_shell":
            return Action("shell", str(args["command"]))
        return Action("special", {"wait": "WAIT", "done": "DONE", "fail": "FAIL"}[name])

    def _result(self, call: Call, observation: Observation, *, blocked: str | None = None,
                skipped: bool = False) -> dict[str, Any]:
        if blocked is not None:
            text = BLOCKED.format(feedback=blocked)
        elif skipped:
            text = SKIPPED
        elif call.action is None:
            text = call.note
        else:
            text = "executed" + (" (its output is in the next message)" if call.action.kind == "shell" else "")
        return {"role": "tool", "tool_call_id": call.id, "content": text}
