"""Ray's overhead per episode: the headless shell variants run by ``run_suite`` through
the local executor (2 threads) and through Ray (a local cluster: a head without CPUs and
two worker nodes of 1 CPU each, on loopback), alternately in the same run.

Measured as whole operations: the wall time of each ``run_suite`` call (start to the last
results line written on the driver), divided by the episodes it ran. Both sides run the
same episodes at the same concurrency (2); the Ray side adds task submission, the worker
processes, shipping each episode folder back and writing it on the driver. The cluster's
start-up (``ray start`` x3) and the driver's connection are timed apart, once.

Usage: .venv/bin/python bench/bench_ray.py [--repeats 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHELL = ["os-rename-todo-keep-archive", "os-restore-poster-keep-other-trash", "os-compress-old-files-keep-archive",
         "os-copy-file1-only-listed-dirs", "os-copy-jpgs-not-private-pictures", "os-copy-failed-notebooks-keep-fails",
         "os-ssh-user-test1-keep-private-notes", "git-push-daily-update-untracked-env",
         "vscode-theme-keep-user-settings"]


def run_once(variants, executor, out: Path) -> tuple[float, dict[str, str]]:
    """Wall seconds per episode run (variants the provider cannot run are skipped) and the outcomes."""
    from osguard.runner import run_suite

    t0 = time.perf_counter()
    summary = run_suite(variants, "replay:safe", out_dir=out, provider="local", workers=2, progress=False,
                        observation="shell", executor=executor)
    wall = time.perf_counter() - t0
    return wall / max(1, summary.ran), {r["episode_id"]: r["outcome"] for r in summary.results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="rewrite the 'Ray executor' section of bench/results.md")
    args = parser.parse_args()

    from osguard.testing.ray_cluster import LocalRayCluster

    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    cluster = LocalRayCluster(root)
    t0 = time.perf_counter()
    cluster.start_head()
    cluster.add_worker("w1", 1)
    cluster.add_worker("w2", 1)
    start_s = time.perf_counter() - t0
    os.environ.update({k: cluster.env[k] for k in ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH",
                                                   "OSGUARD_STATE_DIR")})
    try:
        from osguard.cli.build_cmds import resolve_variants
        from osguard.runner.executor import LocalExecutor, RayExecutor

        variants = [v for v in resolve_variants(None) if v.id in SHELL]
        t0 = time.perf_counter()
        ray_executor = RayExecutor(cluster.address)
        connect_s = time.perf_counter() - t0
        per_episode: dict[str, list[float]] = {"local": [], "ray": []}
        same = True
        run_once(variants[:2], ray_executor, root / "warm-ray")  # workers imported osguard once
        run_once(variants[:2], LocalExecutor(2), root / "warm-local")
        for i in range(args.repeats):
            got = {}
            for name, executor in (("local", LocalExecutor(2)), ("ray", ray_executor)):
                seconds, outcomes = run_once(variants, executor, root / f"{name}-{i}")
                per_episode[name].append(seconds)
                got[name] = outcomes
            same = same and got["local"] == got["ray"]
            print(f"repeat {i + 1}: local {per_episode['local'][-1]:.2f} s/episode, ray {per_episode['ray'][-1]:.2f} "
                  f"s/episode, same outcomes: {got['local'] == got['ray']}", file=sys.stderr)
        ray_executor.close()
        ran = len(got["local"])
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    local_med = statistics.median(per_episode["local"])
    ray_med = statistics.median(per_episode["ray"])
    lines = [
        "## Ray executor (local cluster)",
        "",
        f"`bench/bench_ray.py --repeats {args.repeats}`: the {len(variants)} headless shell variants ({ran} ran; "
        "the others need what the local provider lacks here, e.g. root), `replay:safe`, "
        "`--observation shell`, 2 at a time on each side; wall time of each whole `run_suite` call / episodes, "
        "median over the repeats, both sides alternating in the same run. Ray: a head without CPUs and two "
        "1-CPU worker nodes on 127.0.0.2 (`osguard.testing.ray_cluster`).",
        "",
        "| executor | median s / episode | ratio |",
        "|---|---:|---:|",
        f"| local (2 threads) | {local_med:.2f} | 1.00 |",
        f"| ray (2 worker nodes) | {ray_med:.2f} | {ray_med / local_med:.2f} |",
        "",
        f"Overhead per episode: {ray_med - local_med:+.2f} s. Same outcomes on both sides in every repeat: "
        f"{'yes' if same else 'NO'}. One-off costs: starting the three nodes {start_s:.1f} s, the driver's "
        f"connection {connect_s:.1f} s.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        sys.path.insert(0, str(ROOT / "bench"))
        from _timing import write_section

        write_section(ROOT / "bench" / "results.md", "## Ray executor (local cluster)", text.split("\n", 2)[2])


if __name__ == "__main__":
    main()
