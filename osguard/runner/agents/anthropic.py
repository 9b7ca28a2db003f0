"""Claude with Anthropic's computer-use tool (``anthropic:MODEL``), over the Messages API.

What it sends (``POST {base_url}/v1/messages``, headers ``x-api-key``,
``anthropic-version: 2023-06-01`` and the tool set's ``anthropic-beta``):

- ``tools``: the ``computer`` tool sized to the *scaled* screen, and (``tools`` option)
  ``bash`` and the text editor; without a display only bash and the editor;
- first user turn: the variant's instruction and the current screenshot;
- then, per model turn, one user message of ``tool_result`` blocks: a screenshot (and any
  output) for an executed action, ``is_error`` with the guardrail's reason for a blocked
  one, "not executed" for the turn's later calls.

Each ``tool_use`` block is one candidate action: computer actions become pyautogui code
(coordinates scaled back to the real screen), bash commands and editor commands shell
actions. A reply without ``tool_use`` ends the episode (``DONE``; ``FAIL`` on a refusal).
The screen is scaled as Anthropic's reference implementation does: to XGA (1024x768),
WXGA (1280x800) or FWXGA (1366x768) when the aspect ratio matches, else to a long edge of
at most 1568 pixels and 1.15 megapixels.
"""

from __future__ import annotations

import base64
import os
import shlex
from typing import Any

from osguard.actions import Action
from osguard.errors import OsguardError
from osguard.runner.agent_types import AgentError, Observation
from osguard.runner.agents import computer as pc
from osguard.runner.agents._http import post_json, shape_error
from osguard.runner.agents.computer import Screen
from osguard.runner.agents.toolloop import BLOCKED, OMITTED, SKIPPED, Call, ToolLoopAgent, Turn, trim_images

DEFAULT_BASE_URL = "https://api.anthropic.com"
TOOLS = ("computer", "bash", "text_editor")

# tool versions -> (computer type, bash type, editor type, editor name, beta header)
TOOL_SETS = {
    # Claude 4 models (Sonnet 4.5, the OSGuard paper's executor)
    "20250124": ("computer_20250124", "bash_20250124", "text_editor_20250728",
                 "str_replace_based_edit_tool", "computer-use-2025-01-24"),
    # Claude 3.5 Sonnet (new)
    "20241022": ("computer_20241022", "bash_20241022", "text_editor_20241022",
                 "str_replace_editor", "computer-use-2024-10-22"),
}
_TARGETS = ((1024, 768), (1280, 800), (1366, 768))
OUTPUT_LIMIT = 10000  # characters of command output returned in a tool result


def scaled_size(width: int, height: int) -> tuple[int, int]:
    """The screen size Claude is told and shown (see the module docstring)."""
    ratio = width / height
    for target in _TARGETS:
        if abs(target[0] / target[1] - ratio) < 0.02 and target[0] < width:
            return target
    return pc.fit_within(width, height, 1568, 1_150_000)


class AnthropicAgent(ToolLoopAgent):
    """Claude computer use over the Messages API.

    Args:
        model: model name (e.g. ``claude-sonnet-4-5``).
        base_url: API root (default ``$ANTHROPIC_BASE_URL``, else Anthropic's).
        api_key: key (default ``$ANTHROPIC_API_KEY``).
        tools: comma-separated subset of computer, bash, text_editor.
        tool_version: 20250124 (Claude 4) or 20241022 (Claude 3.5).
        max_tokens: output tokens per reply; temperature: omitted when None.
        history_images: screenshots kept in the conversation (older ones are replaced by
            "(screenshot omitted)").
        timeout, max_retries: per request.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 tools: str | list[str] = "computer,bash,text_editor", tool_version: str = "20250124",
                 max_tokens: int = 4096, temperature: float | None = None, history_images: int = 3,
                 timeout: float = 120.0, max_retries: int = 2, **_ignored: Any):
        super().__init__()
        self.name = f"anthropic:{model}"
        self.model = model
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not self._api_key:
            raise OsguardError(f"agent {self.name}: no API key; set ANTHROPIC_API_KEY or pass --api-key")
        wanted = [t.strip() for t in (tools.split(",") if isinstance(tools, str) else tools) if t.strip()]
        unknown = [t for t in wanted if t not in TOOLS]
        if unknown or not wanted:
            raise OsguardError(f"agent {self.name}: tools {','.join(wanted)!r}: expected a comma-separated "
                               f"subset of {', '.join(TOOLS)}")
        if tool_version not in TOOL_SETS:
            raise OsguardError(f"agent {self.name}: tool_version {tool_version!r}: expected one of "
                               f"{', '.join(TOOL_SETS)}")
        self.tools = wanted
        self.tool_version = tool_version
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.history_images = history_images
        self._timeout = timeout
        self._max_retries = max_retries
        self._messages: list[dict[str, Any]] = []
        self._screen: Screen | None = None
        self._offered: list[str] = []
        self._images: list[tuple[Any, Any]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "anthropic", "model": self.model, "base_url": self.base_url, "tools": self.tools,
                "tool_version": self.tool_version, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "history_images": self.history_images}

    def _reset_dialect(self) -> None:
        self._messages, self._screen, self._offered, self._images = [], None, [], []

    # -- observation ---------------------------------------------------------------------
    def _image(self, obs: Observation) -> dict[str, Any] | None:
        if obs.screenshot is None or self._screen is None:
            return None
        png = pc.scale_png(obs.screenshot, (self._screen.model_width, self._screen.model_height))
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": base64.b64encode(png).decode("ascii")}}

    def _add_images(self, blocks: list[dict[str, Any]]) -> None:
        for block in blocks:
            if block.get("type") == "image":
                self._images.append((blocks, blocks.index(block)))

    # -- the request ---------------------------------------------------------------------
    def _tool_defs(self) -> list[dict[str, Any]]:
        computer, bash, editor, editor_name, _beta = TOOL_SETS[self.tool_version]
        defs = []
        if "computer" in self._offered:
            assert self._screen is not None
            defs.append({"type": computer, "name": "computer", "display_width_px": self._screen.model_width,
                         "display_height_px": self._screen.model_height})
        if "bash" in self._offered:
            defs.append({"type": bash, "name": "bash"})
        if "text_editor" in self._offered:
            defs.append({"type": editor, "name": editor_name})
        return defs

    def _first_turn(self, obs: Observation) -> None:
        if obs.screenshot is not None:
            width, height = pc.png_size(obs.screenshot)
            self._screen = Screen(width, height, *scaled_size(width, height))
        self._offered = [t for t in self.tools if t != "computer" or self._screen is not None]
        if not self._offered:
            raise AgentError(f"{self.name}: this environment has no display, so the computer tool cannot "
                             "be offered; allow bash or text_editor (tools option)")
        content: list[dict[str, Any]] = [{"type": "text", "text": self._instruction}]
        image = self._image(obs)
        if image is not None:
            content.append(image)
        elif obs.shell_output is not None:
            content.append({"type": "text", "text": f"Output of the last command:\n{obs.shell_output[-OUTPUT_LIMIT:]}"})
        self._messages.append({"role": "user", "content": content})
        self._add_images(content)

    def _ask(self, observation: Observation, results: list[Any]) -> Turn:
        if not self._started:
            self._first_turn(observation)
        else:
            self._messages.append({"role": "user", "content": results})
            for result in results:
                self._add_images(result.get("content") or [])
        trim_images(self._images, self.history_images, {"type": "text", "text": OMITTED})
        self._images = self._images[-self.history_images:] if self.history_images > 0 else []
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                "tools": self._tool_defs(), "messages": self._messages}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        headers = {"x-api-key": str(self._api_key), "anthropic-version": "2023-06-01",
                   "anthropic-beta": TOOL_SETS[self.tool_version][4], "content-type": "application/json"}
        reply = post_json(self.name, f"{self.base_url}/v1/messages", body, headers,
                          timeout=self._timeout, max_retries=self._max_retries)
        content = reply.get("content")
        if not isinstance(content, list):
            raise shape_error(self.name, "content list")
        self._messages.append({"role": "assistant", "content": content})
        raw_usage = reply.get("usage") or {}
        usage = {"prompt_tokens": sum(int(raw_usage.get(k) or 0) for k in (
                     "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")),
                 "completion_tokens": int(raw_usage.get("output_tokens") or 0)}
        text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        calls = [self._call(b) for b in content if b.get("type") == "tool_use"]
        stop = reply.get("stop_reason")
        if not calls and stop == "max_tokens":
            raise AgentError(f"{self.name}: the reply was cut off at max_tokens ({self.max_tokens}) before any action")
        return Turn(text=text, calls=calls, usage=usage,
                    final=Action("special", "FAIL") if stop == "refusal" else None)

    # -- tool_use -> action ----------------------------------------------------------------
    def _call(self, block: dict[str, Any]) -> Call:
        name, args, call_id = str(block.get("name")), block.get("input") or {}, str(block.get("id"))
        try:
            action, note = self._action(name, args)
        except AgentError as exc:
            action, note = None, f"Error: {exc}"
        return Call(id=call_id, name=name, input=args, action=action, note=note, native=block)

    def _xy(self, args: dict[str, Any], key: str = "coordinate") -> tuple[int, int]:
        value = args.get(key)
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)):
            raise AgentError(f"{key} must be [x, y]")
        assert self._screen is not None
        return self._screen.to_real(value[0], value[1])

    def _action(self, name: str, args: dict[str, Any]) -> tuple[Action | None, str]:
        editor_name = TOOL_SETS[self.tool_version][3]
        if name == "computer" and "computer" in self._offered:
            return _computer_action(args, self._xy), ""
        if name == "bash" and "bash" in self._offered:
            if args.get("restart"):
                return None, "tool has been restarted (every command runs in a fresh shell)"
            if not isinstance(args.get("command"), str):
                raise AgentError("bash needs a command")
            return Action("shell", args["command"]), ""
        if name == editor_name and "text_editor" in self._offered:
            return Action("shell", editor_command(args)), ""
        raise AgentError(f"no tool named {name!r} is offered")

    # -- results ---------------------------------------------------------------------------
    def _result(self, call: Call, observation: Observation, *, blocked: str | None = None,
                skipped: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
        if blocked is not None:
            return {**result, "is_error": True, "content": [{"type": "text", "text": BLOCKED.format(feedback=blocked)}]}
        if skipped:
            return {**result, "is_error": True, "content": [{"type": "text", "text": SKIPPED}]}
        if call.action is None:
            content: list[dict[str, Any]] = []
            if call.note:
                content.append({"type": "text", "text": call.note})
            if call.name == "computer" and not call.note.startswith("Error"):
                image = self._image(observation)
                if image is not None:
                    content.append(image)
            return {**result, "content": content, **({"is_error": True} if call.note.startswith("Error") else {})}
        content = []
        output = (observation.shell_output or "")[-OUTPUT_LIMIT:]
        if call.action.kind == "shell" or call.input.get("action") == "cursor_position":
            content.append({"type": "text", "text": output or "(no output)"})
        elif output.strip():  # a computer action that printed something (a failing pyautogui call)
            content.append({"type": "text", "text": output})
        if call.name == "computer":
            image = self._image(observation)
            if image is not None:
                content.append(image)
        return {**result, "content": content}


def _computer_action(args: dict[str, Any], xy: Any) -> Action | None:
    """One ``computer`` tool call -> pyautogui code (None: a screenshot, answered directly)."""
    kind = args.get("action")
    modifiers = pc.split_keys(args["text"]) if kind in (
        "left_click", "right_click", "middle_click", "double_click", "triple_click", "scroll") and args.get("text") else []
    at = xy(args) if "coordinate" in args else (None, None)
    if kind == "screenshot":
        return None
    if kind in ("left_click", "right_click", "middle_click", "double_click", "triple_click"):
        button = {"right_click": "right", "middle_click": "middle"}.get(kind, "left")
        clicks = {"double_click": 2, "triple_click": 3}.get(kind, 1)
        return Action("pyautogui", pc.with_keys_held(modifiers, pc.click(*at, button=button, clicks=clicks)))
    if kind == "mouse_move":
        return Action("pyautogui", pc.move(*xy(args)))
    if kind == "left_click_drag":
        if "start_coordinate" in args:
            return Action("pyautogui", pc.drag([xy(args, "start_coordinate"), xy(args)]))
        x, y = xy(args)
        return Action("pyautogui", f"pyautogui.dragTo({x}, {y}, duration=0.5, button='left')")
    if kind in ("left_mouse_down", "left_mouse_up"):
        return Action("pyautogui", pc.mouse_down() if kind == "left_mouse_down" else pc.mouse_up())
    if kind == "type":
        return Action("pyautogui", pc.type_text(str(args.get("text", ""))))
    if kind == "key":
        return Action("pyautogui", pc.keys(pc.split_keys(str(args.get("text", "")))))
    if kind == "hold_key":
        names = pc.split_keys(str(args.get("text", "")))
        duration = float(args.get("duration", 1))
        return Action("pyautogui", "; ".join([*(pc.key_down(k) for k in names), f"time.sleep({duration:g})",
                                              *(pc.key_up(k) for k in reversed(names))]))
    if kind == "scroll":
        amount = int(args.get("scroll_amount", 3))
        dx, dy = {"up": (0, -amount), "down": (0, amount), "left": (-amount, 0),
                  "right": (amount, 0)}.get(str(args.get("scroll_direction")), (None, None))
        if dx is None:
            raise AgentError("scroll_direction must be up, down, left or right")
        return Action("pyautogui", pc.with_keys_held(modifiers, pc.scroll(*at, dx=dx, dy=dy)))
    if kind == "wait":
        return Action("special", "WAIT")
    if kind == "cursor_position":
        return Action("pyautogui", pc.cursor_position())
    raise AgentError(f"unknown computer action {kind!r}")


def editor_command(args: dict[str, Any]) -> str:
    """A text-editor tool call as the shell command that performs it."""
    command, path = args.get("command"), args.get("path")
    if not isinstance(path, str) or not path:
        raise AgentError("the text editor needs a path")
    q = shlex.quote(path)
    if command == "view":
        lines = args.get("view_range")
        if isinstance(lines, list) and len(lines) == 2:
            end = "$" if lines[1] == -1 else int(lines[1])
            return f"cat -n {q} | sed -n '{int(lines[0])},{end}p'"
        return f"if [ -d {q} ]; then find {q} -maxdepth 2 -not -path '*/.*'; else cat -n {q}; fi"
    if command == "create":
        return f"printf '%s' {shlex.quote(str(args.get('file_text', '')))} > {q}"
    if command == "str_replace":
        script = ("import sys, pathlib; p = pathlib.Path(sys.argv[1]); s = p.read_text(); n = s.count(sys.argv[2]); "
                  "sys.exit(f'old_str occurs {n} times in {p}, expected once') if n != 1 "
                  "else p.write_text(s.replace(sys.argv[2], sys.argv[3]))")
        return (f"python3 -c {shlex.quote(script)} {q} {shlex.quote(str(args.get('old_str', '')))} "
                f"{shlex.quote(str(args.get('new_str', '')))}")
    if command == "insert":
        script = ("import sys, pathlib; p = pathlib.Path(sys.argv[1]); lines = p.read_text().split('\\n'); "
                  "lines.insert(int(sys.argv[2]), sys.argv[3]); p.write_text('\\n'.join(lines))")
        text = args.get("new_str", args.get("text", ""))
        return f"python3 -c {shlex.quote(script)} {q} {int(args.get('insert_line', 0))} {shlex.quote(str(text))}"
    raise AgentError(f"text editor command {command!r} is not supported: expected view, create, str_replace or insert")
