"""The annotation page in a real headless Chromium (Debian's chromium + Playwright)."""

from __future__ import annotations

import os

import pytest

from osguard.scout.annotate import AnnotationServer
from osguard.scout.annotations import AnnotationLog
from osguard.scout.build import build_items
from osguard.scout.items import load_items

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium (scripts/apt/scout.txt)")


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield instance
        instance.close()


def test_label_items_with_keys_search_tree_and_agreement(runs, tmp_path, browser):
    out = tmp_path / "items"
    build_items([runs["variants"]], out)
    items = load_items(out)
    with AnnotationServer(out, "alice") as server:
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("#progress[data-done='0']")
        assert page.inner_text("#annotator") == "alice"
        assert "unsafe takes precedence" in page.inner_text("#precedence")
        first_id = page.get_attribute("body", "data-item-id")
        assert first_id == items[0].id
        assert page.inner_text("#instruction") == items[0].instruction
        assert items[0].action.code in page.inner_text("#action")
        assert page.eval_on_selector("#shot", "img => img.complete && img.naturalWidth") == 64
        # the tree is collapsible and searchable
        page.fill("#search", "step 0")
        page.wait_for_selector("#hits[data-hits='1']")
        page.click("#collapse")
        assert page.eval_on_selector_all("#tree details[open]", "els => els.length") == 0
        page.click("#expand")
        assert page.eval_on_selector_all("#tree details[open]", "els => els.length") >= 1
        page.focus("body")
        page.click("#instruction")
        # keys: 3 = unsafe on item 1, then 'a' = allowed on item 2 (auto-advanced)
        page.keyboard.press("3")
        page.wait_for_selector(f"#status[data-saved='{first_id}:unsafe']")
        second_id = page.get_attribute("body", "data-item-id")
        assert second_id == items[1].id
        page.keyboard.press("a")
        page.wait_for_selector(f"#status[data-saved='{second_id}:allowed']")
        page.wait_for_selector("#progress[data-done='2']")
        assert AnnotationLog(out).latest() == {first_id: {"alice": "unsafe"}, second_id: {"alice": "allowed"}}
        # a reload shows what was saved
        page.reload()
        page.wait_for_selector("#progress[data-done='2']")
        page.keyboard.press("p")  # back from the first unlabelled item
        # a second annotator in another tab, then agreement on the page
        other = browser.new_page()
        other.goto(server.url + "?annotator=bob")
        other.wait_for_selector("#progress[data-done='0']")
        assert other.inner_text("#annotator") == "bob"
        other.click("#instruction")
        other.keyboard.press("s")
        other.wait_for_selector(f"#status[data-saved='{first_id}:unsafe']")
        other.click("button[data-label=unrelated]")
        other.wait_for_selector(f"#status[data-saved='{second_id}:unrelated']")
        other.click("#show-agreement")
        other.wait_for_function("document.getElementById('agreement').textContent.includes(\"Cohen\")")
        text = other.inner_text("#agreement")
        # the agreement table is an HTML table, not Markdown source
        assert "|" not in text
        rows = other.eval_on_selector_all("#agreement table.agreement tr",
                                          "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
        assert rows == [["annotators", "items", "agreement", "Cohen's κ"], ["alice / bob", "2", "0.500", rows[1][3]]]
        # both items carry the invariant hint "allowed"; humans said unsafe and (tie) unrelated
        assert [items[0].label, items[1].label] == ["allowed", "allowed"]
        assert "Invariant-derived vs human labels: 0/2 agree (0%)" in text


def test_keys_pressed_during_a_save_label_the_next_items(runs, tmp_path, browser):
    """Regression: keys pressed before a save returned all labelled the item on screen, and
    each late reply then advanced once more, so items were skipped. The page now runs
    saves and moves one at a time, in order. Saves are held in the browser (Playwright's
    request routing) until all keys are pressed; the server is the real one."""
    import time

    out = tmp_path / "items"
    build_items([runs["variants"]], out)
    items = load_items(out)
    assert len(items) >= 4
    held: list = []
    with AnnotationServer(out, "alice") as server:
        page = browser.new_page()
        page.route("**/api/label", lambda route: held.append(route))
        page.goto(server.url)
        page.wait_for_selector("#progress[data-done='0']")
        page.click("#instruction")
        for key in ("3", "a", "u"):
            page.keyboard.press(key)
        page.wait_for_function("document.body.dataset.queued === '3'")
        assert len(held) == 1  # one save in flight; the other keys wait for it
        for done, (item, label) in enumerate(zip(items, ("unsafe", "allowed", "unrelated")), start=1):
            deadline = time.monotonic() + 30
            while not held:  # the next save leaves the page once the previous one returned
                assert time.monotonic() < deadline, "the queued save was never sent"
                page.wait_for_timeout(20)
            assert len(held) == 1
            held.pop(0).continue_()
            page.wait_for_selector(f"#progress[data-done='{done}']")
        page.wait_for_function("document.body.dataset.queued === '0'")
        assert AnnotationLog(out).latest() == {items[0].id: {"alice": "unsafe"},
                                               items[1].id: {"alice": "allowed"},
                                               items[2].id: {"alice": "unrelated"}}
        assert page.get_attribute("body", "data-item-id") == items[3].id  # no item skipped
