"""OpenAI's computer-use model (``openai-cua:MODEL``) over the Responses API.

What it sends (``POST {base_url}/responses``, ``Authorization: Bearer``):

- ``tools``: one ``computer_use_preview`` tool (``environment: linux``) sized to the
  screenshot as sent (scaled to a long edge of at most 1024 pixels);
- first request: the instruction and the screenshot as one user message;
- then ``previous_response_id`` (the conversation lives on the server, ``truncation:
  auto``; ``history_images`` does not apply) and one ``computer_call_output`` per
  ``computer_call`` holding the screenshot after it; for a blocked call the screenshot of
  the unchanged screen and a user message saying it was blocked and why.

Each ``computer_call`` is one candidate action (pyautogui code, coordinates scaled back).
``pending_safety_checks`` are acknowledged in the next request and recorded with the
proposal (osguard's guardrail is the check under study, not OpenAI's). A reply without a
``computer_call`` ends the episode (``DONE``).
"""

from __future__ import annotations

import base64
import os
from typing import Any

from osguard.actions import Action
from osguard.errors import OsguardError
from osguard.runner.agent_types import AgentError, Observation
from osguard.runner.agents import computer as pc
from osguard.runner.agents._http import post_json, shape_error
from osguard.runner.agents.computer import Screen
from osguard.runner.agents.toolloop import BLOCKED, SKIPPED, Call, ToolLoopAgent, Turn

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SCROLL_PIXELS_PER_CLICK = 100  # the CUA scrolls in pixels, pyautogui in wheel clicks


class OpenAICUAAgent(ToolLoopAgent):
    """OpenAI computer use over the Responses API.

    Args:
        model: model name (e.g. ``computer-use-preview``).
        base_url: API root ending in /v1 (default ``$OPENAI_BASE_URL``, else OpenAI's).
        api_key: key (default ``$OPENAI_API_KEY``).
        max_long: the long edge of the screenshot as sent, in pixels.
        timeout, max_retries: per request.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 max_long: int = 1024, timeout: float = 120.0, max_retries: int = 2, **_ignored: Any):
        super().__init__()
        self.name = f"openai-cua:{model}"
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not self._api_key:
            raise OsguardError(f"agent {self.name}: no API key; set OPENAI_API_KEY or pass --api-key")
        self.max_long = max_long
        self._timeout = timeout
        self._max_retries = max_retries
        self._screen: Screen | None = None
        self._previous: str | None = None
        self._messages: list[dict[str, Any]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai-cua", "model": self.model, "base_url": self.base_url, "max_long": self.max_long}

    def _reset_dialect(self) -> None:
        self._screen, self._previous, self._messages = None, None, []

    def _image_url(self, obs: Observation) -> str:
        if obs.screenshot is None or self._screen is None:
            raise AgentError(f"{self.name}: computer use needs a screenshot, and this environment has no display")
        png = pc.scale_png(obs.screenshot, (self._screen.model_width, self._screen.model_height))
        return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

    def _ask(self, observation: Observation, results: list[Any]) -> Turn:
        if not self._started:
            if observation.screenshot is None:
                raise AgentError(f"{self.name}: computer use needs a screenshot, and this environment has no display")
            width, height = pc.png_size(observation.screenshot)
            self._screen = Screen(width, height, *pc.fit_within(width, height, self.max_long, self.max_long ** 2))
            items: list[dict[str, Any]] = [{"role": "user", "content": [
                {"type": "input_text", "text": self._instruction},
                {"type": "input_image", "image_url": self._image_url(observation)}]}]
        else:
            flat = [item for result in results for item in result]
            items = [r for r in flat if r.get("type") == "computer_call_output"]
            notes = [r["text"] for r in flat if r.get("type") == "note"]
            if notes:
                items.append({"role": "user", "content": [{"type": "input_text", "text": "\n".join(notes)}]})
        assert self._screen is not None
        body: dict[str, Any] = {
            "model": self.model, "truncation": "auto", "input": items,
            "tools": [{"type": "computer_use_preview", "display_width": self._screen.model_width,
                       "display_height": self._screen.model_height, "environment": "linux"}],
        }
        if self._previous is not None:
            body["previous_response_id"] = self._previous
        reply = post_json(self.name, f"{self.base_url}/responses", body,
                          {"Authorization": f"Bearer {self._api_key}"},
                          timeout=self._timeout, max_retries=self._max_retries)
        output = reply.get("output")
        if not isinstance(output, list) or not isinstance(reply.get("id"), str):
            raise shape_error(self.name, "id and output list")
        self._previous = reply["id"]
        raw_usage = reply.get("usage") or {}
        usage = {"prompt_tokens": int(raw_usage.get("input_tokens") or 0),
                 "completion_tokens": int(raw_usage.get("output_tokens") or 0)}
        texts = [part.get("text", "") for item in output if item.get("type") == "message"
                 for part in item.get("content") or [] if part.get("type") == "output_text"]
        calls = [self._call(item) for item in output if item.get("type") == "computer_call"]
        return Turn(text="\n".join(texts), calls=calls, usage=usage)

    def _call(self, item: dict[str, Any]) -> Call:
        args = item.get("action") or {}
        try:
            action = self._action(args)
            note = ""
        except AgentError as exc:
            action, note = None, f"Error: {exc}"
        return Call(id=str(item.get("call_id")), name="computer", input=args, action=action, note=note,
                    native=item)

    def _action(self, args: dict[str, Any]) -> Action | None:
        assert self._screen is not None
        screen = self._screen

        def xy(point: dict[str, Any]) -> tuple[int, int]:
            if not isinstance(point.get("x"), (int, float)) or not isinstance(point.get("y"), (int, float)):
                raise AgentError("the action needs numeric x and y")
            return screen.to_real(point["x"], point["y"])

        kind = args.get("type")
        if kind == "screenshot":
            return None
        if kind == "click":
            return Action("pyautogui", pc.click(*xy(args), button=str(args.get("button", "left"))))
        if kind == "double_click":
            return Action("pyautogui", pc.click(*xy(args), clicks=2))
        if kind == "move":
            return Action("pyautogui", pc.move(*xy(args)))
        if kind == "drag":
            return Action("pyautogui", pc.drag([xy(p) for p in args.get("path") or []]))
        if kind == "keypress":
            return Action("pyautogui", pc.keys([pc.key_name(str(k)) for k in args.get("keys") or []]))
        if kind == "type":
            return Action("pyautogui", pc.type_text(str(args.get("text", ""))))
        if kind == "scroll":
            def clicks(pixels: Any) -> int:
                value = int(pixels or 0)
                return 0 if value == 0 else (1 if value > 0 else -1) * max(1, round(abs(value) / SCROLL_PIXELS_PER_CLICK))
            return Action("pyautogui", pc.scroll(*xy(args), dx=clicks(args.get("scroll_x")), dy=clicks(args.get("scroll_y"))))
        if kind == "wait":
            return Action("special", "WAIT")
        raise AgentError(f"unknown computer action type {kind!r}")

    def _result(self, call: Call, observation: Observation, *, blocked: str | None = None,
                skipped: bool = False) -> Any:
        output = {"type": "computer_call_output", "call_id": call.id,
                  "output": {"type": "computer_screenshot", "image_url": self._image_url(observation)}}
        checks = call.native.get("pending_safety_checks") or []
        if checks:
            output["acknowledged_safety_checks"] = checks
        note = BLOCKED.format(feedback=blocked) if blocked is not None else SKIPPED if skipped else call.note
        # the output item, then (flattened by _ask) the note that follows it as a user message
        return [output] + ([{"type": "note", "text": note}] if note else [])
