"""The action-parser table on real-looking model answers: each answer's exact actions, or
the exact error (never a truncated, mislabelled or guessed action)."""

from __future__ import annotations

import pytest

from osguard.actions import Action
from osguard.runner.agents.computer import Screen, smart_resize
from osguard.runner.agents.parsers import ParseContext, ParseError, parse

FHD = ParseContext(screen=Screen.same(1920, 1080))
# Qwen2.5-VL / UI-TARS-1.5 answer in the image as their processor resized it
QWEN = ParseContext(screen=Screen(1920, 1080, *smart_resize(1920, 1080)))
REL = ParseContext(screen=Screen(1920, 1080, 1000, 1000))


def A(kind: str, code: str) -> Action:
    return Action(kind, code)  # type: ignore[arg-type]


DONE, WAIT, FAIL = A("special", "DONE"), A("special", "WAIT"), A("special", "FAIL")

PARSED = [
    # -- OSWorld pyautogui ------------------------------------------------------------------
    ("reflection then code", "pyautogui",
     "The Files window is open. I will click the folder.\n```python\npyautogui.click(312, 240)\n```",
     [A("pyautogui", "pyautogui.click(312, 240)")]),
    ("several code blocks run as one step", "pyautogui",
     "First focus, then type.\n```python\npyautogui.click(100, 200)\n```\nThen:\n```python\n"
     "pyautogui.write('hello')\n```",
     [A("pyautogui", "pyautogui.click(100, 200)\npyautogui.write('hello')")]),
    ("code plus DONE: the code, then DONE", "pyautogui",
     "Saving and finishing.\n```python\npyautogui.hotkey('ctrl', 's')\n```\n```DONE```",
     [A("pyautogui", "pyautogui.hotkey('ctrl', 's')"), DONE]),
    ("DONE on the code block's last line", "pyautogui",
     "```python\npyautogui.press('enter')\nDONE\n```",
     [A("pyautogui", "pyautogui.press('enter')"), DONE]),
    ("think section with a code block inside is dropped", "pyautogui",
     "<think>Maybe ```python\npyautogui.click(1, 1)\n``` no, the button is lower.</think>\n"
     "```python\npyautogui.click(640, 700)\n```",
     [A("pyautogui", "pyautogui.click(640, 700)")]),
    ("a reasoning model's answer starting after </think>", "pyautogui",
     "I should wait for the dialog.</think>\n```WAIT```", [WAIT]),
    ("bare special code", "pyautogui", "  FAIL\n", [FAIL]),
    ("special code in a plain fence", "shell", "```\nDONE\n```", [DONE]),
    ("shell block", "shell", "Renaming.\n```bash\nmv ~/Desktop/a ~/Desktop/b\n```",
     [A("shell", "mv ~/Desktop/a ~/Desktop/b")]),
    ("unlabelled fence in the shell space", "shell", "```\nls -la\n```", [A("shell", "ls -la")]),
    # -- computer_13 ---------------------------------------------------------------------------
    ("computer_13 click", "computer_13", 'Click it.\n```json\n{"action_type": "CLICK", "x": 10, "y": 20}\n```',
     [A("pyautogui", "pyautogui.click(10, 20, clicks=1, button='left')")]),
    ("computer_13 bare JSON list", "computer_13",
     '[{"action_type": "TYPING", "text": "hi"}, {"action_type": "PRESS", "key": "Return"}]',
     [A("pyautogui", "pyautogui.write('hi', interval=0.01)"), A("pyautogui", "pyautogui.press('enter')")]),
    ("computer_13 hotkey then DONE", "computer_13",
     '```json\n{"action_type": "HOTKEY", "keys": ["ctrl", "s"]}\n```\n```DONE```',
     [A("pyautogui", "pyautogui.hotkey('ctrl', 's')"), DONE]),
    ("computer_13 scroll (positive dy is up)", "computer_13", '{"action_type": "SCROLL", "dx": 0, "dy": 3}',
     [A("pyautogui", "pyautogui.scroll(3)")]),
    # -- UI-TARS -------------------------------------------------------------------------------
    ("UI-TARS click, relative coordinates", "uitars",
     "Thought: The Save button is at the bottom right.\nAction: click(start_box='(500,500)')",
     [A("pyautogui", "pyautogui.click(960, 540, clicks=1, button='left')")]),
    ("UI-TARS box tokens and a box (its centre)", "uitars",
     "Thought: x\nAction: left_double(start_box='<|box_start|>(100,100,300,300)<|box_end|>')",
     [A("pyautogui", "pyautogui.click(384, 216, clicks=2, button='left')")]),
    ("UI-TARS type with submit", "uitars", "Thought: search\nAction: type(content='osguard\\n')",
     [A("pyautogui", "pyautogui.write('osguard', interval=0.01); pyautogui.press('enter')")]),
    ("UI-TARS hotkey", "uitars", "Thought: copy\nAction: hotkey(key='ctrl c')", [A("pyautogui", "pyautogui.hotkey('ctrl', 'c')")]),
    ("UI-TARS scroll at a point", "uitars", "Thought: more\nAction: scroll(start_box='(500,500)', direction='down')",
     [A("pyautogui", "pyautogui.moveTo(960, 540); pyautogui.scroll(-5)")]),
    ("UI-TARS drag", "uitars", "Thought: move\nAction: drag(start_box='(0,0)', end_box='(1000,1000)')",
     [A("pyautogui", "pyautogui.moveTo(0, 0); pyautogui.mouseDown(button='left'); "
                     "pyautogui.moveTo(1919, 1079, duration=0.2); pyautogui.mouseUp(button='left')")]),
    ("UI-TARS finished", "uitars", "Thought: all renamed\nAction: finished(content='done')", [DONE]),
    ("UI-TARS call_user", "uitars", "Thought: I need the password\nAction: call_user()", [FAIL]),
    ("UI-TARS wait", "uitars", "Thought: loading\nAction: wait()", [WAIT]),
    # -- Qwen2.5-VL computer_use -------------------------------------------------------------------
    ("Qwen click in the resized image", "qwen25vl",
     '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [966, 546]}}\n</tool_call>',
     [A("pyautogui", "pyautogui.click(960, 540, clicks=1, button='left')")]),
    ("Qwen key and type, two calls", "qwen25vl",
     'Opening the terminal.\n<tool_call>\n{"name": "computer_use", "arguments": {"action": "key", "keys": ["ctrl", "alt", "t"]}}\n'
     '</tool_call>\n<tool_call>\n{"name": "computer_use", "arguments": {"action": "type", "text": "ls"}}\n</tool_call>',
     [A("pyautogui", "pyautogui.hotkey('ctrl', 'alt', 't')"), A("pyautogui", "pyautogui.write('ls', interval=0.01)")]),
    ("Qwen terminate failure", "qwen25vl",
     '<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}</tool_call>', [FAIL]),
]

ERRORS = [
    ("cut-off fence", "pyautogui", "I will type the report.\n```python\npyautogui.write('Quarterly",
     "the answer ends inside an unclosed ```python code block (cut off?)"),
    ("cut-off think section", "pyautogui", "<think>The user wants me to rename the folder. First I",
     "the answer ends inside an unclosed <think> section (cut off?)"),
    ("python block in the shell action space", "shell",
     "```python\nimport os\nos.rename('a', 'b')\n```",
     "a ```python block in the shell action space: expected ```bash or ```sh or ```shell or ```console"),
    ("bash block in the pyautogui action space", "pyautogui", "```bash\nrm -rf ~/tmp\n```",
     "a ```bash block in the pyautogui action space: expected ```python or ```py or ```python3"),
    ("prose only", "pyautogui", "I would click on the Save button to keep the changes.",
     "no code block and no special code (WAIT, DONE, FAIL) in the answer"),
    ("refusal", "shell", "I'm sorry, but I can't help with deleting other users' files.",
     "no code block and no special code (WAIT, DONE, FAIL) in the answer"),
    ("only code quoted while thinking", "pyautogui", "<think>```python\npyautogui.click(1, 1)\n```</think>Let me think more.",
     "no code block and no special code (WAIT, DONE, FAIL) in the answer"),
    ("set-of-marks tag that is not on the screen", "pyautogui", "```python\npyautogui.click(tag_7)\n```",
     "the code uses tag_7, which is not a mark on this screenshot"),
    ("computer_13 prose", "computer_13", "Click the OK button.",
     "no ```json block, JSON action or special code (WAIT, DONE, FAIL) in the answer"),
    ("computer_13 unknown action type", "computer_13", '```json\n{"action_type": "TAP", "x": 1, "y": 2}\n```',
     "block 1: unknown action_type 'TAP': expected one of MOVE_TO, CLICK, MOUSE_DOWN, MOUSE_UP, RIGHT_CLICK, "
     "DOUBLE_CLICK, DRAG_TO, SCROLL, TYPING, PRESS, KEY_DOWN, KEY_UP, HOTKEY, WAIT, FAIL, DONE"),
    ("computer_13 cut-off JSON", "computer_13", '```json\n{"action_type": "TYPING", "text": "hel\n```',
     "block 1: not valid JSON (Unterminated string starting at: line 1 column 35 (char 34))"),
    ("UI-TARS without Action", "uitars", "Thought: I should open the menu first.",
     "no 'Action:' line in the answer"),
    ("UI-TARS unknown action", "uitars", "Thought: x\nAction: swipe(start_box='(1,1)')",
     "action 1: unknown UI-TARS action swipe(): expected click, left_double, right_single, drag, hotkey, type, "
     "scroll, wait, finished or call_user"),
    ("UI-TARS click without a point", "uitars", "Thought: x\nAction: click(start_box='here')",
     "action 1: expected a point (x,y), got 'here'"),
    ("Qwen prose", "qwen25vl", "The file is saved.", "no <tool_call> in the answer"),
    ("Qwen cut-off call", "qwen25vl", '<tool_call>\n{"name": "computer_use", "arguments": {"action": "type", "te',
     "tool call 1: not valid JSON (cut off?): '{\"name\": \"computer_use\", \"arguments\": {\"action\": \"type\", \"te'"),
    ("Qwen other function", "qwen25vl", '<tool_call>{"name": "browser", "arguments": {}}</tool_call>',
     "tool call 1: expected the computer_use function"),
]


def _context(space: str) -> ParseContext:
    return {"uitars": REL, "qwen25vl": QWEN}.get(space, FHD)


@pytest.mark.parametrize("label,space,text,expected", PARSED, ids=[p[0] for p in PARSED])
def test_parses(label, space, text, expected):
    assert parse(text, space, _context(space)) == expected


@pytest.mark.parametrize("label,space,text,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_refuses(label, space, text, message):
    with pytest.raises(ParseError) as exc:
        parse(text, space, _context(space))
    assert str(exc.value) == message


def test_set_of_marks_tags_become_variables():
    context = ParseContext(screen=FHD.screen, tags={2: (50, 60), 7: (300, 400)})
    assert parse("```python\npyautogui.click(tag_7)\n```", "pyautogui", context) == [
        A("pyautogui", "tag_7 = (300, 400)\npyautogui.click(tag_7)")]


def test_smart_resize_matches_qwen_processor():
    """1920x1080 goes to the model as 1932x1092 (multiples of 28 within the pixel budget)."""
    assert smart_resize(1920, 1080) == (1932, 1092)
