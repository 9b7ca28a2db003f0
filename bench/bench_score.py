"""Scoring throughput against the loopback OpenAI-compatible server.

The server (osguard.testing.OpenAIServer, in its own process so it does not share our GIL)
answers every chat request after a fixed delay D. With concurrency c, N items cannot be
scored faster than the concurrency-limited ideal ceil(N / c) * D. We measure
``osguard.scout.scoring.predict`` with the ``scout:llm`` verifier (prompt building with a
screenshot and an accessibility tree, the openai client, strict JSON parsing), report the
median over repeats and the ratio ideal / measured (target: >= 0.95), and, as a baseline
measured in the same run, bare ``openai`` client calls with the same concurrency.

Usage:
    .venv/bin/python bench/bench_score.py [--items 64] [--delay 0.2] [--repeats 5]
        [--concurrency 1 4 16 32] [--write]   # --write updates bench/results.md "## scoring"
"""

from __future__ import annotations

import argparse
import io
import math
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _timing import interleaved, machine_line, write_section

ROOT = Path(__file__).resolve().parents[1]
SERVER = """
import sys, time
from osguard.testing import OpenAIServer
server = OpenAIServer(default='{"label": "allowed", "feedback": ""}', delay_s=float(sys.argv[1])).start()
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
server.stop()
"""


def _items(directory: Path, count: int):
    from PIL import Image

    from osguard.actions import Action
    from osguard.scout.items import Item, write_items

    (directory / "images").mkdir(parents=True)
    buffer = io.BytesIO()
    Image.new("RGB", (320, 200), (30, 60, 90)).save(buffer, format="PNG")
    (directory / "images" / "shot.png").write_bytes(buffer.getvalue())
    tree = "<desktop-frame>" + "".join(f"<push-button name='b{i}'/>" for i in range(200)) + "</desktop-frame>"
    items = [Item(id=f"itm-{n:05d}", instruction="Rename the folder on the Desktop",
                  action=Action("shell", f"mv ~/Desktop/a{n} ~/Desktop/b{n}"), source="standard",
                  candidate_index=1, screenshot="images/shot.png", accessibility_tree=tree,
                  label="allowed", label_origin="source") for n in range(count)]
    write_items(directory, items)
    return items


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--write", action="store_true", help="update bench/results.md '## scoring'")
    args = parser.parse_args()

    import openai

    from osguard.scout import get_verifier
    from osguard.scout.scoring import predict

    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.delay)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            items = _items(Path(tmp), args.items)
            rows = []
            for concurrency in args.concurrency:
                ideal = math.ceil(args.items / concurrency) * args.delay
                verifier = get_verifier("scout:llm:bench", base_url=base_url, max_retries=0)
                client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)

                def bare(_n: int) -> None:
                    client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "x"}])

                def scored() -> float:
                    """The CPU seconds this process used (every thread): the client's work."""
                    cpu = time.process_time()
                    predictions = predict(items, tmp, verifier, concurrency=concurrency)
                    assert all(p.label == "allowed" for p in predictions)
                    return time.process_time() - cpu

                def baseline() -> None:
                    with ThreadPoolExecutor(concurrency) as pool:
                        list(pool.map(bare, range(args.items)))

                predict(items[:concurrency], tmp, verifier, concurrency=concurrency)  # warm connections
                samples = interleaved({"scored": scored, "baseline": baseline}, args.repeats)
                median_scored, median_base = samples.median("scored"), samples.median("baseline")
                cpu_item = statistics.median(samples.results["scored"]) / args.items
                rows.append({"concurrency": concurrency, "ideal_s": ideal, "scored_s": median_scored,
                             "baseline_s": median_base, "ratio_ideal": ideal / median_scored,
                             "ratio_baseline": median_base / median_scored,
                             "items_per_s": args.items / median_scored, "cpu_item_s": cpu_item,
                             "bound_s": ideal + (math.ceil(args.items / concurrency) + concurrency - 1) * cpu_item})
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=10)

    lines = [
        f"`bench/bench_score.py --items {args.items} --delay {args.delay} --repeats {args.repeats}` — "
        f"{machine_line()}. scout:llm against the loopback OpenAI-compatible server (own process, "
        f"fixed {args.delay:.2f} s from each request's arrival to its reply; screenshot + 200-node tree per "
        f"item). Medians over {args.repeats} interleaved repeats. Ideal = ceil(N / c) x delay. Baseline = bare "
        f"openai client calls, same c. CPU/item: this process's CPU time (all threads) per item scored. "
        f"CPU bound = ideal + (ceil(N / c) + c - 1) x CPU/item: a thread's own requests follow one "
        f"another (ceil(N / c) x CPU/item), and the c requests of a wave leave, and their c replies "
        f"arrive, at the same moment, handled one thread at a time (one interpreter lock): c - 1 "
        f"more on the critical path. ideal / CPU bound is the best ratio this client can reach here.",
        "",
        "| concurrency | ideal (s) | scoring median (s) | items/s | ideal / measured | baseline median (s) | "
        "baseline / scoring | CPU/item (ms) | ideal / CPU bound |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['concurrency']} | {row['ideal_s']:.2f} | {row['scored_s']:.3f} | "
                     f"{row['items_per_s']:.1f} | {row['ratio_ideal']:.3f} | {row['baseline_s']:.3f} | "
                     f"{row['ratio_baseline']:.3f} | {row['cpu_item_s'] * 1000:.2f} | "
                     f"{row['ideal_s'] / row['bound_s']:.3f} |")
    worst = min(r["ratio_ideal"] for r in rows)
    lines += ["", f"Worst ideal/measured ratio: {worst:.3f} (target >= 0.95: {'met' if worst >= 0.95 else 'NOT met'})."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(ROOT / "bench" / "results.md", "## scoring", text)
    return 0 if worst >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
