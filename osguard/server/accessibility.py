"""The accessibility tree as OSWorld serializes it on Linux.

The XML mirrors ``desktop_env/server/main.py::_create_atspi_node``: a ``<desktop-frame>``
root, one element per AT-SPI node whose tag is the role name with spaces replaced by
``-``, ``name`` plus ``st:``/``attr:``/``cp:``/``val:``/``act:`` attributes in the
``accessibility.ubuntu.example.org`` namespaces, and the node's text as element text.
Agents' tree filters and ``check_accessibility_tree`` match those exact URIs, so they
are declared on the root even when unused.

Two walks produce that XML:

- ``visible`` (the default): what an agent can act on. Every node that is *showing*
  (AT-SPI's "this and all its ancestors are mapped") and whose box meets the screen and
  the window and scroll views around it, with all the attributes of OSWorld's format.
  It does not descend where nothing visible remains: a node that is not showing (a
  collapsed menu's items, a hidden panel, a background tab) or lies outside the visible
  area (a scrolled-away part) is left out with everything under it. Containers with more
  than ``PLACE_ABOVE`` children (a spreadsheet's 17 billion cells, a mailbox of 100 000
  rows) are asked for the children in their visible area only: through the Table and
  Component interfaces (the cells at the visible area's corners give the row and column
  range), else by bisecting the children on their vertical position. Such a table's
  cells without text are not listed one by one unless focused or selected: one
  ``<empty-cells>`` node after the listed cells names the visible range and gives every
  visible column's and row's position and size (see ``_Visible._empty_cells``).
- ``full``: every node down to ``MAX_DEPTH``, as OSWorld's server walks it (its spreadsheet
  rule included: the first ``MAX_CALC_ROWS`` x ``MAX_CALC_COLUMNS`` cells are asked for
  and the showing ones listed). For LibreOffice that is about a megabyte and ten seconds.

Both walks have a budget (nodes and seconds); a walk that hits it stops descending,
returns what it has, and says so (``cut`` on the root element and in :class:`Walk`).

The serializer is hand-written (no lxml in the environment); pyatspi (and the Atspi
GObject bindings it wraps) is imported lazily.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from dataclasses import dataclass
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
# Limits for spreadsheet tables in the full walk, as OSWorld: only cells on screen are listed.
MAX_CALC_ROWS = 200
MAX_CALC_COLUMNS = 50

# The visible walk asks a container with more children than this for those in its
# visible area only (a table's visible range, or a bisection on vertical position)
# rather than visiting each child; and lists at most MAX_WIDTH of them.
PLACE_ABOVE = 256

MODES = ("visible", "full")
# Default budgets per walk. The visible tree of a busy desktop is a few thousand nodes;
# the full tree of one LibreOffice window is about 3 000 nodes and 10 s.
DEFAULT_BUDGET: dict[str, tuple[int, float]] = {
    "visible": (5_000, 10.0),
    "full": (100_000, 120.0),
}
# Roles whose box bounds what their descendants can show: windows (nothing of a window
# shows outside it) and web documents (their scrolled-away content). Not scroll panes:
# LibreOffice places some of their children outside them (the sheet tab buttons).
_CLIPPING_ROLES = frozenset({
    "frame", "dialog", "window", "alert", "file chooser", "document web", "document frame",
})

# Containers the visible walk looks through when they are neither showing nor visible.
_LOOK_THROUGH = frozenset({"panel", "filler"})

# The node that stands for a huge table's empty cells, and what cell() returns for one.
_EMPTY_CELLS_TAG = "empty-cells"
# A table's selection up to this many cells is read once (its Selection interface);
# a bigger one is found by reading each visible empty cell's states.
_MAX_SELECTED = 64

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
# XML 1.0 forbids most control characters even when escaped.
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class AccessibilityUnavailable(RuntimeError):
    """Raised when pyatspi or the AT-SPI bus is missing."""


@dataclass(frozen=True)
class Walk:
    """One walk's result.

    Attributes:
        xml: the ``<desktop-frame>`` document.
        mode: ``visible`` or ``full``.
        nodes: elements written (the root not counted).
        seconds: wall-clock time of the walk.
        cut: why the walk stopped early (budget), or None when it is complete.
    """

    xml: str
    mode: str
    nodes: int
    seconds: float
    cut: str | None


class _Node:
    __slots__ = ("tag", "attrs", "text", "children")

    def __init__(self, tag: str, attrs: list[tuple[str, str]], text: str) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = text
        self.children: list[_Node] = []


_EMPTY = _Node(_EMPTY_CELLS_TAG, [], "")  # what _Visible.cell() returns for a summarised cell


class _Budget:
    """Nodes and seconds left for one walk, shared by its threads."""

    def __init__(self, max_nodes: int, max_seconds: float) -> None:
        self.max_nodes = max_nodes
        self.max_seconds = max_seconds
        self.started = time.monotonic()
        self.deadline = self.started + max_seconds
        self.nodes = 0
        self.cut: str | None = None
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Count one node; False (and ``cut`` set) once the budget is spent."""
        with self._lock:
            if self.cut is not None:
                return False
            if self.nodes >= self.max_nodes:
                self.cut = f"node budget reached ({self.max_nodes} nodes)"
                return False
            if time.monotonic() > self.deadline:
                self.cut = f"time budget reached ({self.max_seconds:g} s)"
                return False
            self.nodes += 1
            return True


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


def _unique(attrs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    # Attribute names may repeat (e.g. two actions sanitized alike); XML forbids that.
    seen: set[str] = set()
    return [(k, v) for k, v in attrs if not (k in seen or seen.add(k))]


# ------------------------------------------------------------------------ the full walk


def _build(accessible: Any, depth: int, flag: str | None, pyatspi: Any, budget: _Budget) -> _Node | None:
    """OSWorld's walk: every node, every attribute (``mode=full``)."""
    if not budget.take():
        return None
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
    node = _Node(_name((raw_role or "unknown").replace(" ", "-")), _unique(attrs), text)
    if depth >= MAX_DEPTH:
        return node
    try:
        if flag == "calc" and raw_role == "table":
            table = accessible.queryTable()
            for row in range(min(table.nRows, MAX_CALC_ROWS)):
                for column in range(min(table.nColumns, MAX_CALC_COLUMNS)):
                    cell = table.getAccessibleAt(row, column)
                    if cell is not None and cell.getState().contains(pyatspi.STATE_SHOWING):
                        child_node = _build(cell, depth + 1, flag, pyatspi, budget)
                        if child_node is not None:
                            node.children.append(child_node)
        else:
            for index, child in enumerate(accessible):
                if index >= MAX_WIDTH:
                    break
                if child is not None:
                    child_node = _build(child, depth + 1, flag, pyatspi, budget)
                    if child_node is not None:
                        node.children.append(child_node)
    except Exception:
        pass
    return node


# --------------------------------------------------------------------- the visible walk

Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive)


def _meet(a: Rect, b: Rect) -> Rect | None:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else None


def _a1(row: int, column: int) -> str:
    """A spreadsheet's name of a cell: column letters and row number (0, 27 -> AB1)."""
    letters = ""
    column += 1
    while column:
        column, rest = divmod(column - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return f"{letters}{row + 1}"


class _Grid:
    """What the cells of one huge table share: interfaces, role, naming, row and column
    positions (filled from the first visible row and column as they are walked)."""

    def __init__(self, interfaces: frozenset[str], role: str, row0: int, column0: int, a1_names: bool) -> None:
        self.interfaces = interfaces
        self.role = role
        self.row0 = row0
        self.column0 = column0
        self.a1_names = a1_names
        self.rows: dict[int, tuple[int, int]] = {}  # row -> (y, height)
        self.columns: dict[int, tuple[int, int]] = {}  # column -> (x, width)
        # Which empty cells must have their states read (see _Visible.cell): all of them
        # (``every``), the selected ones the table names, and, until found, the focused one.
        self.every = True
        self.selected: set[tuple[int, int]] = set()
        self.find_focus = True


class _Visible:
    """The visible walk (see the module docstring). One instance per walk."""

    def __init__(self, pyatspi: Any, budget: _Budget, screen: Rect) -> None:
        from gi.repository import Atspi  # type: ignore[import-not-found]  # pyatspi's own binding

        self.Atspi = Atspi
        self.budget = budget
        self.screen = screen
        self.SCREEN = Atspi.CoordType.SCREEN
        self.SHOWING = Atspi.StateType.SHOWING
        self.VISIBLE = Atspi.StateType.VISIBLE
        self.DEFUNCT = Atspi.StateType.DEFUNCT
        self.FOCUSED = Atspi.StateType.FOCUSED
        self.SELECTED = Atspi.StateType.SELECTED
        # OSWorld names states after pyatspi's constants: STATE_MULTI_LINE -> multi_line.
        self.state_names: dict[int, str] = {}
        for number, constant in pyatspi.StateType._enum_lookup.items():
            if "_" in constant:
                self.state_names[int(number)] = "st:" + _name(constant.split("_", 1)[1].lower())

    def extents(self, accessible: Any) -> tuple[int, int, int, int] | None:
        try:
            box = self.Atspi.Component.get_extents(accessible, self.SCREEN)
            return (box.x, box.y, box.width, box.height)
        except Exception:
            return None

    def node(self, accessible: Any, depth: int, clip: Rect,
             cell_of: tuple[frozenset[str], str] | None = None, cell_text: str | None = None) -> _Node | None:
        """The element for ``accessible`` and what shows under it; None when nothing shows.

        ``cell_of``: for a cell of a huge table (with content; empty ones go through
        :meth:`cell`), the interfaces and role its table's cells share, asked once per
        table rather than once per cell, and its text (already read).
        """
        Atspi = self.Atspi
        if self.budget.cut is not None:
            return None
        try:
            state_set = accessible.get_state_set()
            states = state_set.get_states()
        except Exception:
            return None  # the object went away while we walked
        showing = state_set.contains(self.SHOWING)
        if not showing and depth > 1 and cell_of is None:
            # Applications never "show" themselves. LibreOffice also leaves "showing" off
            # a few containers around showing widgets (the formula bar's input line is a
            # defunct panel, the style box a panel that is not even "visible"): look
            # through those; a collapsed menu's items or a hidden dialog stay pruned.
            if state_set.contains(self.DEFUNCT):
                return self._look_through(accessible, depth, clip, self._role(accessible), states)
            if state_set.contains(self.VISIBLE):
                return None
            role = self._role(accessible)
            if role not in _LOOK_THROUGH:
                return None
            return self._look_through(accessible, depth, clip, role, states)
        if not showing and cell_of is not None:
            return None
        if cell_of is not None:
            interfaces, role = set(cell_of[0]), cell_of[1]
        else:
            try:
                interfaces = set(accessible.get_interfaces() or ())
            except Exception:
                interfaces = set()
            role = self._role(accessible)
        box = None
        if showing and "Component" in interfaces:
            box = self.extents(accessible)
        inner = clip
        if box is not None and box[2] > 0 and box[3] > 0:
            rect = (box[0], box[1], box[0] + box[2], box[1] + box[3])
            met = _meet(rect, clip)
            if met is None:
                return None  # scrolled away, or outside its window or the screen
            if role in _CLIPPING_ROLES:
                inner = met
        if not self.budget.take():
            return None
        attrs: list[tuple[str, str]] = []
        try:
            attrs.append(("name", accessible.get_name() or ""))
        except Exception:
            attrs.append(("name", ""))
        state_words = set()
        for state in states:
            word = self.state_names.get(int(state))
            if word:
                state_words.add(word)
                attrs.append((word, "true"))
        raw_text = cell_text or ""
        if cell_text is None and "Text" in interfaces:
            try:
                raw_text = Atspi.Text.get_text(accessible, 0, -1) or ""
            except Exception:
                raw_text = ""
        text = raw_text.replace("\ufffc", "").replace("\ufffd", "")
        try:
            for key, value in (accessible.get_attributes() or {}).items():
                if key:
                    attrs.append((f"attr:{_name(key)}", value))
        except Exception:
            pass
        if box is not None and "st:visible" in state_words:
            attrs.append(("cp:screencoord", str((box[0], box[1]))))
            attrs.append(("cp:size", str((box[2], box[3]))))
        if "Image" in interfaces:
            attrs.append(("image", "true"))
        if "Selection" in interfaces:
            attrs.append(("selection", "true"))
        if "Value" in interfaces:
            for key, getter in (("value", Atspi.Value.get_current_value), ("min", Atspi.Value.get_minimum_value),
                                ("max", Atspi.Value.get_maximum_value), ("step", Atspi.Value.get_minimum_increment)):
                try:
                    attrs.append((f"val:{key}", str(getter(accessible))))
                except Exception:
                    pass
        if "Action" in interfaces:
            try:
                for index in range(Atspi.Action.get_n_actions(accessible)):
                    action_name = _name((Atspi.Action.get_action_name(accessible, index) or "").replace(" ", "-"))
                    attrs.append((f"act:{action_name}_desc", Atspi.Action.get_action_description(accessible, index) or ""))
                    attrs.append((f"act:{action_name}_kb", Atspi.Action.get_key_binding(accessible, index) or ""))
            except Exception:
                pass
        node = _Node(_name((role or "unknown").replace(" ", "-")), _unique(attrs), text)
        if depth >= MAX_DEPTH:
            return node
        kids, grid = self.children(accessible, role, interfaces, box, inner)
        if grid is not None:
            self._marks(accessible, grid, interfaces, state_words, len(kids))
        empty = 0
        for child in kids:
            if grid is not None:
                child_node = self.cell(child, grid, depth + 1, inner)
                if child_node is _EMPTY:
                    empty += 1
                    continue
            else:
                child_node = self.node(child, depth + 1, inner)
            if child_node is not None:
                node.children.append(child_node)
        if grid is not None and empty and self.budget.take():
            node.children.append(self._empty_cells(grid, kids, empty))
        return node

    def _marks(self, table: Any, grid: "_Grid", interfaces: set[str], table_states: set[str], cells: int) -> None:
        """Find once per table which empty cells can be focused or selected, so the others
        need no state read. Only a focused table has a focused cell (LibreOffice: both
        follow the grid window's focus). The selected cells are the table's Selection
        children; a selection larger than the visible area is read cell by cell."""
        grid.find_focus = "st:focused" in table_states
        if "Selection" not in interfaces:
            return
        Atspi = self.Atspi
        try:
            count = Atspi.Selection.get_n_selected_children(table)
            if count > min(cells, _MAX_SELECTED):
                return  # a big selection: every empty cell's states are read
            selected = set()
            for index in range(count):
                child = Atspi.Selection.get_selected_child(table, index)
                position = child.get_index_in_parent() if child is not None else -1
                if position < 0:
                    return
                selected.add((Atspi.Table.get_row_at_index(table, position),
                              Atspi.Table.get_column_at_index(table, position)))
        except Exception:
            return
        grid.selected = selected
        grid.every = False

    def _empty_cells(self, grid: "_Grid", cells: list[tuple[Any, int, int]], empty: int) -> _Node:
        """The one node that stands for a huge table's empty cells: ``name`` the visible
        range (``A1:AD42``), ``cells`` how many it stands for, ``columns`` and ``rows`` the
        position and size of each visible column (``A:41+62``: x 41, width 62) and row
        (``1:157+20``: y 157, height 20), and ``cp:`` the box of the whole range. No
        states: they were not read. Every cell of the range the table does not list is
        empty, neither focused nor selected, and at its column's x and row's y."""
        (_first, row0, column0), (_last, row1, column1) = cells[0], cells[-1]
        label = _a1 if grid.a1_names else (lambda row, column: f"R{row + 1}C{column + 1}")
        attrs: list[tuple[str, str]] = [("name", f"{label(row0, column0)}:{label(row1, column1)}"),
                                        ("cells", str(empty))]
        columns = [(column, *grid.columns[column]) for column in range(column0, column1 + 1) if column in grid.columns]
        rows = [(row, *grid.rows[row]) for row in range(row0, row1 + 1) if row in grid.rows]
        # Column names as the sheet shows them (A, B...): the letters of its A1 names.
        column_name = (lambda column: _a1(0, column)[:-1]) if grid.a1_names else (lambda column: str(column + 1))
        attrs.append(("columns", " ".join(f"{column_name(c)}:{x}+{w}" for c, x, w in columns)))
        attrs.append(("rows", " ".join(f"{r + 1}:{y}+{h}" for r, y, h in rows)))
        if columns and rows and len(columns) == column1 - column0 + 1 and len(rows) == row1 - row0 + 1:
            x0, y0 = columns[0][1], rows[0][1]
            x1, y1 = columns[-1][1] + columns[-1][2], rows[-1][1] + rows[-1][2]
            attrs.append(("cp:screencoord", str((x0, y0))))
            attrs.append(("cp:size", str((x1 - x0, y1 - y0))))
        return _Node(_EMPTY_CELLS_TAG, attrs, "")

    def cell(self, placed: tuple[Any, int, int], grid: "_Grid", depth: int, clip: Rect) -> _Node | None:
        """One cell of a huge table: a full node when it has text; ``_EMPTY`` when it has
        none and is neither focused nor selected (the table's ``empty-cells`` node stands
        for it); None when it does not show. An empty cell costs two calls (the cell, its
        text); its states are read only where the table's focus and selection say they may
        differ (:meth:`_marks`), and a focused or selected empty cell is written with its
        name, real states, position and size. Its name and box come from the grid where
        the table's corners show they can (a spreadsheet names its cells A1, B1...; a
        cell's box is its column's x and width and its row's y and height, read from the
        first row and column)."""
        Atspi = self.Atspi
        accessible, row, column = placed
        if self.budget.cut is not None:
            return None
        try:
            raw_text = (Atspi.Text.get_text(accessible, 0, -1) or "") if "Text" in grid.interfaces else ""
        except Exception:
            raw_text = ""
        box = None
        if row == grid.row0 or column == grid.column0 or row not in grid.rows or column not in grid.columns:
            # The first visible row and column are measured, whatever their content.
            box = self.extents(accessible) if "Component" in grid.interfaces else None
            if box is not None and row == grid.row0:
                grid.columns[column] = (box[0], box[2])
            if box is not None and column == grid.column0:
                grid.rows[row] = (box[1], box[3])
        if raw_text:
            written = self.node(accessible, depth, clip, (grid.interfaces, grid.role), raw_text)
            if written is not None and ("st:focused", "true") in written.attrs:
                grid.find_focus = False  # one focused object at a time
            return written
        if box is None and row in grid.rows and column in grid.columns:
            (x, width), (y, height) = grid.columns[column], grid.rows[row]
            box = (x, y, width, height)
        if box is not None and box[2] > 0 and box[3] > 0 and _meet((box[0], box[1], box[0] + box[2], box[1] + box[3]), clip) is None:
            return None
        if not (grid.every or grid.find_focus or (row, column) in grid.selected):
            return _EMPTY  # neither focused nor selected: summarised with the other empty cells
        try:
            state_set = accessible.get_state_set()
        except Exception:
            return None
        if not state_set.contains(self.SHOWING):
            return None
        focused = state_set.contains(self.FOCUSED)
        if focused:
            grid.find_focus = False  # one focused object at a time
        if not (focused or state_set.contains(self.SELECTED)):
            return _EMPTY
        if not self.budget.take():
            return None
        if grid.a1_names:
            name = _a1(row, column)
        else:
            try:
                name = accessible.get_name() or ""
            except Exception:
                name = ""
        attrs: list[tuple[str, str]] = [("name", name)]
        visible = False
        for state in state_set.get_states():
            word = self.state_names.get(int(state))
            if word:
                visible = visible or word == "st:visible"
                attrs.append((word, "true"))
        if box is not None and visible:
            attrs.append(("cp:screencoord", str((box[0], box[1]))))
            attrs.append(("cp:size", str((box[2], box[3]))))
        return _Node(_name((grid.role or "unknown").replace(" ", "-")), _unique(attrs), "")

    def _role(self, accessible: Any) -> str:
        if accessible is None:
            return ""
        try:
            return (accessible.get_role_name() or "").strip()
        except Exception:
            return ""

    def _look_through(self, accessible: Any, depth: int, clip: Rect, role: str, states: list[Any]) -> _Node | None:
        """A container that does not show itself, written only if something under it shows."""
        if depth >= MAX_DEPTH:
            return None
        try:
            count = min(accessible.get_child_count(), MAX_WIDTH)
        except Exception:
            return None
        kids = []
        for index in range(count):
            child = self._child(accessible, index)
            child_node = self.node(child, depth + 1, clip) if child is not None else None
            if child_node is not None:
                kids.append(child_node)
        if not kids or not self.budget.take():
            return None
        try:
            name = accessible.get_name() or ""
        except Exception:
            name = ""
        attrs = [("name", name)] + [(word, "true") for word in (self.state_names.get(int(s)) for s in states) if word]
        node = _Node(_name((role or "unknown").replace(" ", "-")), _unique(attrs), "")
        node.children = kids
        return node

    def _showing(self, accessible: Any) -> bool:
        try:
            return bool(accessible.get_state_set().contains(self.SHOWING))
        except Exception:
            return False

    def children(self, accessible: Any, role: str, interfaces: set[str], box: Any,
                 clip: Rect) -> tuple[list[Any], "_Grid | None"]:
        """The children worth visiting: all of them for ordinary containers, the ones in
        the visible area for huge ones; for a huge table of cells, ``(cell, row, column)``
        and the table's grid."""
        try:
            count = accessible.get_child_count()
        except Exception:
            return [], None
        if count <= PLACE_ABOVE:
            first = self._child(accessible, 0) if count else None
            if role == "menu" and first is not None and not self._showing(first):
                return [], None  # a collapsed menu: its items show all together or not at all
            rest = (self._child(accessible, i) for i in range(1, count))
            return [child for child in (first, *rest) if child is not None], None
        if box is None or box[2] <= 0 or box[3] <= 0:
            return [], None  # a huge container we cannot place: nothing of it is known to show
        area = _meet((box[0], box[1], box[0] + box[2], box[1] + box[3]), clip)
        if area is None:
            return [], None
        first = self._child(accessible, 0)
        if "Table" in interfaces and self._role(first) in ("table cell", "cell"):
            # Its children are the cells themselves (a spreadsheet), not rows.
            cells = self._table_cells(accessible, area)
            if cells:
                return cells, self._grid(first, cells)
        return self._bisect(accessible, count, area), None

    def _grid(self, first: Any, cells: list[tuple[Any, int, int]]) -> "_Grid":
        try:
            interfaces = frozenset(first.get_interfaces() or ())
        except Exception:
            interfaces = frozenset()
        (top_left, row0, column0), (bottom_right, row1, column1) = cells[0], cells[-1]
        try:
            a1_names = (top_left.get_name() == _a1(row0, column0) and bottom_right.get_name() == _a1(row1, column1))
        except Exception:
            a1_names = False
        return _Grid(interfaces, self._role(first), row0, column0, a1_names)

    def _child(self, accessible: Any, index: int) -> Any:
        try:
            return accessible.get_child_at_index(index)
        except Exception:
            return None

    def _table_cells(self, table: Any, area: Rect) -> list[tuple[Any, int, int]] | None:
        """The cells in ``area``: the cells at its corners give the row and column range."""
        Atspi = self.Atspi
        corners = []
        for x, y in ((area[0] + 1, area[1] + 1), (area[2] - 2, area[3] - 2)):
            try:
                cell = Atspi.Component.get_accessible_at_point(table, x, y, self.SCREEN)
                index = cell.get_index_in_parent() if cell is not None else -1
                if index < 0:
                    return None
                corners.append((Atspi.Table.get_row_at_index(table, index),
                                Atspi.Table.get_column_at_index(table, index)))
            except Exception:
                return None
        (row0, column0), (row1, column1) = corners
        if row0 < 0 or column0 < 0 or row1 < row0 or column1 < column0:
            return None
        cells = []
        seen: set[str] = set()
        for row in range(row0, row1 + 1):
            for column in range(column0, column1 + 1):
                if len(cells) >= self.budget.max_nodes:
                    return cells
                try:
                    cell = Atspi.Table.get_accessible_at(table, row, column)
                except Exception:
                    cell = None
                path = getattr(cell, "path", None)
                if cell is not None and (path is None or path not in seen):
                    seen.add(path)  # a merged cell answers for every position it covers
                    cells.append((cell, row, column))
        return cells

    def _top(self, accessible: Any, index: int) -> tuple[Any, tuple[int, int] | None]:
        """Child ``index`` and its vertical span (None when it has no box)."""
        child = self._child(accessible, index)
        box = self.extents(child) if child is not None else None
        if box is None or box[3] <= 0:
            return child, None
        return child, (box[1], box[1] + box[3])

    def _bisect(self, accessible: Any, count: int, area: Rect) -> list[Any]:
        """Children of a huge list in ``area``, assuming they are laid out top to bottom."""
        low, high = 0, count
        while low < high:  # the first child whose bottom edge is below the area's top
            middle = (low + high) // 2
            _child, span = self._top(accessible, middle)
            if span is None:
                break  # cannot place it: scan on from the last known bound
            if span[1] <= area[1]:
                low = middle + 1
            else:
                high = middle
        found = []
        for index in range(low, count):
            if len(found) >= MAX_WIDTH:
                break
            child, span = self._top(accessible, index)
            if span is not None and span[0] >= area[3]:
                break
            if child is not None:
                found.append(child)
        return found


# ------------------------------------------------------------------------------- driver


def _root_open() -> str:
    declarations = "".join(f" xmlns:{prefix}={quoteattr(uri)}" for prefix, uri in NS_UBUNTU.items())
    return f"<desktop-frame{declarations}"


def _screen_rect() -> Rect:
    """The X screen (AT-SPI's desktop object reports a fixed 1024x768 whatever the display)."""
    try:
        from osguard.server import screen

        width, height = screen.screen_size()
        return (0, 0, width, height)
    except Exception:
        return (0, 0, 1 << 15, 1 << 15)


def walk(mode: str = "visible", *, max_nodes: int | None = None, max_seconds: float | None = None) -> Walk:
    """Walk the desktop's accessibility tree into OSWorld's XML.

    Args:
        mode: ``visible`` (what shows on screen; default) or ``full`` (every node, as
            OSWorld's server).
        max_nodes: stop after this many nodes (default: ``DEFAULT_BUDGET[mode]``).
        max_seconds: stop descending after this many seconds (default: as above).

    Raises:
        ValueError: unknown mode or a budget below 1.
        AccessibilityUnavailable: pyatspi cannot be imported or the bus does not answer.
    """
    if mode not in MODES:
        raise ValueError(f"unknown accessibility mode {mode!r}: expected one of {', '.join(MODES)}")
    default_nodes, default_seconds = DEFAULT_BUDGET[mode]
    max_nodes = default_nodes if max_nodes is None else max_nodes
    max_seconds = default_seconds if max_seconds is None else max_seconds
    if max_nodes < 1 or max_seconds <= 0:
        raise ValueError("the accessibility budget must be at least 1 node and more than 0 seconds")
    try:
        import pyatspi  # type: ignore[import-not-found]
    except Exception as exc:
        raise AccessibilityUnavailable(f"pyatspi is not available: {exc}") from exc
    budget = _Budget(max_nodes, max_seconds)
    try:
        desktop = pyatspi.Registry.getDesktop(0)
        applications = [app for app in desktop if app is not None]
    except Exception as exc:
        raise AccessibilityUnavailable(f"the AT-SPI registry does not answer: {exc}") from exc
    if mode == "visible":
        walker = _Visible(pyatspi, budget, _screen_rect())

        def one(app: Any) -> _Node | None:
            return walker.node(app, 1, walker.screen)
    else:
        def one(app: Any) -> _Node | None:
            return _build(app, 1, None, pyatspi, budget)

    if len(applications) > 1:
        # Applications answer over D-Bus independently; walking them side by side hides
        # one slow application's latency behind the others (OSWorld does the same).
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(applications))) as pool:
            children = list(pool.map(one, applications))
    else:
        children = [one(app) for app in applications]
    out = [_root_open()]
    if budget.cut is not None:
        out.append(f" cut={quoteattr(budget.cut)}")
    kept = [child for child in children if child is not None]
    if not kept:
        out.append("/>")
    else:
        out.append(">")
        for child in kept:
            _serialize(child, out)
        out.append("</desktop-frame>")
    return Walk(xml="".join(out), mode=mode, nodes=budget.nodes, seconds=time.monotonic() - budget.started,
                cut=budget.cut)


def tree_xml(mode: str = "visible", **budget: Any) -> str:
    """The desktop as OSWorld's XML string (``{"AT": ...}`` of ``/accessibility``); see :func:`walk`.

    Raises:
        AccessibilityUnavailable: pyatspi cannot be imported or the bus does not answer.
    """
    return walk(mode, **budget).xml


def empty_tree_xml() -> str:
    """A ``<desktop-frame>`` with no applications (what a display without AT-SPI shows)."""
    return _root_open() + "/>"
