"""Benchmark of local environments (not a test): start latency, observation cost, memory, density.

    .venv/bin/python bench/bench_env.py                      # print the table
    .venv/bin/python bench/bench_env.py --write bench/results.md

Measures, in one run on this machine:
- start-to-ready latency of ``LocalProvider().start()`` (median of 10; target <= 1 s);
- observation latency, screenshot + accessibility tree through the client, against a raw
  screenshot with a standard tool (``xwd -root``) on the same display, timed inside the
  environment (median of 10; target ratio <= 1.5), with a GTK window and three xterms
  on screen so neither the image nor the tree is trivial;
- memory of one idle environment (its cgroup's usage, and the sum of its processes' RSS);
- how many environments run side by side: started one after another until --max-envs
  or the first failure, each checked to answer.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from osguard.providers import get_provider  # noqa: E402

GTK_WINDOW = b'''
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
window = Gtk.Window(title="bench")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
for index in range(20):
    box.add(Gtk.Button(label=f"Button {index}"))
window.add(box)
window.show_all()
Gtk.main()
'''

RAW_SCREENSHOT = '''
import statistics, subprocess, time
times = []
for _ in range({n}):
    start = time.perf_counter()
    subprocess.run(["xwd", "-root", "-silent", "-out", "/tmp/raw.xwd"], check=True)
    times.append(time.perf_counter() - start)
print(statistics.median(times))
'''


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_start(runs: int) -> list[float]:
    provider = get_provider("local")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        env = provider.start(timeout=60)
        times.append(time.perf_counter() - started)
        env.stop()
    return times


def _memory(env) -> tuple[float, float]:
    """(cgroup memory usage MiB, sum of RSS MiB) of one environment."""
    cgroups = env.info.extra.get("cgroups", {})
    usage = rss = float("nan")
    if "memory" in cgroups:
        usage = int(Path(cgroups["memory"], "memory.usage_in_bytes").read_text()) / 2**20
    members = cgroups.get("pids") or cgroups.get("memory")
    if members:
        total = 0
        for pid in Path(members, "cgroup.procs").read_text().split():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        rss = total / 1024
    return usage, rss


def bench_observation(runs: int) -> dict[str, float]:
    env = get_provider("local").start(timeout=60)
    try:
        if not env.capabilities.gui:
            return {}
        env.write_file("~/bench_window.py", GTK_WINDOW)
        env.launch(["python3", "~/bench_window.py"])
        for index in range(3):
            env.launch(["xterm", "-geometry", f"100x40+{200 + 300 * index}+100", "-e",
                        "bash -c 'ls -la /usr/bin | head -100; sleep 1000'"])
        time.sleep(3)
        env.screenshot(), env.accessibility_tree()  # warm connections and caches
        shots, trees, observations = [], [], []
        for _ in range(runs):
            started = time.perf_counter()
            env.screenshot()
            shots.append(time.perf_counter() - started)
            started = time.perf_counter()
            tree = env.accessibility_tree()
            trees.append(time.perf_counter() - started)
            started = time.perf_counter()
            env.screenshot(), env.accessibility_tree()
            observations.append(time.perf_counter() - started)
        raw = float(env.run_python(RAW_SCREENSHOT.format(n=runs), timeout=120).output)
        idle_usage, idle_rss = _memory(env)
        return {"screenshot_ms": _median_ms(shots), "tree_ms": _median_ms(trees),
                "observation_ms": _median_ms(observations), "raw_ms": raw * 1000,
                "tree_chars": len(tree or ""), "busy_usage_mib": idle_usage, "busy_rss_mib": idle_rss}
    finally:
        env.stop()


def bench_density(max_envs: int) -> dict[str, float]:
    provider = get_provider("local")
    envs = []
    failure = ""
    try:
        for _ in range(max_envs):
            try:
                env = provider.start(timeout=60)
            except Exception as exc:  # the point is to find where it stops
                failure = f"{type(exc).__name__}: {exc}"[:200]
                break
            envs.append(env)
        answering = sum(1 for env in envs if env.run_bash("echo ok", timeout=30).output == "ok\n")
        usages = [_memory(env) for env in envs]
        return {"started": len(envs), "answering": answering,
                "usage_mib": statistics.median(u for u, _ in usages) if usages else float("nan"),
                "rss_mib": statistics.median(r for _, r in usages) if usages else float("nan"),
                "failure": failure}
    finally:
        for env in envs:
            env.stop()


def render(start: list[float], observation: dict[str, float], density: dict[str, float], runs: int,
           load_before: float) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        "## environments (local)",
        "",
        f"`.venv/bin/python bench/bench_env.py --max-envs {density.get('cap')} --write bench/results.md`",
        "",
        f"{now}; {os.cpu_count()} cores ({cpu}), {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB; "
        f"Python {platform.python_version()}; medians of {runs} runs; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (other work on the machine shows here)",
        "",
        "| what | median | target |",
        "|---|---|---|",
        f"| start to ready (`LocalProvider().start()`, display + AT-SPI + server) | {_median_ms(start):.0f} ms "
        f"(min {min(start) * 1000:.0f}, max {max(start) * 1000:.0f}) | <= 1000 ms |",
    ]
    if observation:
        ratio = observation["observation_ms"] / observation["raw_ms"]
        lines += [
            f"| baseline: raw screenshot, `xwd -root` on the same display (inside) | {observation['raw_ms']:.0f} ms | 1.00 |",
            f"| screenshot (`/screenshot`, PNG, through the client) | {observation['screenshot_ms']:.0f} ms | "
            f"{observation['screenshot_ms'] / observation['raw_ms']:.2f} x raw |",
            f"| accessibility tree ({observation['tree_chars']} chars) | {observation['tree_ms']:.0f} ms | |",
            f"| observation = screenshot + tree | {observation['observation_ms']:.0f} ms | "
            f"**{ratio:.2f} x raw** (target <= 1.5) |",
            f"| memory of one environment with a GTK window and 3 xterms | {observation['busy_usage_mib']:.0f} MiB cgroup, "
            f"{observation['busy_rss_mib']:.0f} MiB RSS | |",
        ]
    lines += [
        f"| environments side by side (idle, started one after another, cap {density.get('cap')}) | "
        f"{density['started']} started, {density['answering']} answering | |",
        f"| memory per idle environment (median over those) | {density['usage_mib']:.0f} MiB cgroup, "
        f"{density['rss_mib']:.0f} MiB RSS | |",
    ]
    if density.get("failure"):
        lines.append(f"\nfirst failure: {density['failure']}")
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace (or append) this benchmark's section of the shared results file."""
    heading = "## environments (local)"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if heading in text:
        start = text.index(heading)
        rest = text[start + len(heading):]
        end = rest.find("\n## ")
        text = text[:start] + section + (rest[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-envs", type=int, default=20)
    parser.add_argument("--write", type=Path, help="update this results file (e.g. bench/results.md)")
    args = parser.parse_args()
    reason = get_provider("local").available()
    if reason:
        print(f"local provider not available: {reason}", file=sys.stderr)
        return 1
    load_before = os.getloadavg()[0]
    start = bench_start(args.runs)
    observation = bench_observation(args.runs)
    density = bench_density(args.max_envs)
    density["cap"] = args.max_envs
    section = render(start, observation, density, args.runs, load_before)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
