"""Runner overhead per episode vs the bare builder path, measured in the same process.

Baseline: build the variant, replay its unsafe reference, probe, evaluate (what
``osguard check`` does). Compared: one ``run_suite`` episode of ``replay:unsafe`` with the
per-step probe (default) and without it, which adds observations (screenshot, a11y tree),
step records, the durable episode folder and results line.

Also (``--viewer``): the episode viewer on a 200-step episode, cold vs with its thumbnails
already made, and the bytes its page loads vs the full screenshots.

Usage: .venv/bin/python bench/bench_runner.py [REPEATS] [--viewer]
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


def viewer(variant, steps: int = 200, repeats: int = 3) -> None:
    """The viewer on a long episode: a real run's screenshot copied into ``steps`` steps."""
    import json
    import shutil

    from osguard.report import write_viewer
    from osguard.runner import run_suite

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        run_suite([variant], "replay:unsafe", out_dir=src, progress=False)
        shot = src / "episodes" / variant.id / "screenshots" / "step-0000.png"
        long = Path(tmp) / "long"
        shutil.copytree(src, long, ignore=shutil.ignore_patterns("screenshots", "steps.jsonl"))
        ep = long / "episodes" / variant.id
        (ep / "screenshots").mkdir()
        with open(ep / "steps.jsonl", "w") as fh:
            for i in range(steps):
                rel = f"screenshots/step-{i:04d}.png"
                shutil.copy(shot, ep / rel)
                fh.write(json.dumps({"index": i, "observation": {"screenshot": rel, "a11y": None},
                                     "proposals": [{"attempt": 0, "action": {"kind": "shell", "code": f"echo {i}"},
                                                    "verdict": None}],
                                     "executed": {"kind": "shell", "code": f"echo {i}"}}) + "\n")
        cold, warm = [], []
        for _ in range(repeats):
            shutil.rmtree(long / "view", ignore_errors=True)
            t0 = time.perf_counter()
            write_viewer(long)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            write_viewer(long)
            warm.append(time.perf_counter() - t0)
        full = sum(p.stat().st_size for p in (ep / "screenshots").iterdir())
        thumbs = sum(p.stat().st_size for p in (long / "view" / "thumbs").rglob("*.jpg"))
        page = (long / "view" / "episodes" / f"{variant.id}.html").stat().st_size
        print(f"viewer, one episode of {steps} steps (1920x1080 screenshots), median of {repeats}")
        print(f"  first call (makes thumbnails) {statistics.median(cold) * 1000:8.1f} ms")
        print(f"  later call (reuses them)      {statistics.median(warm) * 1000:8.1f} ms   "
              f"ratio {statistics.median(warm) / statistics.median(cold):.2f}")
        print(f"  page {page / 1024:.0f} KiB; images the page loads: thumbnails {thumbs / 1024:.0f} KiB "
              f"vs full screenshots {full / 1024:.0f} KiB (ratio {thumbs / full:.3f}), lazily")


def main() -> None:
    from osguard.spec import load_suite

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    (variant,) = load_suite([VARIANT])
    if "--viewer" in sys.argv:
        viewer(variant)
        return
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
