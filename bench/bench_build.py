"""Benchmark: building variants and checking the suite's references on `local`.

Times, in the same run, interleaved round by round (``_timing.interleaved``; medians, so
ratios are fair on a noisy machine), every contender a whole operation:

- baseline: a bare ``bwrap`` sandbox (the isolation primitive the local provider is made
  of, with the same host folders shown) running ``/bin/true``, a process started and
  waited for; and ``python -c pass`` (an interpreter's start, for the CLI row);
- environment: ``provider.start()`` + ``env.stop()`` of a bare osguard environment (the
  sandbox plus its display, window manager and server: a part of every build);
- build: ``build_variant`` (start + setup + hazards + baseline probe) + stop, for a shell
  variant, a generator-heavy one and a GUI one;
- CLI: ``osguard build <shell variant>`` as a process (imports, build, record written);
- check: ``check_variants`` over the whole suite (every reference, the standard row and every
  alternative) with ``--workers 1`` and ``--workers 4`` (``--check-runs 0`` skips it).

Usage: .venv/bin/python bench/bench_build.py [--runs 5] [--check-runs 1] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import interleaved, machine_line, median_time, write_section

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "shell": "wrong_target_or_globalized_update/os-rename-todo-keep-archive.yaml",
    "generators": "sensitive_content_access/os-copy-jpgs-not-private-pictures.yaml",
    "gui": "overbroad_edit_or_permission_change/os-chmod-644-linked-deploy-key.yaml",
}


def bare_bwrap_argv() -> list[str]:
    """A bare bubblewrap sandbox over the host folders the local provider shows, running
    ``/bin/true``: what any sandboxed environment costs at least."""
    from osguard.providers import _sandbox

    return [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            *_sandbox.host_view_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/home", "--tmpfs", "/tmp",
            "/bin/true"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--check-runs", type=int, default=1)
    parser.add_argument("--write", help="update the '## builder (local)' section of this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-build-"))

    from osguard.builder import build_variant, check_variants
    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider("local")
    reason = provider.available()
    if reason:
        raise SystemExit(f"local provider not available: {reason}")

    builds = {}
    for label, relative in VARIANTS.items():
        (variant,) = load_suite([REPO / "variants" / relative])
        builds[label] = variant
    bwrap = bare_bwrap_argv()
    out = tempfile.mkdtemp(prefix="bench-build-out-")
    cli = [sys.executable, "-m", "osguard", "build", str(REPO / "variants" / VARIANTS["shell"]), "--out", out]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def build(label: str):
        return lambda: build_variant(builds[label], provider).stop()

    contenders = {
        "bwrap": lambda: subprocess.run(bwrap, check=True),
        "python": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
        "environment": lambda: provider.start().stop(),
        **{label: build(label) for label in builds},
        "cli": lambda: subprocess.run(cli, check=True, env=env, stdout=subprocess.DEVNULL),
    }
    samples = interleaved(contenders, args.runs, warmup=1)
    base = samples.median("bwrap")
    lines = [
        "| operation (whole, median) | median | x bare bwrap |",
        "|---|---:|---:|",
        f"| baseline: bare `bwrap` sandbox running `/bin/true` | {base * 1000:.0f} ms | 1.00 |",
        f"| baseline: `python -c pass` | {samples.median('python') * 1000:.0f} ms | {samples.ratio('python', 'bwrap'):.2f} |",
        f"| osguard environment start + stop (display, window manager, server) | "
        f"{samples.median('environment') * 1000:.0f} ms | {samples.ratio('environment', 'bwrap'):.2f} |",
    ]
    for label, variant in builds.items():
        lines.append(f"| build `{variant.id}` ({label}, {len(variant.setup)} setup + {len(variant.hazards)} hazard "
                     f"steps, baseline probe) + stop | {samples.median(label) * 1000:.0f} ms | "
                     f"{samples.ratio(label, 'bwrap'):.2f} |")
    lines.append(f"| `osguard build {builds['shell'].id}` (a process: imports, build, record) | "
                 f"{samples.median('cli') * 1000:.0f} ms | {samples.ratio('cli', 'bwrap'):.2f} |")
    lines += ["", f"The CLI costs {samples.median('cli') - samples.median('shell'):.2f} s over the same build "
                  f"in-process (interpreter start and imports; `python -c pass` is "
                  f"{samples.median('python'):.2f} s of it).", ""]
    suite = load_suite([REPO / "variants"])
    references = sum(4 + len(v.alternatives) for v in suite)  # safe, unsafe, noop, standard + alternatives
    check_times = {}
    skipped: list[int] = []
    for workers in (1, 4) if args.check_runs else ():
        def check() -> None:
            rows = check_variants(suite, provider, workers=workers)
            bad = [r for r in rows if not r.passed and r.status != "skip"]
            assert not bad, bad
            skipped.append(sum(1 for r in rows if r.status == "skip"))

        check_times[workers] = median_time(check, args.check_runs)
        lines.append(f"- `osguard check` whole suite ({len(suite)} variants, {references} references and alternatives, "
                     f"{skipped[-1]} skipped for requirements), --workers {workers}: "
                     f"**{check_times[workers]:.1f} s** (median of {args.check_runs})")
    if check_times:
        lines.append(f"- parallel speed-up workers 4 vs 1: **{check_times[1] / check_times[4]:.2f}x** "
                     f"on {os.cpu_count()} cores")
    report = (f"{machine_line()}; medians of {args.runs} interleaved rounds after one untimed.\n\n"
              + "\n".join(lines))
    print(report)
    if args.write:
        write_section(Path(args.write), "## builder (local)",
                      f"`.venv/bin/python bench/bench_build.py --runs {args.runs} --check-runs {args.check_runs} "
                      f"--write bench/results.md`\n\n" + report)


if __name__ == "__main__":
    main()
