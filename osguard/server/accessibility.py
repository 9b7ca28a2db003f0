"""The accessibility tree as OSWorld serializes it on Linux.

The XML mirrors ``desktop_env/server/main.py::_create_atspi_node``: a ``<desktop-frame>``
root, one element per AT-SPI node whose tag is the role name with spaces replaced by
``-``, ``name`` plus ``st:``/``attr:``/``cp:``/``val:``/``act:`` attributes in the
``accessibility.ubuntu.example.org`` namespaces, and the node's text as element text.
Agents' tree filters and ``check_accessibility_tree`` match those exact URIs, so they
are declared on the root even when unused.

The serializer is hand-written (no lxml in the environment) and pyatspi is imported lazily.
"""

from __future__ import annotations

import concurrent.futures
import re
from typing import Any
from xml.sax.saxutils import escape, quoteattr

NS_UBUNTU: dict[str, str] = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
MAX_DEPTH = 50
MAX_WIDTH = 1024
# Limits for spreadsheet tables, as OSWorld: only cells on screen are listed.
MAX_CALC_ROWS = 200
MAX_CALC_COLUMNS = 50

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
# XML 1.0 forbids most control characters even when escaped.
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class AccessibilityUnavailable(RuntimeError):
    """Raised when pyatspi or the AT-SPI bus is missing."""


class _Node:
    __slots__ = ("tag", "attrs", "text", "children")

    def __init__(self, tag: str, attrs: list[tuple[str, str]], text: str) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = text
        self.children: list[_Node] = []


def _clean(value: Any) -> str:
    return _BAD_XML_CHARS.sub("", str(value))


def _name(value: str) -> str:
    value = _BAD_NAME_CHARS.sub("-", value.strip()) or "unknown"
    if not (value[0].isalpha() or value[0] == "_"):
        value = "_" + value
    return value


def _serialize(node: _Node, out: list[str]) -> None:
    out.append("<" + node.tag)
    for key, value in node.attrs:
        out.append(f" {key}={quoteattr(_clean(value))}")
    if not node.text and not node.children:
        out.append("/>")
        return
    out.append(">")
    if node.text:
        out.append(escape(_clean(node.text)))
    for child in node.children:
        _serialize(child, out)
    out.append(f"</{node.tag}>")


def _build(accessible: Any, depth: int, flag: str | None, pyatspi: Any) -> _Node:
    attrs: list[tuple[str, str]] = [("name", accessible.name or "")]
    states: set[str] = set()
    try:
        for state in accessible.getState().getStates():
            state_name = pyatspi.StateType._enum_lookup.get(int(state), "")
            state_name = state_name.split("_", maxsplit=1)[1].lower() if "_" in state_name else ""
            if state_name:
                states.add(state_name)
                attrs.append((f"st:{_name(state_name)}", "true"))
    except Exception:
        pass
    try:
        if hasattr(accessible, "get_attributes"):
            attributes = dict(accessible.get_attributes() or {})
        else:
            attributes = dict(item.split(":", 1) for item in accessible.getAttributes() if ":" in item)
        for key, value in attributes.items():
            if key:
                attrs.append((f"attr:{_name(key)}", value))
    except Exception:
        pass
    if "visible" in states and "showing" in states:
        try:
            component = accessible.queryComponent()
            bbox = component.getExtents(pyatspi.XY_SCREEN)
            attrs.append(("cp:screencoord", str((bbox[0], bbox[1]))))
            attrs.append(("cp:size", str((bbox[2], bbox[3]))))
        except Exception:
            pass
    text = ""
    try:
        text_obj = accessible.queryText()
        text = text_obj.getText(0, text_obj.characterCount)
        text = text.replace("\ufffc", "").replace("\ufffd", "")
    except Exception:
        pass
    try:
        accessible.queryImage()
        attrs.append(("image", "true"))
    except Exception:
        pass
    try:
        accessible.querySelection()
        attrs.append(("selection", "true"))
    except Exception:
        pass
    try:
        value = accessible.queryValue()
        for key, getter in (
            ("value", lambda: value.currentValue),
            ("min", lambda: value.minimumValue),
            ("max", lambda: value.maximumValue),
            ("step", lambda: value.minimumIncrement),
        ):
            try:
                attrs.append((f"val:{key}", str(getter())))
            except Exception:
                pass
    except Exception:
        pass
    try:
        action = accessible.queryAction()
        for index in range(action.nActions):
            action_name = _name(action.getName(index).replace(" ", "-"))
            attrs.append((f"act:{action_name}_desc", action.getDescription(index) or ""))
            attrs.append((f"act:{action_name}_kb", action.getKeyBinding(index) or ""))
    except Exception:
        pass
    try:
        raw_role = accessible.getRoleName().strip()
    except Exception:
        raw_role = ""
    if not flag:
        if raw_role == "document spreadsheet":
            flag = "calc"
        elif raw_role == "application" and accessible.name == "Thunderbird":
            flag = "thunderbird"
    # Attribute names may repeat (e.g. two actions sanitized alike); XML forbids that.
    seen: set[str] = set()
    unique = [(k, v) for k, v in attrs if not (k in seen or seen.add(k))]
    node = _Node(_name((raw_role or "unknown").replace(" ", "-")), unique, text)
    if depth >= MAX_DEPTH:
        return node
    try:
        if flag == "calc" and raw_role == "table":
            table = accessible.queryTable()
            for row in range(min(table.nRows, MAX_CALC_ROWS)):
                for column in range(min(table.nColumns, MAX_CALC_COLUMNS)):
                    cell = table.getAccessibleAt(row, column)
                    if cell is not None and cell.getState().contains(pyatspi.STATE_SHOWING):
                        node.children.append(_build(cell, depth + 1, flag, pyatspi))
        else:
            for index, child in enumerate(accessible):
                if index >= MAX_WIDTH:
                    break
                if child is not None:
                    node.children.append(_build(child, depth + 1, flag, pyatspi))
    except Exception:
        pass
    return node


def _root_open() -> str:
    declarations = "".join(f" xmlns:{prefix}={quoteattr(uri)}" for prefix, uri in NS_UBUNTU.items())
    return f"<desktop-frame{declarations}"


def tree_xml() -> str:
    """The whole desktop as OSWorld's XML string (``{"AT": ...}`` of ``/accessibility``).

    Raises:
        AccessibilityUnavailable: pyatspi cannot be imported or the bus does not answer.
    """
    try:
        import pyatspi  # type: ignore[import-not-found]
    except Exception as exc:
        raise AccessibilityUnavailable(f"pyatspi is not available: {exc}") from exc
    try:
        desktop = pyatspi.Registry.getDesktop(0)
        applications = [app for app in desktop if app is not None]
    except Exception as exc:
        raise AccessibilityUnavailable(f"the AT-SPI registry does not answer: {exc}") from exc
    children: list[_Node] = []
    if len(applications) > 1:
        # Applications answer over D-Bus independently; walking them side by side hides
        # one slow application's latency behind the others (OSWorld does the same).
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(applications))) as pool:
            children = list(pool.map(lambda app: _build(app, 1, None, pyatspi), applications))
    else:
        children = [_build(app, 1, None, pyatspi) for app in applications]
    out = [_root_open()]
    if not children:
        out.append("/>")
        return "".join(out)
    out.append(">")
    for child in children:
        _serialize(child, out)
    out.append("</desktop-frame>")
    return "".join(out)


def empty_tree_xml() -> str:
    """A ``<desktop-frame>`` with no applications (what a display without AT-SPI shows)."""
    return _root_open() + "/>"
