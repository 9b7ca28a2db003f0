"""``/accessibility``: the default tree lists what shows, ``mode=full`` OSWorld's whole tree,
and every walk keeps to its budget. On a real local environment with a small GTK window
(the application trees are in ``test_app_trees.py``); the query checks need no display.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from xml.etree import ElementTree

import httpx
import pytest

from osguard.server import make_server

STATE = "{https://accessibility.ubuntu.example.org/ns/state}"

GTK_WINDOW = """
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
window = Gtk.Window(title="osguard-visible-probe")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
box.add(Gtk.Button(label="Shown Button"))
hidden = Gtk.Button(label="Hidden Button")
hidden.set_no_show_all(True)
box.add(hidden)
notebook = Gtk.Notebook()
notebook.append_page(Gtk.Button(label="Front Page Button"), Gtk.Label(label="Front"))
notebook.append_page(Gtk.Button(label="Back Page Button"), Gtk.Label(label="Back"))
box.add(notebook)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
"""


@pytest.fixture(scope="module")
def gtk_env(local_provider, private_state_dir):
    env = local_provider.start(timeout=120)
    try:
        if not env.capabilities.accessibility:
            pytest.skip(f"no accessibility tree here: {'; '.join(env.capabilities.notes)}")
        if not env.execute(["python3", "-c", "import gi; gi.require_version('Gtk', '3.0')"]).ok:
            pytest.skip("GTK 3 for Python (python3-gi, gir1.2-gtk-3.0) is not installed")
        env.write_file("~/probe.py", GTK_WINDOW.encode())
        env.launch(["python3", "/home/user/probe.py"])
        deadline = time.monotonic() + 120  # under load a GTK start takes long: a deadline, not a count
        while True:
            tree = env.accessibility_tree(mode="full")
            if tree and "Back Page Button" in tree:
                break
            if time.monotonic() > deadline:
                pytest.fail("the GTK window never showed up in the accessibility tree in 120 s")
            time.sleep(0.2)
        yield env
    finally:
        env.stop()


def _names(xml: str, tag: str) -> list[str]:
    return [e.get("name") or "" for e in ElementTree.fromstring(xml).iter(tag)]


@pytest.mark.gui
def test_the_default_tree_leaves_out_what_does_not_show(gtk_env) -> None:
    """A hidden button and a background notebook page must never be in the default tree
    (the walk of everything made LibreOffice's tree a megabyte and ten seconds)."""
    visible = gtk_env.accessibility_tree()
    full = gtk_env.accessibility_tree(mode="full")
    assert {"Shown Button", "Front Page Button"} <= set(_names(visible, "push-button"))
    assert "Hidden Button" not in visible and "Back Page Button" not in visible
    assert {"Shown Button", "Hidden Button", "Front Page Button", "Back Page Button"} <= set(_names(full, "push-button"))
    # Everything the default tree lists below the applications shows.
    root = ElementTree.fromstring(visible)
    for application in root:
        for element in application.iter():
            if element is not application:
                assert element.get(STATE + "showing") == "true", (element.tag, element.get("name"))


@pytest.mark.gui
def test_a_walk_over_budget_stops_and_says_so(gtk_env) -> None:
    """A walk must never run past its node budget unannounced."""
    response = httpx.get(gtk_env.info.endpoint + "/accessibility", params={"max_nodes": 3}, timeout=60)
    assert response.status_code == 200
    body = response.json()
    assert body["cut"] == "node budget reached (3 nodes)"
    root = ElementTree.fromstring(body["AT"])
    assert root.get("cut") == "node budget reached (3 nodes)"
    assert sum(1 for _ in root.iter()) - 1 == 3
    full = httpx.get(gtk_env.info.endpoint + "/accessibility", params={"mode": "full", "max_nodes": 2}, timeout=60).json()
    assert full["cut"] == "node budget reached (2 nodes)"
    assert "cut" not in httpx.get(gtk_env.info.endpoint + "/accessibility", timeout=60).json()


@pytest.fixture()
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("DISPLAY", raising=False)
    server = make_server(host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("query, message", [
    ("mode=everything", "mode='everything' of /accessibility: expected one of visible, full"),
    ("max_nodes=0", "max_nodes='0' of /accessibility: expected a positive integer"),
    ("max_nodes=many", "max_nodes='many' of /accessibility: expected a positive integer"),
    ("max_seconds=-1", "max_seconds='-1' of /accessibility: expected a positive number"),
    ("depth=3", "unknown query parameter 'depth' of /accessibility: expected mode, max_nodes or max_seconds"),
])
def test_bad_accessibility_queries_are_refused(url: str, query: str, message: str) -> None:
    response = httpx.get(f"{url}/accessibility?{query}")
    assert response.status_code == 400
    assert response.json() == {"status": "error", "message": message}


def test_good_queries_without_a_display_answer_as_before(url: str) -> None:
    for query in ("", "?mode=full", "?mode=visible&max_nodes=10&max_seconds=2.5"):
        response = httpx.get(f"{url}/accessibility{query}")
        assert response.status_code == 200
        assert response.json() == {"AT": None, "error": "no X display in this environment"}
