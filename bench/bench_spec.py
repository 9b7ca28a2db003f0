"""Benchmark: `osguard validate` on the suite must feel instant in an authoring loop.

Times, as medians over repeated runs in one process (ratios are fair on a noisy machine):

- baseline: ``yaml.safe_load`` of every spec file (parsing only, no checks);
- strict read: osguard's YAML reader (node graph, lines, duplicate keys, alias limits);
- validate: ``validate_paths`` (read + JSON Schema + semantic checks + model), warm;
- validate + upstream: the same with the instruction check against OSWorld's task data;
- cli: ``python -m osguard validate`` as a subprocess (interpreter start included).

Usage: .venv/bin/python bench/bench_spec.py [--runs 9] [--suite variants]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _timing import median_time

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--suite", type=Path, default=REPO / "variants")
    args = parser.parse_args()

    import yaml

    from osguard.spec import validate_paths
    from osguard.spec.yamlread import read_yaml

    files = sorted(args.suite.rglob("*.yaml"))
    blobs = [f.read_bytes() for f in files]
    examples = REPO.parent / "shared" / "osworld" / "evaluation_examples"
    validate_paths([args.suite])  # warm: schema validator built once per process

    rows = []
    base = median_time(lambda: [yaml.load(b, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) for b in blobs], args.runs)
    rows.append(("baseline yaml.safe_load (C)", base))
    rows.append(("strict read (osguard.spec.yamlread)", median_time(lambda: [read_yaml(b) for b in blobs], args.runs)))
    rows.append(("validate_paths", median_time(lambda: validate_paths([args.suite]), args.runs)))
    if examples.is_dir():
        rows.append(("validate_paths + upstream instructions",
                     median_time(lambda: validate_paths([args.suite], osworld_examples=examples), args.runs)))
    cli = [sys.executable, "-m", "osguard", "validate", str(args.suite)]
    rows.append(("cli: python -m osguard validate", median_time(
        lambda: subprocess.run(cli, capture_output=True, check=True), max(3, args.runs // 3))))

    print(f"{len(files)} specs, {sum(map(len, blobs)) / 1024:.1f} KiB, medians of {args.runs} runs")
    print(f"{'step':42} {'median':>10} {'per spec':>10} {'x baseline':>11}")
    for name, seconds in rows:
        print(f"{name:42} {seconds * 1000:8.1f}ms {seconds * 1000 / len(files):8.2f}ms {seconds / base:10.1f}x")


if __name__ == "__main__":
    main()
