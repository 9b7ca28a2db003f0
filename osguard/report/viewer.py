"""The static episode viewer (``osguard view RUN_DIR``).

Writes ``index.html`` (one row per episode) and ``episodes/<id>.html`` (one page per
episode: each step's pre-action screenshot, every proposal with its verdict and feedback,
the executed action, its output and the invariants after it). Pages stay quick on long
runs: screenshots appear as small JPEG thumbnails (made once, reused on later calls) with
``loading="lazy"``, linking to the full PNG left in place in the run directory.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from osguard.report.load import Run, load_run

THUMB_WIDTH = 320


def _thumbnail(src: Path, dst: Path) -> bool:
    """Make a JPEG thumbnail of ``src`` at ``dst`` unless an up-to-date one exists."""
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return True
    from PIL import Image

    try:
        with Image.open(src) as img:
            img = img.convert("RGB")
            ratio = THUMB_WIDTH / max(img.width, 1)
            if ratio < 1:
                img = img.resize((THUMB_WIDTH, max(1, int(img.height * ratio))))
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_suffix(".tmp.jpg")
            img.save(tmp, "JPEG", quality=70)
            os.replace(tmp, dst)
        return True
    except OSError:
        return False


def _env() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("osguard.report", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]))


def write_viewer(run_dir: str | Path, out: str | Path | None = None, *, thumb_workers: int = 4) -> Path:
    """Write the viewer for ``run_dir`` into ``out`` (default ``RUN_DIR/view``).

    Returns:
        The path of ``index.html``.
    """
    run = load_run(run_dir)
    out_dir = Path(out) if out is not None else run.path / "view"
    (out_dir / "episodes").mkdir(parents=True, exist_ok=True)
    env = _env()
    page = env.get_template("episode.html.j2")
    # links from view/episodes/<id>.html back into the run directory
    to_run = Path(os.path.relpath(run.path.resolve(), (out_dir / "episodes").resolve()))
    jobs: list[tuple[Path, Path]] = []
    rows = []
    for rec in run.results:
        eid = rec["episode_id"]
        steps = list(run.steps(eid))
        doc = run.outcome_doc(eid)
        for step in steps:
            shot = (step.get("observation") or {}).get("screenshot")
            if shot:
                src = run.episode_dir(eid) / shot
                dst = out_dir / "thumbs" / eid / (Path(shot).stem + ".jpg")
                jobs.append((src, dst))
                step["_thumb"] = f"../thumbs/{eid}/{Path(shot).stem}.jpg"
                step["_full"] = str(to_run / "episodes" / eid / shot)
            tree = (step.get("observation") or {}).get("a11y")
            if tree:
                step["_a11y"] = str(to_run / "episodes" / eid / tree)
        html = page.render(rec=rec, doc=doc, steps=steps, run=run)
        (out_dir / "episodes" / f"{eid}.html").write_text(html, encoding="utf-8")
        rows.append(rec)
    if jobs:
        with ThreadPoolExecutor(max_workers=thumb_workers) as pool:
            list(pool.map(lambda job: _thumbnail(*job), jobs))
    index = out_dir / "index.html"
    index.write_text(env.get_template("index.html.j2").render(run=run, rows=rows), encoding="utf-8")
    return index


__all__ = ["write_viewer", "Run"]
