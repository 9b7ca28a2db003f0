"""Benchmark: reset to a ready environment from a warm pool (``osguard.builder.pool``).

What is timed is the reset an episode waits for: from "the previous episode finished" (its
environment stopped) to "the next environment is ready to act" (started, setup and hazards
done, start steps done, baseline probed), as whole operations, interleaved per round
(bench/_timing.py), for one variant at a time:

- fresh build: ``build_variant`` (what every episode pays with ``--pool 0``; the baseline);
- warm pool: ``ReadyPool.take()`` when the replacement had time to get ready (an agent's
  episode longer than a build: the untimed preparation waits for it);
- cold pool: ``take()`` right after the previous ``take()`` and the stop of what it
  gave (an episode that lasted no time: the replacement started at that take, and the
  stop overlaps its build).

No background build of the pool runs while another contender is timed (each
preparation waits for it), so the fresh build is not slowed by the pool.

CPU: a pool moves the build off the critical path; it does not make it cheaper. ``--cpu``
builds N environments fresh and N through a pool (``total=N``) and reports CPU seconds per
ready environment: this process and its waited-for children (``getrusage``) plus the
environment's own processes at stop (``bench_rows.environment_cpu``).

Usage: .venv/bin/python bench/bench_pool.py [--provider local] [--variant ID ...] [--runs 3]
       [--cpu N] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from _timing import interleaved, machine_line, write_section

REPO = Path(__file__).resolve().parents[1]
NOTE = ("Warm: the replacement was ready (an episode longer than a build); `take()` is a queue pop "
        "and one `is_alive` request. Cold: `take()` right after the previous take and the stop of what it "
        "gave (an episode that lasted no time); it waits for the rest of a build, less the overlap with "
        "that stop.")
DEFAULT_VARIANTS = {"local": ("os-rename-todo-keep-archive", "writer-center-heading-keep-other-alignment"),
                    "docker": ("os-rename-todo-keep-archive",)}


def measure(variant, provider, runs: int) -> dict[str, float]:
    """Median seconds of each contender over ``runs`` interleaved rounds (one warm-up)."""
    from osguard.builder.build import build_variant
    from osguard.builder.pool import ReadyPool

    held: list[object] = []

    def drop_all() -> None:  # the previous episode's environment is stopped before the reset
        while held:
            held.pop().stop()

    # One pool for both pool contenders, so that at most one environment waits while
    # another is built (the machine is shared).
    pool = ReadyPool(variant, provider, size=1)
    try:
        def prepare_quiet(_round: int) -> None:
            drop_all()
            pool.wait()  # no background build while something is timed; warm: the replacement is ready

        def prepare_cold(_round: int) -> None:
            prepare_quiet(_round)
            pool.take().stop()  # the previous take and its (instant) episode: the replacement starts now

        def fresh() -> None:
            held.append(build_variant(variant, provider))

        def take() -> None:
            held.append(pool.take())

        samples = interleaved({"fresh": fresh, "warm": take, "cold": take}, runs, warmup=1,
                              prepare={"fresh": prepare_quiet, "warm": prepare_quiet, "cold": prepare_cold})
    finally:
        drop_all()
        pool.close()
    return {label: samples.median(label) for label in ("fresh", "warm", "cold")}


def cpu_per_env(variant, provider, count: int, pooled: bool) -> tuple[float, float]:
    """(wall s, CPU s) per ready environment over ``count`` of them, fresh or through a pool."""
    from bench_rows import environment_cpu

    from osguard.builder.build import build_variant
    from osguard.builder.pool import ReadyPool

    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    started = time.perf_counter()
    env_cpu = 0.0
    pool = ReadyPool(variant, provider, size=1, total=count) if pooled else None
    try:
        for _ in range(count):
            built = pool.take() if pool is not None else build_variant(variant, provider)
            env_cpu += environment_cpu(built.env)
            built.stop()
    finally:
        if pool is not None:
            pool.close()
    wall = time.perf_counter() - started
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    own = sum(getattr(a, f) - getattr(b, f) for b, a in zip(before, after) for f in ("ru_utime", "ru_stime"))
    return wall / count, (own + env_cpu) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--variant", action="append")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=0, metavar="N",
                        help="also CPU seconds per ready environment over N builds, fresh and pooled")
    parser.add_argument("--write", help="update this provider's '## Ready pool' section of this Markdown file")
    args = parser.parse_args()

    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider(args.provider)
    wanted = args.variant or list(DEFAULT_VARIANTS.get(args.provider, DEFAULT_VARIANTS["local"]))
    by_id = {v.id: v for v in load_suite([REPO / "variants"])}
    header = machine_line()
    lines = [f"`.venv/bin/python bench/bench_pool.py --provider {args.provider} --runs {args.runs}"
             f"{f' --cpu {args.cpu}' if args.cpu else ''} --write bench/results.md` — {header}; "
             f"medians of {args.runs} interleaved rounds after one warm-up", "",
             "Reset = from the previous episode's end (its environment stopped) to the next environment "
             "ready to act (started, setup and hazards, start steps, baseline probed). " + NOTE, "",
             "| variant | fresh build (s) | warm pool (s) | × fresh | cold pool (s) | × fresh |",
             "|---|---:|---:|---:|---:|---:|"]
    cpu_lines = []
    for variant_id in wanted:
        variant = by_id[variant_id]
        result = measure(variant, provider, args.runs)
        print(variant_id, {k: round(v, 3) for k, v in result.items()}, flush=True)
        lines.append(f"| `{variant_id}` | {result['fresh']:.3f} | **{result['warm']:.3f}** | "
                     f"{result['warm'] / result['fresh']:.3f} | {result['cold']:.3f} | "
                     f"{result['cold'] / result['fresh']:.2f} |")
        if args.cpu:
            fresh_wall, fresh_cpu = cpu_per_env(variant, provider, args.cpu, pooled=False)
            pool_wall, pool_cpu = cpu_per_env(variant, provider, args.cpu, pooled=True)
            print(variant_id, "cpu", fresh_cpu, pool_cpu, flush=True)
            cpu_lines.append(f"| `{variant_id}` | {fresh_cpu:.2f} | {pool_cpu:.2f} | {pool_cpu / fresh_cpu:.2f} |")
    if cpu_lines:
        lines += ["", f"CPU seconds per ready environment over {args.cpu} in a row (this process and its "
                  "children, plus the environment's own processes at stop):", "",
                  "| variant | fresh build (CPU s) | through a pool (CPU s) | × fresh |", "|---|---:|---:|---:|",
                  *cpu_lines]
    import os

    one, five, _ = os.getloadavg()
    lines += ["", f"Load average at the end: {one:.1f} (1 min) / {five:.1f} (5 min)."]
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section(Path(args.write), f"## Ready pool ({args.provider})", body)


if __name__ == "__main__":
    main()
