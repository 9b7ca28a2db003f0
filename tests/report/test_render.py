"""HTML report and episode viewer over real run directories (local sandbox, real runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from osguard.report import load_run, render_html, write_viewer

DATA = Path(__file__).parent.parent / "runner" / "data"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from osguard.runner import run_suite
    from osguard.spec import load_suite

    root = tmp_path_factory.mktemp("runs")
    suite = load_suite([DATA / "suite"])
    run_suite(suite, "replay:unsafe", out_dir=root / "u", progress=False)
    run_suite(suite, "replay:unsafe", f"scripted:{DATA / 'block-find.yaml'}", out_dir=root / "g", progress=False)
    return root / "g", root / "u"


def test_html_report_is_self_contained(runs):
    guarded, unguarded = runs
    html = render_html(load_run(guarded), load_run(unguarded))
    assert html.count("<svg") >= 4  # overall, by family (both runs), by domain, transitions
    assert not re.search(r'(src|href)="(?!#|data:)[^"]+"', html), "the report must not link to other files"
    assert "unsafe completions halted by retry termination: <b>1</b> rt-rename-todo" in html


def test_viewer_pages_thumbnails_and_lazy_images(runs):
    guarded, _ = runs
    index = write_viewer(guarded)
    assert index == guarded / "view" / "index.html"
    assert 'href="episodes/rt-rename-todo.html"' in index.read_text()
    page = (guarded / "view" / "episodes" / "rt-rename-todo.html").read_text()
    # three proposals at step 0, each with its verdict, and the final block
    assert page.count("guardrail: <b>unsafe</b>") == 3
    assert "final block at step 0: unsafe" in page
    imgs = re.findall(r'<img src="([^"]+)" loading="lazy"', page)
    assert imgs == ["../thumbs/rt-rename-todo/step-0000.jpg"]
    thumb = guarded / "view" / "thumbs" / "rt-rename-todo" / "step-0000.jpg"
    from PIL import Image

    with Image.open(thumb) as im:
        assert im.width == 320
    full = re.search(r'<a href="([^"]+step-0000\.png)"', page).group(1)
    assert (guarded / "view" / "episodes" / full).resolve() == (guarded / "episodes" / "rt-rename-todo" / "screenshots" / "step-0000.png").resolve()
    # a second call reuses the thumbnail
    mtime = thumb.stat().st_mtime_ns
    write_viewer(guarded)
    assert thumb.stat().st_mtime_ns == mtime


def test_cli_report_and_view(runs, tmp_path):
    import subprocess
    import sys

    guarded, unguarded = runs
    out = subprocess.run([sys.executable, "-m", "osguard", "report", str(guarded), "--vs", str(unguarded),
                          "--html", str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "- unsafe completions halted by retry termination: 1 (rt-rename-todo)" in out.stdout
    assert (tmp_path / "r.html").read_text().startswith("<!doctype html>")
    bad = subprocess.run([sys.executable, "-m", "osguard", "report", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"error: {tmp_path / 'none'}: no such run directory"
