"""Every application of OSWorld's domains publishes an accessibility tree that names its
main widgets: LibreOffice Calc, Writer and Impress, Thunderbird and Chromium, on the local
sandbox and in the docker ``full`` image.

Each test starts a fresh environment, opens the application on a small document
(``osguard.testing.apps``), waits until its window is mapped and the tree names what it
must (polling the window list and the tree, no fixed sleeps), and checks the default
(visible) tree against the full one. A test is skipped only where the application's
program is missing (or, for docker, where no engine or no ``full`` image of the current
sources exists).
"""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from osguard.testing.apps import APPS, missing_binary, open_app

from _support import available_provider, docker_skip_reason

pytestmark = [pytest.mark.slow, pytest.mark.gui, pytest.mark.usefixtures("private_state_dir")]

STATE = "{https://accessibility.ubuntu.example.org/ns/state}"
COMPONENT = "{https://accessibility.ubuntu.example.org/ns/component}"


def _docker_full_skip_reason() -> str | None:
    reason = docker_skip_reason()
    if reason is not None:
        return reason
    from osguard.images import find_image, image_tag

    if find_image("full") is None:
        return f"{image_tag('full')} is not built; run `osguard image build --flavor full`"
    return None


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def provider(request: pytest.FixtureRequest):
    if request.param == "docker":
        reason = _docker_full_skip_reason()
        if reason is not None:
            pytest.skip(f"docker: {reason}")
        from osguard.providers.docker import DockerProvider

        return DockerProvider(flavor="full")
    return available_provider("local")


def _box(element: ElementTree.Element) -> tuple[int, int, int, int] | None:
    coord, size = element.get(COMPONENT + "screencoord"), element.get(COMPONENT + "size")
    if not coord or not size:
        return None
    (x, y), (w, h) = (tuple(int(v) for v in text.strip("()").split(",")) for text in (coord, size))
    return x, y, w, h


@pytest.mark.parametrize("app", sorted(APPS))
def test_the_tree_names_the_applications_main_widgets(provider, app: str) -> None:
    case = APPS[app]
    env = provider.start(timeout=120)
    try:
        if not env.capabilities.accessibility:
            pytest.fail(f"the environment has no accessibility tree: {'; '.join(env.capabilities.notes)}")
        reason = missing_binary(env, case)
        if reason is not None:
            pytest.skip(reason)
        open_app(env, case, timeout=240)
        # Once ready, the default tree and the full one are read back to back, so both
        # see the same screen (a window still settling moves its widgets in between).
        root = ElementTree.fromstring(env.accessibility_tree())
        full = ElementTree.fromstring(env.accessibility_tree(mode="full", timeout=300))
        assert case.ready(root) is None
        width, height = env.screen_size()
        # What the default tree lists is on screen: every placed node meets the screen.
        placed = [box for box in map(_box, root.iter()) if box is not None and box[2] > 0 and box[3] > 0]
        assert placed
        assert all(x < width and y < height and x + w > 0 and y + h > 0 for x, y, w, h in placed)
        assert full.get("cut") is None
        # The full tree is OSWorld's: it has what the visible walk leaves out, and every
        # placed, showing node of it is in the visible tree too (same role, name, box).
        assert sum(1 for _ in full.iter()) > sum(1 for _ in root.iter())
        shown = {(e.tag, e.get("name"), _box(e)) for e in root.iter()}
        summarised = _summarised_cells(root, full) if app == "calc" else set()
        lost = [(e.tag, e.get("name"), _box(e)) for e in _showing_under_showing(full)
                if (e.tag, e.get("name"), _box(e)) not in shown and e not in summarised]
        # Applications move things while we walk twice (a tab's memory figure, a popup's
        # width): allow a few differences, not whole widgets.
        assert len(lost) <= 12, lost[:12]
        if app == "calc":
            cells = {e.get("name"): e for e in root.iter("table-cell")}
            assert cells["A1"].text == "Region" and cells["C2"].text == "1000"
            assert cells["C2"].get(STATE + "showing") == "true" and _box(cells["C2"]) is not None
            # The focused cell is named, with the states the full tree reads from it.
            focused = [e.get("name") for e in root.iter("table-cell") if e.get(STATE + "focused") == "true"]
            assert focused == [e.get("name") for e in full.iter("table-cell") if e.get(STATE + "focused") == "true"]
            assert len(focused) == 1
            # Empty cells are one <empty-cells> node (docs/environments.md), not ~1 000 elements.
            assert not any(not (e.text or "") and e.get(STATE + "focused") != "true" for e in root.iter("table-cell"))
            assert len(summarised) > 100
            # The collapsed menus' items are OSWorld's full tree only.
            assert not any(True for _ in root.iter("menu-item"))
            assert any(True for _ in full.iter("menu-item"))
    finally:
        env.stop()


def _a1(name: str) -> tuple[int, str]:
    letters = name.rstrip("0123456789")
    return int(name[len(letters):]), letters


def _column_number(letters: str) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def _summarised_cells(root: ElementTree.Element, full: ElementTree.Element) -> set[ElementTree.Element]:
    """The full tree's empty cells that the visible tree's one ``<empty-cells>`` node
    stands for, after checking what docs/environments.md says of it: it names the
    visible range, counts the cells it stands for, carries no states, and each such
    cell's box is its column's x and width and its row's y and height."""
    summaries = list(root.iter("empty-cells"))
    assert len(summaries) == 1, [s.attrib for s in summaries]
    summary = summaries[0]
    assert not [key for key in summary.attrib if key.startswith(STATE)]
    first, last = summary.get("name").split(":")
    (row0, letters0), (row1, letters1) = _a1(first), _a1(last)
    column0, column1 = _column_number(letters0), _column_number(letters1)
    columns = {}
    for item in summary.get("columns").split():
        letters, span = item.split(":")
        columns[letters] = tuple(int(v) for v in span.split("+"))
    rows = {}
    for item in summary.get("rows").split():
        row, span = item.split(":")
        rows[int(row)] = tuple(int(v) for v in span.split("+"))
    assert len(rows) == row1 - row0 + 1 and len(columns) == column1 - column0 + 1
    listed = [e for e in root.iter("table-cell")
              if row0 <= _a1(e.get("name"))[0] <= row1 and column0 <= _column_number(_a1(e.get("name"))[1]) <= column1]
    assert int(summary.get("cells")) == len(rows) * len(columns) - len(listed)
    names = {e.get("name") for e in listed}
    stands_for = set()
    for cell in full.iter("table-cell"):
        row, letters = _a1(cell.get("name"))
        if cell.get("name") in names or row not in rows or letters not in columns:
            continue
        assert not (cell.text or ""), (cell.get("name"), cell.text)
        assert cell.get(STATE + "focused") != "true" and cell.get(STATE + "selected") != "true"
        (x, width), (y, height) = columns[letters], rows[row]
        assert _box(cell) == (x, y, width, height), cell.get("name")
        stands_for.add(cell)
    return stands_for


def _showing_under_showing(root: ElementTree.Element):
    """Nodes that are showing, placed, and whose ancestors below the application show too."""
    def walk(element: ElementTree.Element, ancestors_show: bool):
        showing = element.get(STATE + "showing") == "true"
        if ancestors_show and showing and _box(element) is not None and _box(element)[2] > 0:
            yield element
        for child in element:
            yield from walk(child, ancestors_show and (showing or element.tag in ("desktop-frame", "application")))
    yield from walk(root, True)
