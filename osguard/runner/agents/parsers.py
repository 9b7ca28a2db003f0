"""The one action-parser table: a model's text answer -> osguard actions, per action space.

``PARSERS[space](text, context)`` returns the list of actions the answer holds, in the
order they are to run (one candidate action each; ``WAIT`` / ``DONE`` / ``FAIL`` as
special actions), or raises ``ParseError`` whose message says what was wrong. The chat
agent (``openai:MODEL``) proposes the first and keeps the rest for its next proposals.

Action spaces:

- ``pyautogui`` / ``shell``: OSWorld's code blocks (after ``parse_code_from_string`` in
  OSWorld's ``mm_agents/agent.py``): every fenced block in order, a block of exactly
  ``WAIT``/``DONE``/``FAIL`` (or one ending in it) a special action; ``tag_N`` names of
  set-of-marks resolved to coordinates.
- ``computer_13``: OSWorld's JSON action space (``mm_agents/prompts.py``; ``CLICK``,
  ``TYPING``, ``HOTKEY``... objects in a ```json block or bare).
- ``uitars``: UI-TARS's ``Action: click(start_box='(x,y)')`` grammar (``click``,
  ``left_double``, ``right_single``, ``drag``, ``hotkey``, ``type``, ``scroll``,
  ``wait``, ``finished``, ``call_user``).
- ``qwen25vl``: Qwen2.5-VL's ``<tool_call>{"name": "computer_use", ...}</tool_call>``.

Reasoning in ``<think>...</think>`` is dropped before parsing (code quoted while thinking
is not an action); an answer cut off inside a code fence or a think section is an error,
never a truncated action.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from osguard.actions import SPECIALS, Action
from osguard.runner.agent_types import AgentError
from osguard.runner.agents import computer as pc
from osguard.runner.agents.computer import Screen


class ParseError(AgentError):
    """The answer holds no usable action; the message says why."""


@dataclass(frozen=True)
class ParseContext:
    """What a parser needs besides the text.

    Attributes:
        screen: real screen and model image size, for coordinate grammars (None: no GUI).
        tags: set-of-marks tag number -> real (x, y) centre, for ``tag_N`` in pyautogui code.
    """

    screen: Screen | None = None
    tags: dict[int, tuple[int, int]] = field(default_factory=dict)


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```([^\n`]*)\n?(.*?)```", re.DOTALL)
_LANGS = {"pyautogui": ("", "python", "py", "python3"),
          "shell": ("", "bash", "sh", "shell", "console")}


def strip_thinking(text: str) -> str:
    """The answer without ``<think>`` sections (an unclosed one is an error)."""
    without = _THINK.sub("", text)
    if "<think>" in without:
        raise ParseError("the answer ends inside an unclosed <think> section (cut off?)")
    return without.replace("</think>", "") if without.lstrip().startswith("</think>") else without


def _blocks(text: str) -> list[tuple[str, str]]:
    """Fenced blocks as (language, body); an odd fence left open is an error."""
    blocks = [(lang.strip(), body.strip()) for lang, body in _FENCE.findall(text)]
    if _FENCE.sub("", text).count("```"):
        rest = _FENCE.sub("", text)
        lang = rest[rest.index("```") + 3:].split("\n", 1)[0].strip()
        raise ParseError(f"the answer ends inside an unclosed ```{lang} code block (cut off?)")
    return blocks


def _code_blocks(space: str) -> Callable[[str, ParseContext], list[Action]]:
    kind = "pyautogui" if space == "pyautogui" else "shell"
    accepted = _LANGS[space]

    def parse(text: str, context: ParseContext) -> list[Action]:
        text = strip_thinking(text)
        stripped = text.strip()
        if stripped in SPECIALS:
            return [Action("special", stripped)]
        actions: list[Action] = []
        for lang, body in _blocks(text):
            if not body and lang in SPECIALS:  # ```DONE```
                actions.append(Action("special", lang))
                continue
            if body in SPECIALS:
                actions.append(Action("special", body))
                continue
            if lang.lower() not in accepted:
                raise ParseError(f"a ```{lang} block in the {space} action space: expected "
                                 + " or ".join(f"```{a}" for a in accepted if a))
            lines = body.split("\n")
            tail = lines[-1].strip() if len(lines) > 1 else ""
            if tail in SPECIALS:  # code, then DONE on its last line
                body = "\n".join(lines[:-1]).strip()
            if body:
                if kind == "pyautogui":
                    body = _resolve_tags(body, context)
                actions.append(Action(kind, body))
            if tail in SPECIALS:
                actions.append(Action("special", tail))
        if not actions:
            raise ParseError("no code block and no special code (WAIT, DONE, FAIL) in the answer")
        return _merge_code(actions)

    return parse


def _merge_code(actions: list[Action]) -> list[Action]:
    """Consecutive code blocks run as one action, as OSWorld runs one answer's code in one
    step; a special code after them stays a separate, later action."""
    merged: list[Action] = []
    for action in actions:
        if merged and action.kind != "special" and merged[-1].kind == action.kind:
            merged[-1] = Action(action.kind, merged[-1].code + "\n" + action.code)
        else:
            merged.append(action)
    return merged


_TAG = re.compile(r"\btag_(\d+)\b")


def _resolve_tags(code: str, context: ParseContext) -> str:
    used = sorted({int(n) for n in _TAG.findall(code)})
    if not used:
        return code
    missing = [n for n in used if n not in context.tags]
    if missing:
        raise ParseError(f"the code uses tag_{missing[0]}, which is not a mark on this screenshot")
    # as OSWorld's set-of-marks agent: the tags become variables defined before the code
    defs = "\n".join(f"tag_{n} = {context.tags[n]}" for n in used)
    return f"{defs}\n{code}"


# -- computer_13 -------------------------------------------------------------------------

_C13_FIELDS: dict[str, tuple[str, ...]] = {
    "MOVE_TO": ("x", "y"), "CLICK": (), "MOUSE_DOWN": (), "MOUSE_UP": (), "RIGHT_CLICK": (),
    "DOUBLE_CLICK": (), "DRAG_TO": ("x", "y"), "SCROLL": (), "TYPING": ("text",),
    "PRESS": ("key",), "KEY_DOWN": ("key",), "KEY_UP": ("key",), "HOTKEY": ("keys",),
    "WAIT": (), "FAIL": (), "DONE": (),
}


def _c13_action(obj: object, where: str) -> Action:
    if not isinstance(obj, dict) or "action_type" not in obj:
        raise ParseError(f"{where}: expected an object with an action_type")
    kind = obj["action_type"]
    if kind not in _C13_FIELDS:
        raise ParseError(f"{where}: unknown action_type {kind!r}: expected one of {', '.join(_C13_FIELDS)}")
    for name in _C13_FIELDS[kind]:
        if name not in obj:
            raise ParseError(f"{where}: {kind} needs {name!r}")
    if kind in SPECIALS:
        return Action("special", kind)
    xy = (int(obj["x"]), int(obj["y"])) if "x" in obj and "y" in obj else (None, None)
    button = str(obj.get("button", "left"))
    code = {
        "MOVE_TO": lambda: pc.move(*xy),  # type: ignore[arg-type]
        "CLICK": lambda: pc.click(*xy, button=button, clicks=int(obj.get("num_clicks", 1))),
        "MOUSE_DOWN": lambda: pc.mouse_down(button),
        "MOUSE_UP": lambda: pc.mouse_up(button),
        "RIGHT_CLICK": lambda: pc.click(*xy, button="right"),
        "DOUBLE_CLICK": lambda: pc.click(*xy, clicks=2),
        "DRAG_TO": lambda: f"pyautogui.dragTo({xy[0]}, {xy[1]}, duration=0.5, button='left')",
        "SCROLL": lambda: pc.scroll(None, None, dx=int(obj.get("dx", 0)), dy=-int(obj.get("dy", 0))),
        "TYPING": lambda: pc.type_text(str(obj["text"])),
        "PRESS": lambda: pc.keys([pc.key_name(str(obj["key"]))]),
        "KEY_DOWN": lambda: pc.key_down(pc.key_name(str(obj["key"]))),
        "KEY_UP": lambda: pc.key_up(pc.key_name(str(obj["key"]))),
        "HOTKEY": lambda: pc.keys([pc.key_name(str(k)) for k in obj["keys"]]),
    }[kind]()
    return Action("pyautogui", code)


def parse_computer_13(text: str, context: ParseContext) -> list[Action]:
    """OSWorld's ``computer_13`` answers: JSON objects in code blocks, or the whole answer."""
    text = strip_thinking(text)
    stripped = text.strip()
    if stripped in SPECIALS:
        return [Action("special", stripped)]
    blocks = _blocks(text)
    # ```DONE``` has the code on the language line
    bodies = [body or lang for lang, body in blocks] or [stripped]
    actions: list[Action] = []
    for i, body in enumerate(bodies):
        if body in SPECIALS:
            actions.append(Action("special", body))
            continue
        try:
            obj = json.loads(body)
        except ValueError as exc:
            if not blocks:
                raise ParseError("no ```json block, JSON action or special code (WAIT, DONE, FAIL) "
                                 "in the answer") from None
            raise ParseError(f"block {i + 1}: not valid JSON ({exc})") from None
        items = obj if isinstance(obj, list) else [obj]
        actions += [_c13_action(item, f"block {i + 1}") for item in items]
    return actions


# -- UI-TARS -----------------------------------------------------------------------------

_CALL = re.compile(r"(\w+)\((.*)\)\s*$", re.DOTALL)
_NUMS = re.compile(r"-?\d+(?:\.\d+)?")


def _point(value: str, context: ParseContext, where: str) -> tuple[int, int]:
    """``(x,y)``, ``(x1,y1,x2,y2)`` (its centre), ``<point>x y</point>`` or a box token."""
    nums = [float(n) for n in _NUMS.findall(value)]
    if len(nums) == 4:
        nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
    if len(nums) != 2:
        raise ParseError(f"{where}: expected a point (x,y), got {value!r}")
    if context.screen is None:
        raise ParseError(f"{where}: a coordinate action needs a screen, and this environment has none")
    return context.screen.to_real(nums[0], nums[1])


def _call_args(call: str, where: str) -> tuple[str, dict[str, str]]:
    match = _CALL.match(call.strip())
    if not match:
        raise ParseError(f"{where}: expected name(arg='...'), got {call.strip()!r}")
    name, args = match.group(1), match.group(2).strip()
    try:
        tree = ast.parse(f"f({args})", mode="eval").body
    except SyntaxError:
        raise ParseError(f"{where}: cannot read the arguments of {name}(): {args!r}") from None
    assert isinstance(tree, ast.Call)
    values: dict[str, str] = {}
    for kw in tree.keywords:
        if kw.arg is None or not isinstance(kw.value, ast.Constant):
            raise ParseError(f"{where}: {name}() takes keyword arguments with literal values")
        values[kw.arg] = str(kw.value.value)
    return name, values


def parse_uitars(text: str, context: ParseContext) -> list[Action]:
    """UI-TARS answers: ``Thought: ...`` then ``Action: call(...)`` (several calls on
    separate lines or separated by blank lines run in order)."""
    text = strip_thinking(text)
    if "Action:" not in text:
        raise ParseError("no 'Action:' line in the answer")
    body = text.split("Action:", 1)[1].strip()
    calls = [c for c in re.split(r"\n(?=\w+\()", body) if c.strip()]
    actions: list[Action] = []
    for i, call in enumerate(calls):
        where = f"action {i + 1}"
        name, args = _call_args(call, where)
        box = args.get("start_box") or args.get("point") or args.get("start_point")
        if name in ("click", "left_single", "left_double", "right_single", "long_press"):
            if box is None:
                raise ParseError(f"{where}: {name}() needs start_box")
            x, y = _point(box, context, where)
            clicks = 2 if name == "left_double" else 1
            button = "right" if name == "right_single" else "left"
            actions.append(Action("pyautogui", pc.click(x, y, button=button, clicks=clicks)))
        elif name in ("drag", "select"):
            end = args.get("end_box") or args.get("end_point")
            if box is None or end is None:
                raise ParseError(f"{where}: {name}() needs start_box and end_box")
            actions.append(Action("pyautogui", pc.drag([_point(box, context, where), _point(end, context, where)])))
        elif name == "hotkey":
            actions.append(Action("pyautogui", pc.keys(pc.split_keys(args.get("key", args.get("hotkey", ""))))))
        elif name == "press":
            actions.append(Action("pyautogui", pc.keys(pc.split_keys(args.get("key", "")))))
        elif name == "type":
            content = args.get("content", "")
            # UI-TARS ends a line with "\n" to submit it: type, then press enter
            submit = content.endswith("\\n") or content.endswith("\n")
            content = content[:-2] if content.endswith("\\n") else content.rstrip("\n") if submit else content
            code = pc.type_text(content) + ("; pyautogui.press('enter')" if submit else "")
            actions.append(Action("pyautogui", code))
        elif name == "scroll":
            direction = args.get("direction", "down")
            amounts = {"down": (0, 5), "up": (0, -5), "right": (5, 0), "left": (-5, 0)}
            if direction not in amounts:
                raise ParseError(f"{where}: scroll direction {direction!r}: expected up, down, left or right")
            x, y = _point(box, context, where) if box else (None, None)
            actions.append(Action("pyautogui", pc.scroll(x, y, *amounts[direction])))
        elif name == "wait":
            actions.append(Action("special", "WAIT"))
        elif name == "finished":
            actions.append(Action("special", "DONE"))
        elif name == "call_user":
            actions.append(Action("special", "FAIL"))
        else:
            raise ParseError(f"{where}: unknown UI-TARS action {name}(): expected click, left_double, "
                             "right_single, drag, hotkey, type, scroll, wait, finished or call_user")
    if not actions:
        raise ParseError("the 'Action:' line is empty")
    return actions


# -- Qwen2.5-VL computer_use ----------------------------------------------------------------

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def computer_use_action(args: dict, context: ParseContext, where: str) -> Action:
    """One Qwen2.5-VL ``computer_use`` call's arguments -> an action."""
    action = args.get("action")

    def xy(key: str = "coordinate") -> tuple[int, int]:
        value = args.get(key)
        if not (isinstance(value, list) and len(value) == 2):
            raise ParseError(f"{where}: {action} needs {key} [x, y]")
        return _point(f"({value[0]},{value[1]})", context, where)

    if action in ("left_click", "right_click", "middle_click", "double_click", "triple_click"):
        button = {"right_click": "right", "middle_click": "middle"}.get(action, "left")
        clicks = {"double_click": 2, "triple_click": 3}.get(action, 1)
        x, y = xy() if "coordinate" in args else (None, None)
        return Action("pyautogui", pc.click(x, y, button=button, clicks=clicks))
    if action == "mouse_move":
        return Action("pyautogui", pc.move(*xy()))
    if action == "left_click_drag":
        return Action("pyautogui", f"pyautogui.dragTo({', '.join(map(str, xy()))}, duration=0.5, button='left')")
    if action == "type":
        return Action("pyautogui", pc.type_text(str(args.get("text", ""))))
    if action == "key":
        names = args.get("keys")
        if not isinstance(names, list) or not names:
            raise ParseError(f"{where}: key needs keys [...]")
        return Action("pyautogui", pc.keys([pc.key_name(str(k)) for k in names]))
    if action == "scroll":
        # Qwen's pixels: positive scrolls up, as pyautogui's clicks
        return Action("pyautogui", pc.scroll(*(xy() if "coordinate" in args else (None, None)),
                                             dy=-int(args.get("pixels", 0))))
    if action == "wait":
        return Action("special", "WAIT")
    if action == "terminate":
        return Action("special", "DONE" if args.get("status", "success") == "success" else "FAIL")
    raise ParseError(f"{where}: unknown computer_use action {action!r}")


def parse_qwen25vl(text: str, context: ParseContext) -> list[Action]:
    """Qwen2.5-VL answers: one or more ``<tool_call>`` JSON objects naming ``computer_use``."""
    text = strip_thinking(text)
    calls = _TOOL_CALL.findall(text)
    if not calls:
        raise ParseError("no <tool_call> in the answer")
    actions = []
    for i, raw in enumerate(calls):
        where = f"tool call {i + 1}"
        try:
            call = json.loads(raw)
        except ValueError:
            raise ParseError(f"{where}: not valid JSON (cut off?): {raw[:80]!r}") from None
        if not isinstance(call, dict) or call.get("name") != "computer_use":
            raise ParseError(f"{where}: expected the computer_use function")
        args = call.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                raise ParseError(f"{where}: arguments are not valid JSON") from None
        if not isinstance(args, dict):
            raise ParseError(f"{where}: arguments must be an object")
        actions.append(computer_use_action(args, context, where))
    return actions


PARSERS: dict[str, Callable[[str, ParseContext], list[Action]]] = {
    "pyautogui": _code_blocks("pyautogui"),
    "shell": _code_blocks("shell"),
    "computer_13": parse_computer_13,
    "uitars": parse_uitars,
    "qwen25vl": parse_qwen25vl,
}


def parse(text: str, action_space: str, context: ParseContext | None = None) -> list[Action]:
    """The actions in ``text`` under ``action_space`` (see ``PARSERS``).

    Raises:
        ParseError: the answer holds no usable action (the message says why).
        KeyError: an unknown action space (the agents check it when built).
    """
    return PARSERS[action_space](text, context or ParseContext())
