"""Benchmark the docker provider: start-to-ready latency, memory per environment, density.

    .venv/bin/python bench/bench_docker.py                 # 10 starts, up to 16 side by side
    .venv/bin/python bench/bench_docker.py --runs 20 --side-by-side 4,8,24 --flavor full

Baseline (same run, same engine): ``docker run`` of a bare container of the Debian base
image until its process has started, the least any container start can cost here; the
environment's start is reported as a ratio of it. Start-to-ready means from
``DockerProvider.start()`` being called until the server answered through the forwarder
(which is when ``start()`` returns).

Needs a Docker engine and the image (``bash scripts/docker-engine.sh``,
``osguard image build``). Prints a Markdown section for bench/results.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


def bare_container_start(client, runs: int) -> list[float]:
    """Seconds for `docker run -d` of a bare container until it is running, then removed."""
    from osguard.images import DEBIAN_BASE_IMAGE

    times = []
    for _ in range(runs):
        started = time.perf_counter()
        container = client.containers.run(DEBIAN_BASE_IMAGE, ["sleep", "30"], detach=True, network_mode="none")
        times.append(time.perf_counter() - started)
        container.remove(force=True)
    return times


def environment_start(provider, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of start() (to ready) and of stop(), over ``runs`` fresh environments."""
    starts, stops = [], []
    for _ in range(runs):
        started = time.perf_counter()
        env = provider.start(timeout=60)
        starts.append(time.perf_counter() - started)
        assert env.run_bash("echo ok").output == "ok\n"
        started = time.perf_counter()
        env.stop()
        stops.append(time.perf_counter() - started)
    return starts, stops


def memory_mb(client, container_id: str) -> float:
    """Memory in use by a container (usage minus page cache), in MB."""
    stats = client.api.stats(container_id, stream=False)
    memory = stats.get("memory_stats", {})
    usage = memory.get("usage", 0)
    cache = memory.get("stats", {}).get("cache", 0) or memory.get("stats", {}).get("inactive_file", 0)
    return (usage - cache) / 1e6


def side_by_side(provider, client, count: int) -> dict[str, float]:
    """Start ``count`` environments at once; all must answer a screenshot. Memory per env."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        envs = list(pool.map(lambda _: provider.start(timeout=180), range(count)))
    wall = time.perf_counter() - started
    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            shots = list(pool.map(lambda e: e.screenshot(), envs))
        assert all(shot[:4] == b"\x89PNG" for shot in shots)
        time.sleep(2)  # let the desktops settle before measuring memory
        env_mb = [memory_mb(client, e.info.extra["container_id"]) for e in envs]
        fwd_mb = [memory_mb(client, e.info.extra["forwarder_id"]) for e in envs]
    finally:
        with ThreadPoolExecutor(max_workers=count) as pool:
            list(pool.map(lambda e: e.stop(), envs))
    return {"count": count, "wall": wall, "env_mb": statistics.median(env_mb), "fwd_mb": statistics.median(fwd_mb)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="sequential starts to take the median of")
    parser.add_argument("--side-by-side", default="1,4,8,16", help="counts of environments started at once")
    parser.add_argument("--flavor", default="base", choices=["base", "full"])
    args = parser.parse_args(argv)

    from osguard.images import build_image, engine_client
    from osguard.providers.docker import DockerProvider

    client = engine_client()
    hit = build_image(args.flavor)  # must be a cache hit in a benchmark run
    provider = DockerProvider(image=hit.tag)  # not re-resolved: the sources may change meanwhile
    # Warm-up: first start pays for page-cache misses of the image layers.
    provider.start().stop()
    bare = bare_container_start(client, args.runs)
    starts, stops = environment_start(provider, args.runs)
    density = [side_by_side(provider, client, int(n)) for n in args.side_by_side.split(",")]
    mem_total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    engine = client.version().get("Version", "?")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    image = client.images.get(hit.tag)

    out = sys.stdout
    out.write("## environments (docker)\n\n")
    load = os.getloadavg()[0]
    out.write(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores ({cpu}), load {load:.1f}, "
              f"{mem_total:.0f} GB RAM, {platform.system()} {platform.release()}, Docker engine {engine}; "
              f"image {hit.tag} ({image.attrs['Size'] / 1e6:.0f} MB); `python bench/bench_docker.py "
              f"--runs {args.runs} --side-by-side {args.side_by_side} --flavor {args.flavor}`.\n\n")
    out.write("| measure | median | ratio to baseline |\n|---|---|---|\n")
    out.write(f"| baseline: bare `docker run -d` (no network), n={args.runs} | {_median_ms(bare)} | 1.0 |\n")
    out.write(f"| start to ready (2 containers, server answering), n={args.runs} | {_median_ms(starts)} | "
              f"{statistics.median(starts) / statistics.median(bare):.1f} |\n")
    out.write(f"| stop (both containers removed), n={args.runs} | {_median_ms(stops)} | "
              f"{statistics.median(stops) / statistics.median(bare):.1f} |\n")
    what = "cache hit" if hit.cached else "rebuild of the changed server layers"
    out.write(f"| `osguard image build` ({what}) | {hit.seconds * 1000:.0f} ms | |\n\n")
    out.write(f"Start to ready: min {min(starts) * 1000:.0f} ms, max {max(starts) * 1000:.0f} ms "
              "(target: <= 3 s).\n\n")
    out.write("| side by side | wall time to start all | memory per environment | per forwarder |\n|---|---|---|---|\n")
    for row in density:
        out.write(f"| {row['count']} | {row['wall']:.1f} s | {row['env_mb']:.0f} MB | {row['fwd_mb']:.1f} MB |\n")
    per_env = max(row["env_mb"] + row["fwd_mb"] for row in density)
    out.write(f"\nAt ~{per_env:.0f} MB each (idle desktop), memory allows ~{int(mem_total * 1000 * 0.8 / per_env)} "
              f"environments in 80% of RAM; each is capped at its mem_limit (2 GB by default).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
