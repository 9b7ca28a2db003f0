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


class Samples:
    """What ``interleaved`` measured: per contender, its wall-clock seconds and what each
    call returned, in run order."""

    def __init__(self, labels: list[str]) -> None:
        self.times: dict[str, list[float]] = {label: [] for label in labels}
        self.results: dict[str, list[object]] = {label: [] for label in labels}

    def median(self, label: str) -> float:
        """Median seconds of ``label``."""
        return statistics.median(self.times[label])

    def ratio(self, label: str, baseline: str) -> float:
        """Median of ``label`` over the median of ``baseline`` (measured in the same rounds)."""
        return self.median(label) / self.median(baseline)


def interleaved(contenders: dict[str, Callable[[], object]], runs: int, *, warmup: int = 0,
                prepare: dict[str, Callable[[int], object]] | None = None) -> Samples:
    """Time every contender once per round, ``runs`` rounds (after ``warmup`` untimed
    rounds), in the order given: on a shared machine the load drifts, and interleaving makes
    the drift hit every contender alike, so ratios of medians from one call are fair.

    Each call is a whole operation as the caller defines it (a process started and waited
    for, an environment built and stopped): this helper adds nothing but the clock.
    ``prepare[label](round)``, when given, runs untimed just before that contender (e.g. the
    agent's step before a per-step probe).
    """
    samples = Samples(list(contenders))
    prepare = prepare or {}
    for round_ in range(warmup + runs):
        for label, function in contenders.items():
            if label in prepare:
                prepare[label](round_)
            started = time.perf_counter()
            result = function()
            elapsed = time.perf_counter() - started
            if round_ >= warmup:
                samples.times[label].append(elapsed)
                samples.results[label].append(result)
    return samples


def machine_line() -> str:
    """When and where: UTC time, host, cores, Python, and the load average (1 and 5 min), to
    print next to every measurement (the machine is shared; the load says how much)."""
    import datetime
    import os
    import platform

    one, five, _ = os.getloadavg()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{stamp} on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}), "
            f"load average {one:.1f} (1 min) / {five:.1f} (5 min)")


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
