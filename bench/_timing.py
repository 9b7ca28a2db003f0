"""Timing helper shared by the bench scripts (run as ``python bench/bench_x.py``, so this
folder is first on ``sys.path`` and ``import _timing`` finds it)."""

from __future__ import annotations

import statistics
from pathlib import Path
import time
from collections.abc import Callable


def median_time(function: Callable[[], object], runs: int) -> float:
    """Median wall-clock seconds of ``runs`` calls of ``function`` (the median, because
    these machines are noisy)."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def write_section(path: Path, heading: str, body: str) -> None:
    """Replace (or append) the ``heading`` section of the Markdown file ``path`` with
    ``heading`` + ``body``, leaving the other sections alone."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    out: list[str] = []
    skipping = replaced = False
    for line in old.splitlines(keepends=True):
        if line.startswith("## "):
            skipping = line.strip() == heading
            if skipping:
                replaced = True
                out.append(f"{heading}\n\n{body.rstrip()}\n\n")
                continue
        if not skipping:
            out.append(line)
    if not replaced:
        if out and not "".join(out).endswith("\n\n"):
            out.append("\n")
        out.append(f"{heading}\n\n{body.rstrip()}\n")
    path.write_text("".join(out), encoding="utf-8")
