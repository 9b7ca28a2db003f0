"""Computer-use actions (click, type, key, scroll, drag...) as the environment's pyautogui
code, shared by every dialect that names GUI actions instead of writing code: Claude's
computer tool, OpenAI's computer-use tool, function-calling agents, ``computer_13`` JSON,
UI-TARS and Qwen2.5-VL.

Every function returns one line (or a few) of pyautogui code, the unit the environment
runs and the guardrail judges. Coordinates given here are already on the real screen;
``Screen`` converts from the model's image to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from osguard.runner.agent_types import AgentError

# key names of xdotool (Claude), OpenAI's CUA (upper case) and X keysyms, in pyautogui's
# words; anything else is passed on lower-cased (letters, digits, f1...).
_KEYS = {
    "return": "enter", "enter": "enter", "kp_enter": "enter", "escape": "esc", "esc": "esc",
    "backspace": "backspace", "tab": "tab", "space": "space", "delete": "delete", "del": "delete",
    "home": "home", "end": "end", "page_up": "pageup", "pageup": "pageup", "prior": "pageup",
    "page_down": "pagedown", "pagedown": "pagedown", "next": "pagedown", "insert": "insert",
    "up": "up", "down": "down", "left": "left", "right": "right",
    "arrowup": "up", "arrowdown": "down", "arrowleft": "left", "arrowright": "right",
    "ctrl": "ctrl", "control": "ctrl", "control_l": "ctrl", "control_r": "ctrl",
    "alt": "alt", "alt_l": "alt", "alt_r": "alt", "option": "alt",
    "shift": "shift", "shift_l": "shift", "shift_r": "shift",
    "super": "win", "super_l": "win", "super_r": "win", "meta": "win", "cmd": "win",
    "command": "win", "win": "win", "windows": "win",
    "caps_lock": "capslock", "capslock": "capslock", "print": "printscreen",
    "minus": "-", "plus": "+", "equal": "=", "comma": ",", "period": ".", "slash": "/",
}


def key_name(name: str) -> str:
    """One key in pyautogui's name (``Return`` -> ``enter``, ``CTRL`` -> ``ctrl``)."""
    stripped = name.strip()
    if len(stripped) == 1:
        return stripped.lower() if stripped.isalpha() else stripped
    return _KEYS.get(stripped.lower(), stripped.lower())


def split_keys(combo: str) -> list[str]:
    """``ctrl+shift+t`` / ``ctrl shift t`` -> pyautogui key names."""
    parts = [p for p in combo.replace("+", " ").split() if p] if combo.strip() != "+" else ["+"]
    return [key_name(p) for p in parts]


@dataclass(frozen=True)
class Screen:
    """The real screen and the size of the image the model reasons on.

    Attributes:
        width, height: the environment's screen in pixels.
        model_width, model_height: the image size the model's coordinates refer to (the
            scaled screenshot, or 1000x1000 for relative coordinates).
    """

    width: int
    height: int
    model_width: int
    model_height: int

    @classmethod
    def same(cls, width: int, height: int) -> "Screen":
        return cls(width, height, width, height)

    def to_real(self, x: float, y: float) -> tuple[int, int]:
        """Model coordinates -> real pixels (rounded, clamped to the screen)."""
        rx = round(float(x) * self.width / self.model_width)
        ry = round(float(y) * self.height / self.model_height)
        return min(max(rx, 0), self.width - 1), min(max(ry, 0), self.height - 1)


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (no image library needed)."""
    if len(png) < 24 or not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise AgentError("the screenshot is not a PNG image")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def fit_within(width: int, height: int, max_long: int, max_pixels: int) -> tuple[int, int]:
    """The largest size of the same aspect ratio with the long edge <= ``max_long`` and at
    most ``max_pixels`` pixels (never enlarged)."""
    factor = min(1.0, max_long / max(width, height), math.sqrt(max_pixels / (width * height)))
    return max(1, int(width * factor)), max(1, int(height * factor))


def smart_resize(width: int, height: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 16384 * 28 * 28) -> tuple[int, int]:
    """The image size a Qwen2-VL-family processor feeds the model (``smart_resize`` of
    Qwen2.5-VL / UI-TARS): both sides multiples of ``factor``, pixels within bounds (the
    defaults are ``qwen_vl_utils``'s). Those models answer in coordinates of this size."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return w_bar, h_bar


def scale_png(png: bytes, size: tuple[int, int]) -> bytes:
    """The screenshot resized to ``size`` (unchanged when it already has that size)."""
    if png_size(png) == size:
        return png
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        out = io.BytesIO()
        image.convert("RGB").resize(size, Image.LANCZOS).save(out, format="PNG")
        return out.getvalue()


# -- pyautogui code ----------------------------------------------------------------------

def move(x: int, y: int) -> str:
    return f"pyautogui.moveTo({x}, {y})"


def click(x: int | None, y: int | None, button: str = "left", clicks: int = 1) -> str:
    button = {"wheel": "middle", "back": "left", "forward": "left"}.get(button, button)
    if button not in ("left", "right", "middle"):
        raise AgentError(f"unknown mouse button {button!r}: expected left, right or middle")
    where = f"{x}, {y}, " if x is not None and y is not None else ""
    return f"pyautogui.click({where}clicks={clicks}, button={button!r})"


def drag(points: list[tuple[int, int]], button: str = "left") -> str:
    if len(points) < 2:
        raise AgentError("a drag needs a start and an end point")
    (x0, y0), rest = points[0], points[1:]
    lines = [f"pyautogui.moveTo({x0}, {y0})", f"pyautogui.mouseDown(button={button!r})"]
    lines += [f"pyautogui.moveTo({x}, {y}, duration=0.2)" for x, y in rest]
    lines.append(f"pyautogui.mouseUp(button={button!r})")
    return "; ".join(lines)


def type_text(text: str) -> str:
    return f"pyautogui.write({text!r}, interval=0.01)"


def keys(names: list[str]) -> str:
    """Press one key or a combination (all held, then released)."""
    if not names:
        raise AgentError("a key action needs at least one key")
    if len(names) == 1:
        return f"pyautogui.press({names[0]!r})"
    return "pyautogui.hotkey(" + ", ".join(repr(n) for n in names) + ")"


def key_down(name: str) -> str:
    return f"pyautogui.keyDown({name!r})"


def key_up(name: str) -> str:
    return f"pyautogui.keyUp({name!r})"


def mouse_down(button: str = "left") -> str:
    return f"pyautogui.mouseDown(button={button!r})"


def mouse_up(button: str = "left") -> str:
    return f"pyautogui.mouseUp(button={button!r})"


def scroll(x: int | None, y: int | None, dx: int = 0, dy: int = 0) -> str:
    """Scroll by wheel clicks: ``dy`` > 0 scrolls down, ``dx`` > 0 scrolls right."""
    lines = [move(x, y)] if x is not None and y is not None else []
    if dy:
        lines.append(f"pyautogui.scroll({-dy})")  # pyautogui: positive is up
    if dx:
        lines.append(f"pyautogui.hscroll({dx})")
    if not dx and not dy:
        raise AgentError("a scroll needs a direction and an amount")
    return "; ".join(lines)


def with_keys_held(modifiers: list[str], code: str) -> str:
    """``code`` run while ``modifiers`` are held (a shift-click, a ctrl-scroll)."""
    if not modifiers:
        return code
    down = "; ".join(key_down(k) for k in modifiers)
    up = "; ".join(key_up(k) for k in reversed(modifiers))
    return f"{down}; {code}; {up}"


def cursor_position() -> str:
    return "print(*pyautogui.position())"
