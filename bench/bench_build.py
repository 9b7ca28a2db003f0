"""Benchmark: building variants and checking the suite's references on `local`.

Times, in the same run (medians, so ratios are fair on a noisy machine):

- baseline: ``provider.start()`` + ``env.stop()`` of a bare environment;
- build: ``build_variant`` (start + setup + hazards + baseline probe) + stop, for a shell
  variant, a generator-heavy one and a GUI one; the ratio to the baseline is the
  builder's own overhead;
- check: ``check_variants`` over the whole suite (every reference, the standard row and every alternative) with
  ``--workers 1`` and ``--workers 4``.

Usage: .venv/bin/python bench/bench_build.py [--runs 5] [--check-runs 1] [--write bench/results.md]
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

from _timing import median_time, write_section

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "shell": "wrong_target_or_globalized_update/os-rename-todo-keep-archive.yaml",
    "generators": "sensitive_content_access/os-copy-jpgs-not-private-pictures.yaml",
    "gui": "overbroad_edit_or_permission_change/os-chmod-644-linked-deploy-key.yaml",
}


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

    def bare() -> None:
        provider.start().stop()

    builds = {}
    for label, relative in VARIANTS.items():
        (variant,) = load_suite([REPO / "variants" / relative])
        builds[label] = variant
    # Interleave bare starts and builds so that load drifts hit both alike.
    samples: dict[str, list[float]] = {"bare": [], **{label: [] for label in builds}}
    for _ in range(args.runs):
        for label in samples:
            started = time.perf_counter()
            if label == "bare":
                bare()
            else:
                build_variant(builds[label], provider).stop()
            samples[label].append(time.perf_counter() - started)
    baseline = statistics.median(samples["bare"])
    lines = [f"- bare environment start+stop: **{baseline:.2f} s** (median of {args.runs}, interleaved with the builds)"]
    for label, variant in builds.items():
        seconds = statistics.median(samples[label])
        lines.append(f"- build `{variant.id}` ({label}, {len(variant.setup)} setup + {len(variant.hazards)} "
                     f"hazard steps, baseline probe) + stop: **{seconds:.2f} s** = {seconds / baseline:.2f}x bare")
    suite = load_suite([REPO / "variants"])
    references = sum(4 + len(v.alternatives) for v in suite)  # safe, unsafe, noop, standard + alternatives
    check_times = {}
    skipped: list[int] = []
    for workers in (1, 4):
        def check() -> None:
            rows = check_variants(suite, provider, workers=workers)
            bad = [r for r in rows if not r.passed and r.status != "skip"]
            assert not bad, bad
            skipped.append(sum(1 for r in rows if r.status == "skip"))

        check_times[workers] = median_time(check, args.check_runs)
        lines.append(f"- `osguard check` whole suite ({len(suite)} variants, {references} references and alternatives, "
                     f"{skipped[-1]} skipped for requirements), --workers {workers}: "
                     f"**{check_times[workers]:.1f} s** (median of {args.check_runs})")
    lines.append(f"- parallel speed-up workers 4 vs 1: **{check_times[1] / check_times[4]:.2f}x** "
                 f"on {os.cpu_count()} cores")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = f"Measured {stamp} on {platform.node()} ({os.cpu_count()} cores, {platform.platform()}).\n\n" + "\n".join(lines)
    print(report)
    if args.write:
        write_section(Path(args.write), "## builder (local)", "`.venv/bin/python bench/bench_build.py --write bench/results.md`\n\n" + report)




if __name__ == "__main__":
    main()
