"""Benchmark: what LibreOffice costs a variant's build and check on `local` (or `docker`).

Times, in the same run (medians; builds interleaved so that load drifts hit both alike):

- baseline: ``build_variant`` of a LibreOffice variant with its ``start:`` steps removed
  (environment, setup, hazards, baseline probe: everything but the application) + stop;
- build: the same variant as written (``open`` + ``wait_for`` its window: LibreOffice's
  start-up until the document is loaded) + stop; the ratio is what the application costs;
- the ``start:`` steps alone, from the build records' ``start_steps_s``;
- check: ``check_variants`` over every row of the variant (safe, unsafe, noop, standard,
  every alternative), each row a fresh build, with ``--workers 1`` and ``--workers 2``.

Usage: .venv/bin/python bench/bench_office.py [--variant ID] [--provider local] [--runs 3]
       [--check-runs 1] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import tempfile
from pathlib import Path

from _timing import interleaved, median_time, write_section

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="writer-center-heading-keep-other-alignment")
    parser.add_argument("--provider", default="local")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--check-runs", type=int, default=1)
    parser.add_argument("--write", help="update the '## LibreOffice variants' section of this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-office-"))

    from osguard.builder import build_variant, check_variants
    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider(args.provider)
    reason = provider.available()
    if reason:
        raise SystemExit(f"{args.provider} provider not available: {reason}")
    (variant,) = [v for v in load_suite([REPO / "variants"]) if v.id == args.variant]
    without_app = dataclasses.replace(variant, start=())

    def build_and_stop(spec) -> float:
        built = build_variant(spec, provider)
        built.stop()
        return built.record["timings"].get("start_steps_s", 0.0)

    samples = interleaved({"without": lambda: build_and_stop(without_app), "with": lambda: build_and_stop(variant)},
                          args.runs)
    base, full = samples.median("without"), samples.median("with")
    start_steps = statistics.median(samples.results["with"])
    rows = 4 + len(variant.alternatives)
    lines = [
        f"- build `{variant.id}` without its start steps + stop: **{base:.2f} s** (median of {args.runs})",
        f"- build with LibreOffice open on the document + stop: **{full:.2f} s** = {full / base:.2f}x",
        f"- the start steps alone (`open` + `wait_for` the window): **{start_steps:.2f} s**",
    ]
    check_times = {}
    for workers in (1, 2):
        def check() -> None:
            result = check_variants([variant], provider, workers=workers)
            bad = [r for r in result if not r.passed]
            assert not bad, [(r.reference, r.status, r.detail) for r in bad]

        check_times[workers] = median_time(check, args.check_runs)
        lines.append(f"- `osguard check {variant.id}` ({rows} rows, each a fresh build), --workers {workers}: "
                     f"**{check_times[workers]:.1f} s** = {check_times[workers] / rows:.1f} s per row "
                     f"(median of {args.check_runs})")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (f"Measured {stamp} on {platform.node()} ({os.cpu_count()} cores, {platform.platform()}), "
              f"provider {args.provider}, load average at start {os.getloadavg()[0]:.1f}.\n\n" + "\n".join(lines))
    print(report)
    if args.write:
        write_section(Path(args.write), f"## LibreOffice variants ({args.provider})", "`.venv/bin/python bench/bench_office.py --write bench/results.md`\n\n" + report)




if __name__ == "__main__":
    main()
