"""The X display seen by the server: screenshots, screen size and the pointer.

python-xlib and Pillow are optional: they are imported on first use, and a missing one
turns into ``ScreenUnavailable`` with the reason (the endpoint answers 500 with it).
One Xlib connection is kept per thread because Xlib display objects are not thread-safe
and opening a connection costs a few milliseconds per request.
"""

from __future__ import annotations

import io
import os
import threading

_local = threading.local()


class ScreenUnavailable(RuntimeError):
    """Raised when there is no X display or a library needed to read it is missing."""


def _display():
    display = getattr(_local, "display", None)
    if display is not None:
        return display
    if not os.environ.get("DISPLAY"):
        raise ScreenUnavailable("no X display in this environment (DISPLAY is not set)")
    try:
        from Xlib import display as xdisplay
    except ImportError as exc:  # pragma: no cover - depends on the image
        raise ScreenUnavailable(f"python-xlib is not installed: {exc}") from exc
    try:
        display = xdisplay.Display()
    except Exception as exc:
        raise ScreenUnavailable(f"cannot open X display {os.environ.get('DISPLAY')}: {exc}") from exc
    _local.display = display
    return display


def _drop_display() -> None:
    # A broken connection (X server restarted) must not poison every later request.
    display = getattr(_local, "display", None)
    _local.display = None
    if display is not None:
        try:
            display.close()
        except Exception:
            pass


def screen_size() -> tuple[int, int]:
    """Width and height of the root window."""
    try:
        screen = _display().screen()
        return int(screen.width_in_pixels), int(screen.height_in_pixels)
    except ScreenUnavailable:
        raise
    except Exception as exc:
        _drop_display()
        raise ScreenUnavailable(f"cannot read the screen size: {exc}") from exc


def cursor_position() -> tuple[int, int]:
    """Pointer position in root-window coordinates."""
    try:
        display = _display()
        pointer = display.screen().root.query_pointer()
        return int(pointer.root_x), int(pointer.root_y)
    except ScreenUnavailable:
        raise
    except Exception as exc:
        _drop_display()
        raise ScreenUnavailable(f"cannot read the pointer position: {exc}") from exc


_cursor_cache: dict[int, object] = {}


def _paste_cursor(image, display) -> None:
    """Draw the current cursor into ``image`` (OSWorld pastes it too, via XFixes).

    The sprite is converted once per cursor shape (XFixes numbers them with a serial).
    """
    try:
        from array import array

        from PIL import Image

        if not display.has_extension("XFIXES"):
            return
        if not getattr(_local, "xfixes_ready", False):
            display.xfixes_query_version()
            _local.xfixes_ready = True
        cursor = display.xfixes_get_cursor_image(display.screen().root)
        width, height = cursor.width, cursor.height
        if not width or not height:
            return
        sprite = _cursor_cache.get(cursor.cursor_serial)
        if sprite is None:
            # 32-bit ARGB words; little-endian bytes are B, G, R, A.
            data = array("I", [value & 0xFFFFFFFF for value in cursor.cursor_image]).tobytes()
            sprite = Image.frombuffer("RGBA", (width, height), data, "raw", "BGRA", 0, 1)
            if len(_cursor_cache) > 64:
                _cursor_cache.clear()
            _cursor_cache[cursor.cursor_serial] = sprite
        image.paste(sprite, (cursor.x - cursor.xhot, cursor.y - cursor.yhot), sprite)
    except Exception:
        # The cursor is decoration; a screenshot without it is still a screenshot.
        return


def _grab(display):
    """The root window as an RGB image: Pillow's XCB grab (C) when built in, else Xlib."""
    from PIL import Image

    try:
        from PIL import ImageGrab

        image = ImageGrab.grab(xdisplay=os.environ["DISPLAY"])
        return image if image.mode == "RGB" else image.convert("RGB")
    except Exception:
        pass  # Pillow without XCB support: fall back to python-xlib (slower, same pixels)
    from Xlib import X

    root = display.screen().root
    geometry = root.get_geometry()
    raw = root.get_image(0, 0, geometry.width, geometry.height, X.ZPixmap, 0xFFFFFFFF)
    return Image.frombytes("RGB", (geometry.width, geometry.height), raw.data, "raw", "BGRX")


def screenshot_png(*, with_cursor: bool = True, compress_level: int = 1) -> bytes:
    """The whole screen as PNG bytes.

    ``compress_level=1`` keeps encoding a 1920x1080 frame at tens of milliseconds; the
    file is larger than at the default level but agents decode it the same.
    """
    try:
        import PIL  # noqa: F401 - checked first so the error names what is missing
    except ImportError as exc:  # pragma: no cover - depends on the image
        raise ScreenUnavailable(f"Pillow is not installed: {exc}") from exc
    display = _display()
    try:
        image = _grab(display)
        if with_cursor:
            _paste_cursor(image, display)
    except Exception as exc:
        _drop_display()
        raise ScreenUnavailable(f"cannot capture the screen: {exc}") from exc
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()
