"""Set-of-marks observations (OSWorld's ``som`` observation type): the visible, named
elements of the accessibility tree are numbered, boxed on the screenshot, and listed as a
table; the model may write ``tag_N`` in pyautogui code for element N's centre.

After OSWorld's ``mm_agents/agent.py`` (``tag_screenshot`` over the tree's nodes with a
screen position and size); the filter here is simpler: any showing element with a name
or text and a box of at least 4x4 pixels on the screen.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

MAX_MARKS = 200  # beyond this many the picture is unreadable and the table too long

_PAIR = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")


@dataclass(frozen=True)
class Mark:
    """One numbered element: its tag number, role, name or text, and box on the screen."""

    index: int
    role: str
    name: str
    x: int
    y: int
    width: int
    height: int

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2


def _attr(element: Any, suffix: str) -> str | None:
    for key, value in element.attrib.items():
        if key == suffix or key.endswith("}" + suffix):
            return str(value)
    return None


def marks_from_tree(tree_xml: str, screen: tuple[int, int]) -> list[Mark]:
    """The markable elements of an accessibility tree, numbered from 1 in document order."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(tree_xml)
    except ET.ParseError:
        return []
    marks: list[Mark] = []
    for element in root.iter():
        coord, size = _attr(element, "screencoord"), _attr(element, "size")
        if not coord or not size:
            continue
        pos, dims = _PAIR.match(coord), _PAIR.match(size)
        if not pos or not dims:
            continue
        x, y, w, h = int(pos[1]), int(pos[2]), int(dims[1]), int(dims[2])
        name = (element.get("name") or (element.text or "")).strip()
        if not name or w < 4 or h < 4 or x < 0 or y < 0 or x >= screen[0] or y >= screen[1]:
            continue
        role = element.tag.rsplit("}", 1)[-1]
        marks.append(Mark(len(marks) + 1, role, name[:60], x, y, w, h))
        if len(marks) >= MAX_MARKS:
            break
    return marks


def draw_marks(png: bytes, marks: list[Mark]) -> bytes:
    """The screenshot with each mark's box and number drawn on it."""
    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(png)) as source:
        image = source.convert("RGB")
    draw = ImageDraw.Draw(image)
    for mark in marks:
        draw.rectangle((mark.x, mark.y, mark.x + mark.width, mark.y + mark.height), outline=(255, 0, 0), width=2)
        label = str(mark.index)
        draw.rectangle((mark.x, mark.y, mark.x + 7 * len(label) + 4, mark.y + 12), fill=(255, 0, 0))
        draw.text((mark.x + 2, mark.y), label, fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def marks_table(marks: list[Mark]) -> str:
    """The marks as the tab-separated table given to the model."""
    rows = ["tag\trole\tname\tcentre"]
    rows += [f"{m.index}\t{m.role}\t{m.name}\t{m.centre}" for m in marks]
    return "\n".join(rows)
