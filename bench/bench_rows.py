"""Benchmark: what one row of ``osguard check`` costs, phase by phase, and what a template reset saves.

For each variant given (default: a shell variant and a LibreOffice one), on the chosen
provider, ``--runs`` times (medians), one row (the safe reference) is run by hand with
every phase timed:

- start: the environment (sandbox or container + its server, display, window manager);
- setup+hazards: generators, uploads, file steps (``setup_s`` + ``hazards_s`` of the record);
- start steps: the application opened on the document (``open`` + ``wait_for``);
- baseline: the baseline probe;
- actions: the reference's actions except WAIT; WAIT: its WAIT actions;
- final: postconfig + final probe + augmented evaluation (``finish_episode``);
- stop: the environment ended.

Then, in the same run and measured the same way (whole operations, interleaved):

- fresh row: ``build_variant`` + replay + ``finish_episode`` + stop (what every row cost
  before templates, and what the baseline of the comparison is);
- template row: the same from a template of the built variant (``build_variant(...,
  template=...)``: setup and hazards restored, not re-run);
- reset: start-from-template to ready (start steps done, baseline probed) vs a fresh build
  to the same point.

Usage: .venv/bin/python bench/bench_rows.py [--provider local] [--variant ID ...] [--runs 3]
       [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from _timing import interleaved, median_time, write_section

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VARIANTS = ("os-rename-todo-keep-archive", "writer-center-heading-keep-other-alignment")
PHASES = ("start", "setup+hazards", "start steps", "baseline", "actions", "WAIT", "final", "stop")


def timed_row(variant, provider, template=None) -> dict[str, float]:
    """One safe row, every phase timed; ``template``: restore instead of re-running steps."""
    from osguard.actions import Action
    from osguard.builder.build import build_variant, finish_episode
    from osguard.runner.trajectory import trajectory_view

    phases: dict[str, float] = {}
    started = time.perf_counter()
    built = build_variant(variant, provider, template=template)
    phases["build"] = time.perf_counter() - started
    timings = built.record["timings"]
    phases["start"] = timings["start_s"]
    phases["setup+hazards"] = timings.get("setup_s", 0.0) + timings.get("hazards_s", 0.0)
    phases["start steps"] = timings.get("start_steps_s", 0.0)
    phases["baseline"] = timings["baseline_s"]
    actions = [Action.parse(a) for a in variant.references.safe]
    phases["actions"] = phases["WAIT"] = 0.0
    results = []
    for action in actions:
        mark = time.perf_counter()
        results.extend(built.replay([action]))
        phases["WAIT" if action.render() == "WAIT" else "actions"] += time.perf_counter() - mark
        if action.is_terminal:
            break
    mark = time.perf_counter()
    trajectory = trajectory_view([{"action": a.render(), "output": r.output, "error": r.error}
                                  for a, r in zip(actions, results)])
    _, result = finish_episode(built, trajectory, actions[-1])
    phases["final"] = time.perf_counter() - mark
    phases["env_cpu"] = environment_cpu(built.env)
    mark = time.perf_counter()
    built.stop()
    phases["stop"] = time.perf_counter() - mark
    phases["row"] = time.perf_counter() - started
    assert result.outcome.value == "safe_success", (variant.id, result.outcome, result.violated)
    return phases


def environment_cpu(env) -> float:
    """CPU seconds the environment's processes used so far: on `local` the processes of its
    pids cgroup (their own time and that of the children they reaped; the session keeper,
    PID 1 inside, reaps every orphan), on docker the container's cpuacct counter."""
    extra = env.info.extra
    if env.info.provider == "docker":
        usage = Path("/sys/fs/cgroup/cpuacct/docker") / extra["container_id"] / "cpuacct.usage"
        return int(usage.read_text()) / 1e9 if usage.exists() else float("nan")
    procs = Path(extra.get("cgroups", {}).get("pids", "/nonexistent")) / "cgroup.procs"
    if not procs.exists():
        return float("nan")
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in procs.read_text().split():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / ticks


def to_ready(variant, provider, template=None) -> float:
    """Seconds from nothing to a row's environment ready for the agent (built, baseline
    probed), then stopped (stop not counted)."""
    from osguard.builder.build import build_variant

    started = time.perf_counter()
    built = build_variant(variant, provider, template=template)
    elapsed = time.perf_counter() - started
    built.stop()
    return elapsed


def cpu_row(variant_id: str, provider: str, use_template: bool) -> tuple[float, float]:
    """(wall s, CPU s) of one safe row run in a child process: the CPU time of that child,
    of the processes it waited for (host side: supervisor, evaluation sandboxes, tar) and of
    the environment's own processes (``environment_cpu``), so that other users' load does
    not inflate it as it inflates wall time (docker's engine and forwarder not counted)."""
    import json
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, %r); import bench_rows as b\n"
            "from osguard.spec import load_suite; from osguard.providers import get_provider\n"
            "from osguard.builder.template import make_template\n"
            "v = [x for x in load_suite([b.REPO / 'variants']) if x.id == %r][0]; p = get_provider(%r)\n"
            "t = make_template(v, p) if %r else None\n"
            "import resource, os, time, json\n"
            "r0 = resource.getrusage(resource.RUSAGE_SELF); c0 = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "w = time.perf_counter(); ph = b.timed_row(v, p, t); w = time.perf_counter() - w\n"
            "r1 = resource.getrusage(resource.RUSAGE_SELF); c1 = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "cpu = ph['env_cpu'] + sum(getattr(b1, f) - getattr(b0, f) for b0, b1 in ((r0, r1), (c0, c1)) for f in ('ru_utime', 'ru_stime'))\n"
            "print(json.dumps([w, cpu]))\n") % (str(Path(__file__).parent), variant_id, provider, use_template)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    wall, cpu = json.loads(out.strip().splitlines()[-1])
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--variant", action="append")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--check-workers", type=int, nargs="*", default=[],
                        help="also time `check_variants` over every row at these --workers, fresh vs templates")
    parser.add_argument("--check-runs", type=int, default=1)
    parser.add_argument("--cpu", action="store_true",
                        help="also the CPU seconds of one row, fresh vs from a template (local: the whole sandbox)")
    parser.add_argument("--skip-rows", action="store_true", help="only the check timings")
    parser.add_argument("--write", help="update this provider's '## Check rows' section of this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-rows-"))

    from osguard.builder import check_variants
    from osguard.builder.template import make_template
    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider(args.provider)
    reason = provider.available()
    if reason:
        raise SystemExit(f"{args.provider} provider not available: {reason}")
    suite = {v.id: v for v in load_suite([REPO / "variants"])}
    lines = []
    for variant_id in args.variant or DEFAULT_VARIANTS:
        variant = suite[variant_id]
        mark = time.perf_counter()
        template = make_template(variant, provider)
        made = time.perf_counter() - mark
        if template is None:
            lines.append(f"- `{variant_id}`: no template on {args.provider} (not eligible)")
            continue
        try:
            # interleaved, so that load drifts hit every contender alike
            samples = interleaved({
                "fresh": lambda: timed_row(variant, provider),
                "template": lambda: timed_row(variant, provider, template),
                "ready_fresh": lambda: to_ready(variant, provider),
                "ready_template": lambda: to_ready(variant, provider, template),
            }, 0 if args.skip_rows else args.runs)
        finally:
            template.discard()
        fresh, templated = samples.results["fresh"], samples.results["template"]
        ready_fresh, ready_template = samples.results["ready_fresh"], samples.results["ready_template"]

        if args.cpu:
            cpu = {use: [cpu_row(variant_id, args.provider, use) for _ in range(args.runs)] for use in (False, True)}
            lines.append(f"- `{variant_id}` one safe row in a child process (median of {args.runs}): fresh build "
                         f"**{statistics.median(c for _, c in cpu[False]):.2f} CPU s** "
                         f"({statistics.median(w for w, _ in cpu[False]):.2f} s wall), from template "
                         f"**{statistics.median(c for _, c in cpu[True]):.2f} CPU s** "
                         f"({statistics.median(w for w, _ in cpu[True]):.2f} s wall)")
        rows = 4 + len(variant.alternatives)
        for workers in args.check_workers:
            times = {}
            for use in (False, True):
                def check() -> None:
                    result = check_variants([variant], provider, workers=workers, templates=use)
                    bad = [r for r in result if not r.passed]
                    assert not bad, [(r.reference, r.status, r.detail) for r in bad]

                times[use] = median_time(check, args.check_runs)
            lines.append(f"- `check {variant_id}` ({rows} rows) --workers {workers}: fresh builds "
                         f"**{times[False]:.1f} s** ({times[False] / rows:.2f} s/row), templates "
                         f"**{times[True]:.1f} s** ({times[True] / rows:.2f} s/row) = {times[True] / times[False]:.2f}x "
                         f"(median of {args.check_runs})")
        if args.skip_rows:
            continue

        def med(samples: list[dict[str, float]], key: str) -> float:
            return statistics.median(s[key] for s in samples)

        row_f, row_t = med(fresh, "row"), med(templated, "row")
        rf, rt = statistics.median(ready_fresh), statistics.median(ready_template)
        lines.append(f"- `{variant_id}` (safe row, median of {args.runs}):")
        lines.append("  | phase | fresh build (s) | from template (s) |")
        lines.append("  |---|---|---|")
        for phase in PHASES:
            lines.append(f"  | {phase} | {med(fresh, phase):.2f} | {med(templated, phase):.2f} |")
        lines.append(f"  | **whole row** | **{row_f:.2f}** | **{row_t:.2f}** (= {row_t / row_f:.2f}x) |")
        lines.append(f"  - reset to ready (environment started, steps done, baseline probed): fresh build "
                     f"**{rf:.2f} s**, from template **{rt:.2f} s** (= {rt / rf:.2f}x); making the template "
                     f"once per variant: {made:.2f} s")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (f"Measured {stamp} on {platform.node()} ({os.cpu_count()} cores, {platform.platform()}), "
              f"provider {args.provider}, load average at start {os.getloadavg()[0]:.1f}.\n\n" + "\n".join(lines))
    print(report)
    if args.write:
        write_section(Path(args.write), f"## Check rows ({args.provider})",
                      f"`.venv/bin/python bench/bench_rows.py --provider {args.provider} --write bench/results.md`\n\n"
                      + report)


if __name__ == "__main__":
    main()
