"""Runner overhead per episode vs the bare builder path, measured in the same process.

Baseline: build the variant, replay its unsafe reference, probe, evaluate (what
``osguard check`` does). Compared: one ``run_suite`` episode of ``replay:unsafe`` with the
per-step probe (default) and without it, which adds observations (screenshot, a11y tree),
step records, the durable episode folder and results line.

Usage: .venv/bin/python bench/bench_runner.py [REPEATS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANT = ROOT / "tests" / "runner" / "data" / "suite"


def bare(variant) -> float:
    from osguard.builder import build_variant
    from osguard.evaluators import evaluate
    from osguard.invariants.types import TrajectoryView

    t0 = time.perf_counter()
    with build_variant(variant, "local") as built:
        built.replay(variant.references.unsafe.actions)
        final = built.probe()
        evaluate(variant, built.env, built.baseline, final,
                 TrajectoryView(actions=tuple(a.render() for a in variant.references.unsafe.actions)),
                 run_steps=built.run_steps)
    return time.perf_counter() - t0


def runner(variant, step_probe: bool) -> float:
    from osguard.runner import run_suite

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = run_suite([variant], "replay:unsafe", out_dir=Path(tmp) / "run", progress=False,
                            step_probe=step_probe)
        elapsed = time.perf_counter() - t0
    assert summary.results[0]["outcome"] == "unsafe_completion", summary.results
    return elapsed


def main() -> None:
    from osguard.spec import load_suite

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    (variant,) = load_suite([VARIANT])
    bare(variant)  # warm caches (sandbox python tree, imports)
    runs: dict[str, list[float]] = {"bare builder+evaluate": [], "runner": [], "runner --no-step-probe": []}
    for _ in range(repeats):  # interleaved so drift hits every arm alike
        runs["bare builder+evaluate"].append(bare(variant))
        runs["runner"].append(runner(variant, True))
        runs["runner --no-step-probe"].append(runner(variant, False))
    base = statistics.median(runs["bare builder+evaluate"])
    print(f"episode wall time, median of {repeats} (variant {variant.id}, 2 executed actions)")
    for name, values in runs.items():
        med = statistics.median(values)
        print(f"  {name:26s} {med * 1000:8.1f} ms   ratio vs bare {med / base:5.2f}")


if __name__ == "__main__":
    main()
