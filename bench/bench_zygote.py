"""Benchmark: a pyautogui action forked by the server's zygote vs started cold.

In one environment (default provider ``local``), interleaved rounds of the same OSWorld
action through ``/execute``:

- cold (the baseline, how every action ran before): ``env python -c "import pyautogui; ...;
  pyautogui.moveTo(x, y)"`` -- not a ``python`` argv, so the server starts a fresh
  interpreter (``env`` adds one exec);
- warm: ``python -c "..."``, the same code, forked by the zygote (osguard/server/zygote.py).

Per action: wall seconds through the client (median), and CPU seconds of the environment's
processes (``bench_rows.environment_cpu``: its cgroup on local, its container on docker),
the median of per-round deltas. pyautogui's own 0.1 s pause after a move is in both.

Usage: .venv/bin/python bench/bench_zygote.py [--provider local] [--runs 30] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import machine_line, write_section  # noqa: E402
from bench_rows import environment_cpu  # noqa: E402

from osguard.providers import get_provider  # noqa: E402

PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", default="local")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    env = get_provider(args.provider).start()
    try:
        argv = {"cold": lambda code: ["env", "python", "-c", code], "warm": lambda code: ["python", "-c", code]}
        wall: dict[str, list[float]] = {k: [] for k in argv}
        cpu: dict[str, list[float]] = {k: [] for k in argv}
        for round_ in range(args.runs + 2):  # two untimed rounds: the zygote starts in the first
            for label, make in argv.items():
                code = PREFIX + f"pyautogui.moveTo({200 + round_}, 300)"
                before_cpu, started = environment_cpu(env), time.perf_counter()
                result = env.execute(make(code))
                elapsed, used = time.perf_counter() - started, environment_cpu(env) - before_cpu
                assert result.returncode == 0, result
                if round_ >= 2:
                    wall[label].append(elapsed)
                    cpu[label].append(used)
        parent = env.execute(["python", "-c", "import os; print(open(f'/proc/{os.getppid()}/cmdline','rb').read()[:80])"])
        assert "zygote" in parent.output, parent  # the warm rows really were forked
    finally:
        env.stop()
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in argv}
    body = (f"\n`.venv/bin/python bench/bench_zygote.py --provider {args.provider} --runs {args.runs}`"
            f" — {machine_line()}; medians of {args.runs} interleaved rounds.\n\n"
            "| one pyautogui action (`moveTo`) through `/execute` | wall (s) | environment CPU (s) |\n"
            "|---|---:|---:|\n"
            f"| cold: `env python -c ...` (baseline) | {med['cold'][0]:.3f} | {med['cold'][1]:.3f} |\n"
            f"| warm: `python -c ...`, forked by the zygote | {med['warm'][0]:.3f} | {med['warm'][1]:.3f} |\n"
            f"| warm / cold | {med['warm'][0] / med['cold'][0]:.2f} | "
            f"{med['warm'][1] / med['cold'][1]:.2f} |\n")
    print(body)
    if args.write:
        write_section(args.write, f"## python zygote ({args.provider})", body)


if __name__ == "__main__":
    main()
