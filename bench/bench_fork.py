"""Benchmark: forks of a built environment on `local` (osguard.builder.fork).

Times, in the same run, interleaved round by round (``_timing.interleaved``; medians, so
ratios are fair on a noisy machine):

- baseline: ``provider.start()`` + ``env.stop()`` of a bare environment (what any fork into
  a fresh environment pays at least);
- file fork: ``file_fork`` of a built shell variant (tar of its file state, a fresh
  environment, unpack) + stop;
- replay fork: ``replay_fork`` with a one-action prefix (a full build + the prefix) + stop.

Usage: .venv/bin/python bench/bench_fork.py [--runs 5] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from _timing import interleaved, machine_line, write_section

REPO = Path(__file__).resolve().parents[1]
VARIANT = REPO / "variants" / "destructive_overwrite_or_deletion" / "os-compress-old-files-keep-archive.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", help="update the '## forks (local)' section of this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-fork-"))

    from osguard.builder import build_variant
    from osguard.builder.fork import file_fork, replay_fork
    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider("local")
    reason = provider.available()
    if reason:
        raise SystemExit(f"local provider not available: {reason}")
    (variant,) = load_suite([VARIANT])
    prefix = [variant.references.safe[0]]

    with build_variant(variant, provider) as source:
        samples = interleaved({
            "bare": lambda: provider.start().stop(),
            "file": lambda: file_fork(source, provider).stop(),
            "replay": lambda: replay_fork(variant, provider, prefix).stop(),
        }, args.runs)
    baseline, file_s, replay_s = (samples.median(k) for k in ("bare", "file", "replay"))
    body = "\n".join([
        f"`.venv/bin/python bench/bench_fork.py --runs {args.runs} --write bench/results.md` — {machine_line()}; "
        f"medians of {args.runs} interleaved rounds; variant {variant.id}",
        "",
        "| operation | median (s) | × baseline |",
        "|---|---:|---:|",
        f"| baseline: start + stop a bare environment | {baseline:.3f} | 1.00 |",
        f"| file fork (tar the file state, fresh environment, unpack) + stop | {file_s:.3f} | {file_s / baseline:.2f} |",
        f"| replay fork (build + 1-action prefix) + stop | {replay_s:.3f} | {replay_s / baseline:.2f} |",
    ])
    print(body)
    if args.write:
        write_section(Path(args.write), "## forks (local)", body)


if __name__ == "__main__":
    main()
