"""The HTML report and the episode viewer as a person sees them: rendered in a real headless
Chromium (Debian's chromium + Playwright) over real run directories."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from osguard.report import load_run, render_html, write_viewer

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DATA = Path(__file__).parent.parent / "runner" / "data"

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium (scripts/apt/scout.txt)")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A guarded run of two episodes and an unguarded run of one: different sizes on purpose."""
    from osguard.runner import run_suite
    from osguard.spec import load_suite

    root = tmp_path_factory.mktemp("runs")
    suite_dir = root / "suite"
    suite_dir.mkdir()
    source = (DATA / "suite" / "rt-rename-todo.yaml").read_text()
    (suite_dir / "rt-rename-todo.yaml").write_text(source)
    (suite_dir / "rt-rename-todo-with-a-rather-long-episode-name-to-wrap.yaml").write_text(
        source.replace("id: rt-rename-todo", "id: rt-rename-todo-with-a-rather-long-episode-name-to-wrap", 1))
    two = load_suite([suite_dir])
    one = load_suite([suite_dir / "rt-rename-todo.yaml"])
    run_suite(one, "replay:unsafe", out_dir=root / "u", progress=False)
    run_suite(two, "replay:unsafe", f"scripted:{DATA / 'block-find.yaml'}", out_dir=root / "g", progress=False)
    return root / "g", root / "u", root


def _open(browser, path: Path):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(path.as_uri())
    return page


def test_report_page_as_rendered(runs, browser):
    """Never again: blank token cells, "blocked 4 (invalid 1) (unrelated 1)", an outcome table
    that silently mixes runs of different sizes, no domain plot for the compared run,
    right-aligned text columns, episode names wrapped over several lines."""
    guarded, unguarded, root = runs
    html = root / "report.html"
    html.write_text(render_html(load_run(guarded), load_run(unguarded)))
    page = _open(browser, html)
    page.screenshot(path=str(root / "report.png"), full_page=True)
    note = page.inner_text("#shared-note")
    assert note == (f"compared on the 1 episode both runs finished (1 only in {guarded}: "
                    "left out of the outcome table)")
    # the outcome table has one row per run, each over the one shared episode
    counts = page.eval_on_selector_all("h2 + p + table tr td:nth-child(2)", "tds => tds.map(t => t.textContent)")
    assert counts == ["1", "1"]
    tokens = page.eval_on_selector_all("td.tokens", "tds => tds.map(t => t.textContent.trim())")
    assert tokens == ["0", "0"]
    blocked = page.inner_text("#blocked-cell")
    assert blocked == "6 (unsafe 6)"  # 2 episodes, 3 blocked proposals each (retry budget 2)
    # a domain plot for each run
    assert page.eval_on_selector_all("svg", "s => s.length") >= 6
    assert page.content().count("by domain — ") == 2
    # text columns read left to right; the long episode name stays on one line
    align = page.eval_on_selector("#episodes tr:nth-child(2) td.reason", "td => getComputedStyle(td).textAlign")
    assert align == "left"
    name = page.eval_on_selector_all("#episodes td.name", "tds => tds.map(t => [t.textContent, t.getClientRects().length, t.offsetHeight])")
    long_row = [row for row in name if row[0].endswith("wrap")][0]
    short_row = [row for row in name if row[0] == "rt-rename-todo"][0]
    assert long_row[2] == short_row[2], "the long episode name wrapped"


def test_viewer_shows_an_invalid_verdicts_raw_reply(runs, browser, tmp_path):
    """Never again: the viewer hides the guardrail's unparseable reply behind `invalid`."""
    guarded, _, _ = runs
    copy = tmp_path / "g"
    shutil.copytree(guarded, copy)
    steps_path = next((copy / "episodes").glob("*/steps.jsonl"))
    records = [json.loads(line) for line in steps_path.read_text().splitlines() if line.strip()]
    for record in records:
        for proposal in record.get("proposals") or []:
            if proposal.get("verdict"):
                proposal["verdict"].update(label="invalid", raw="I think this is fine?? maybe")
    steps_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    index = write_viewer(copy)
    page = _open(browser, index.parent / "episodes" / f"{steps_path.parent.name}.html")
    raw = page.inner_text(".raw-verdict")
    assert "I think this is fine?? maybe" in raw
    assert page.is_visible(".raw-verdict pre")
