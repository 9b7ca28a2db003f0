"""The whole suite through Ray against the same suite run locally: same outcomes?

Runs every variant the local provider can run (root-only variants are skipped on both sides,
as `osguard run` skips them) with ``replay:safe`` and ``replay:unsafe`` twice: once with the
local executor (2 threads) and once through Ray (a local cluster on loopback: a head without
CPUs and two 1-CPU worker nodes offering the ``gui`` resource, ``osguard.testing.ray_cluster``), in the same session, with
the same settings and provider. Per episode it compares what a user reads in
``results.jsonl``: the outcome, the violated invariants, and the steps taken; any episode
that differs is listed with both records' reasons. Wall time of each side is reported beside
it (a whole-suite ratio, measured once: not a benchmark of Ray's overhead, which
``bench/bench_ray.py`` measures with repeats).

Usage: .venv/bin/python bench/ray_suite.py [--agent replay:safe --agent replay:unsafe]
       [--variants ID ...] [--keep DIR] [--write]
Exit status 1 if any episode differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAD = "## The whole suite through Ray against a local run"


def _records(run_dir: Path) -> dict[str, dict]:
    out = {}
    for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["episode_id"]] = rec
    return out


def _key(rec: dict) -> tuple:
    return rec["outcome"], tuple(sorted(rec.get("violated") or ())), rec.get("steps")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", action="append", help="default: replay:safe and replay:unsafe")
    parser.add_argument("--variants", nargs="*", help="variant ids (default: the whole suite)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the run folders here (default: a temporary folder)")
    parser.add_argument("--write", action="store_true", help=f"rewrite the '{HEAD[3:]}' section of bench/results.md")
    args = parser.parse_args()
    agents = args.agent or ["replay:safe", "replay:unsafe"]

    from osguard.testing.ray_cluster import LocalRayCluster

    root = args.keep or Path(tempfile.mkdtemp(prefix="ray-suite-"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "cluster").mkdir(exist_ok=True)
    cluster = LocalRayCluster(root / "cluster")
    cluster.start_head()
    cluster.add_worker("w1", 1, '{"gui": 1}')
    cluster.add_worker("w2", 1, '{"gui": 1}')
    os.environ.update({k: cluster.env[k] for k in ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH",
                                                   "OSGUARD_STATE_DIR")})
    rows: list[tuple[str, str, tuple, tuple, str, str]] = []
    walls: dict[str, float] = {"local": 0.0, "ray": 0.0}
    counts: dict[str, int] = {}
    outcomes: dict[str, dict[str, int]] = {}
    ran_ids: set[str] = set()
    try:
        from osguard.cli.build_cmds import resolve_variants
        from osguard.runner import run_suite
        from osguard.runner.executor import LocalExecutor, RayExecutor

        variants = resolve_variants(args.variants or None)
        ray_executor = RayExecutor(cluster.address)
        for agent in agents:
            got = {}
            for side, executor in (("local", LocalExecutor(args.workers)), ("ray", ray_executor)):
                out = root / f"{agent.replace(':', '-')}-{side}"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                run_suite(variants, agent, out_dir=out, provider="local", workers=args.workers, progress=False,
                          executor=executor)
                walls[side] += time.perf_counter() - t0
                got[side] = _records(out)
                print(f"{agent} {side}: {len(got[side])} episodes, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            counts[agent] = len(got["local"])
            ran_ids.update(r["variant_id"] for r in got["local"].values())
            for rec in got["local"].values():
                outcomes.setdefault(agent, {}).setdefault(rec["outcome"], 0)
                outcomes[agent][rec["outcome"]] += 1
            for eid in sorted(set(got["local"]) | set(got["ray"])):
                a, b = got["local"].get(eid), got["ray"].get(eid)
                ka = _key(a) if a else ("missing",)
                kb = _key(b) if b else ("missing",)
                if ka != kb:
                    rows.append((agent, eid, ka, kb, (a or {}).get("reason", ""), (b or {}).get("reason", "")))
        ray_executor.close()
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    total = sum(counts.values())
    lines = [
        HEAD,
        "",
        f"`bench/ray_suite.py` ({time.strftime('%Y-%m-%d')}): every variant the local provider runs "
        f"({len(ran_ids)} of {len(variants)}; {len(variants) - len(ran_ids)} skipped on both sides, as `osguard run` "
        "skips what `local` lacks by nature, e.g. root), "
        f"{' and '.join(f'`{a}`' for a in agents)} with `osguard run`'s defaults (observation `both`, step probes), "
        f"once with the local executor ({args.workers} threads) and once through Ray (a head without CPUs and two "
        "1-CPU worker nodes offering `gui` on loopback, `osguard.testing.ray_cluster`), in the same session. "
        "Compared per episode: outcome, violated invariants, steps.",
        "",
        "| agent | episodes | differing | outcomes (local) |",
        "|---|---:|---:|---|",
    ]
    for agent in agents:
        tally = ", ".join(f"{n} `{o}`" for o, n in sorted(outcomes.get(agent, {}).items()))
        lines.append(f"| `{agent}` | {counts.get(agent, 0)} | {sum(1 for r in rows if r[0] == agent)} | {tally} |")
    lines += [
        "",
        f"{total} episodes on each side, {len(rows)} differing. Wall time of the whole runs: local "
        f"{walls['local']:.0f} s, Ray {walls['ray']:.0f} s (ratio {walls['ray'] / max(walls['local'], 1e-9):.2f}; "
        "one measurement each, on a shared 2-core machine). Rerun: `.venv/bin/python bench/ray_suite.py "
        "[--write]` (exit 1 and a list of the differing episodes with both reasons if any differ).",
        "",
    ]
    for agent, eid, ka, kb, ra, rb in rows:
        lines.append(f"- `{agent}` `{eid}`: local {ka} ({ra}); Ray {kb} ({rb})")
    if rows:
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.write:
        sys.path.insert(0, str(ROOT / "bench"))
        from _timing import write_section

        write_section(ROOT / "bench" / "results.md", HEAD, text.split("\n", 2)[2])
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main())
