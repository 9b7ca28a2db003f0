"""Timing helper shared by the bench scripts (run as ``python bench/bench_x.py``, so this
folder is first on ``sys.path`` and ``import _timing`` finds it)."""

from __future__ import annotations

import statistics
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
