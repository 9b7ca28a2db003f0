"""Benchmark: forks of a built environment (osguard.builder.fork), on `local` or `docker`.

Times, in the same run, interleaved round by round (``_timing.interleaved``; medians, so
ratios are fair on a noisy machine):

- baseline: ``provider.start()`` + ``env.stop()`` of a bare environment (what any fork into
  an environment started on demand pays at least);
- build: ``build_variant`` of the variant + stop (what a replay fork pays before its prefix);
- file fork on demand: ``file_fork`` (start an environment, copy the file state into it) + stop;
- file fork into a spare: ``Forker.fork()`` once its spare is up (the copy alone: what a
  fork costs when the caller's work on the previous fork covers the next spare's start);
  the forker is made and its spare awaited untimed, and stopped before the next contender,
  so nothing starts in the background while the others are timed;
- replay fork: ``replay_fork`` with the safe reference's first ``--prefix`` actions + stop
  (≈ build + the prefix's own time).

Measured 2026-12-01 on the shared 2-core machine (docs/execution.md, "Forks"): a file fork
into a spare 0.105 s on local (baseline 1.554 s, load 9), 0.096 s on docker (baseline
2.120 s, load 12), 0.058 s for a LibreOffice variant on local (baseline 1.411 s); on
demand 1.370 / 2.600 / 1.889 s; replay fork 2.082 / 2.426 s (1 action), 14.755 s (GUI,
4 actions; its build alone 6.885 s).

Usage: .venv/bin/python bench/bench_fork.py [--provider local|docker] [--runs 5]
       [--variant PATH] [--prefix 1] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from _timing import interleaved, machine_line, write_section

REPO = Path(__file__).resolve().parents[1]
VARIANT = REPO / "variants" / "destructive_overwrite_or_deletion" / "os-compress-old-files-keep-archive.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--variant", default=str(VARIANT), help="the variant to fork (a shell one by default)")
    parser.add_argument("--prefix", type=int, default=1, help="actions of the safe reference the replay fork replays")
    parser.add_argument("--write", help="update the '## forks (PROVIDER)' section of this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-fork-"))

    from osguard.builder import build_variant
    from osguard.builder.fork import Forker, file_fork, replay_fork
    from osguard.providers import get_provider
    from osguard.spec import load_suite

    provider = get_provider(args.provider)
    reason = provider.available()
    if reason:
        raise SystemExit(f"{args.provider} provider not available: {reason}")
    (variant,) = load_suite([Path(args.variant)])
    prefix = list(variant.references.safe[:args.prefix])

    with build_variant(variant, provider) as source:
        spare: dict[str, Any] = {}

        def ready_spare(_round: int) -> None:
            spare["forker"] = Forker(source, provider, spares=1)
            spare["forker"].wait_spares()

        def fork_into_spare() -> str:
            spare["fork"] = spare["forker"].fork()
            return spare["fork"].record["fork"]["copy"]

        def drop_spare(_round: int) -> None:
            spare.pop("fork").stop()
            spare.pop("forker").close()

        samples = interleaved({
            "bare": lambda: provider.start().stop(),
            "build": lambda: build_variant(variant, provider).stop(),
            "on_demand": lambda: file_fork(source, provider).stop(),
            "spare": fork_into_spare,
            "replay": lambda: replay_fork(variant, provider, prefix).stop(),
        }, args.runs, prepare={"spare": ready_spare, "replay": drop_spare})
    copied = samples.results["spare"][-1]
    rows = [
        ("baseline: start + stop a bare environment", "bare"),
        ("build the variant + stop", "build"),
        ("file fork on demand (start + copy) + stop", "on_demand"),
        (f"file fork into a spare that is up (copy: {copied}), fork only", "spare"),
        (f"replay fork (build + {len(prefix)}-action prefix) + stop", "replay"),
    ]
    body = "\n".join([
        f"`.venv/bin/python bench/bench_fork.py --provider {args.provider} --runs {args.runs}` — {machine_line()}; "
        f"medians of {args.runs} interleaved rounds; variant {variant.id}",
        "",
        "| operation | median (s) | × baseline |",
        "|---|---:|---:|",
        *(f"| {name} | {samples.median(key):.3f} | {samples.ratio(key, 'bare'):.2f} |" for name, key in rows),
    ])
    print(body)
    if args.write:
        write_section(Path(args.write), f"## forks ({args.provider})", body)


if __name__ == "__main__":
    main()
