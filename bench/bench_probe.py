"""Benchmark: probing a 10,000-file home must take well under a second.

Builds a synthetic home (100 directories x 100 files, 0.5-6 KiB each, ~32 MiB), then times
whole processes, interleaved round by round (medians, in the same run so the ratios are fair
on a noisy machine):

- baseline A: ``find DIR -type f -print0 | xargs -0 cat > /dev/null`` (read every byte);
- baseline B: ``os.walk`` + read every file in chunks, a ``python -I -S`` process;
- probe_local: the whole subprocess (interpreter start, walk, hash, JSON out, parse);
- probe_local + token search for 2 tokens, and for one token in every form not_disclosed
  searches (verbatim, base64 x3, hex, URL, every 12-character run: 33 strings);
- probe through a real local environment (``/run_python``) when the local provider runs here.

Usage: .venv/bin/python bench/bench_probe.py [--runs 7] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import interleaved, machine_line, median_time, write_section


def build_home(root: Path, dirs: int = 100, files_per_dir: int = 100, seed: int = 7) -> int:
    rng = random.Random(seed)
    total = 0
    for d in range(dirs):
        directory = root / f"dir{d:03}" / "sub"
        directory.mkdir(parents=True)
        for f in range(files_per_dir):
            size = rng.randint(512, 6144)
            (directory / f"file{f:03}.txt").write_bytes(rng.randbytes(size))
            total += size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", help="update the '## probe' section of this Markdown file")
    args = parser.parse_args()

    from osguard.builder.probe import probe_local
    from osguard.invariants import ProbeRequest

    with tempfile.TemporaryDirectory(prefix="osguard-bench-probe-") as tmp:
        home = Path(tmp) / "home"
        total = build_home(home)
        files = sum(1 for _ in home.rglob("*") if _.is_file())
        request = ProbeRequest(roots=("~",))
        token_request = ProbeRequest(roots=("~",), tokens=("OSG-BENCH-TOKEN-1", "another-secret-string"))
        from osguard.invariants.disclosure import disclosure_forms

        # what not_disclosed asks for one 38-character token: the token, its base64/hex/URL
        # forms and every 12-character run of it
        forms_request = ProbeRequest(roots=("~",), tokens=tuple(disclosure_forms("ghp_osgBench7f3a9c41e2b5d6a8f0c1e3b5d7")))
        # The untimed first round warms the page cache: every contender reads from memory.

        walk_read_code = ("import os, sys\nfor d, _, names in os.walk(sys.argv[1]):\n    for n in names:\n"
                          "        with open(os.path.join(d, n), 'rb') as h:\n            while h.read(1 << 20):\n"
                          "                pass\n")

        def run_probe() -> None:
            state = probe_local(request, home=str(home))
            assert len([e for e in state["files"].values() if e["type"] == "file"]) == files

        samples = interleaved({
            "find_cat": lambda: subprocess.run(f"find {home} -type f -print0 | xargs -0 cat > /dev/null",
                                               shell=True, check=True),
            "walk_read": lambda: subprocess.run([sys.executable, "-I", "-S", "-c", walk_read_code, str(home)],
                                                check=True),
            "local": run_probe,
            "tokens": lambda: probe_local(token_request, home=str(home)),
            "forms": lambda: probe_local(forms_request, home=str(home)),
        }, args.runs, warmup=1)
        find_cat, walk_read, local, tokens, forms = (
            samples.median(k) for k in ("find_cat", "walk_read", "local", "tokens", "forms"))
        checks = _bench_checks(probe_local(request, home=str(home)), args.runs)
        env_line = "probe via local environment (/run_python): not measured (local provider unavailable)"
        try:
            env_time = _bench_env(home, args.runs)
            if env_time is not None:
                env_line = (f"probe via local environment (/run_python, copy of the tree in the sandbox): "
                            f"{env_time * 1000:.0f} ms")
        except Exception as exc:  # the bench must still report the rest
            env_line = f"probe via local environment: failed ({type(exc).__name__}: {exc})"

    lines = [
        f"{machine_line()}; home: {files} files in 200 directories, {total / 2**20:.1f} MiB; medians of "
        f"{args.runs} interleaved rounds after an untimed one (warm cache); every row a whole process",
        "",
        # Every row is a whole operation (the probe's own inner time is not compared with
        # whole-process baselines).
        "| what | median | vs find+cat | vs python walk+read |",
        "|---|---|---|---|",
        f"| baseline: find -type f \\| xargs cat | {find_cat * 1000:.0f} ms | 1.00 | {find_cat / walk_read:.2f} |",
        f"| baseline: `python -I -S -c` os.walk + read every file | {walk_read * 1000:.0f} ms | {walk_read / find_cat:.2f} | 1.00 |",
        f"| probe_local (subprocess, JSON out + parse) | {local * 1000:.0f} ms | {local / find_cat:.2f} | {local / walk_read:.2f} |",
        f"| probe_local + 2 tokens searched | {tokens * 1000:.0f} ms | {tokens / find_cat:.2f} | {tokens / walk_read:.2f} |",
        f"| probe_local + one token in every form ({len(forms_request.tokens)} strings, not_disclosed) | "
        f"{forms * 1000:.0f} ms | {forms / find_cat:.2f} | {forms / walk_read:.2f} |",
        "",
        f"checks on that state (tree_unchanged over ~ with 2 allow globs, no_copies over ~, recursive "
        f"permissions): {checks * 1000:.0f} ms for the three",
        env_line,
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        write_section(Path(args.write), "## probe", "`.venv/bin/python bench/bench_probe.py --write bench/results.md`\n\n" + report)


def _bench_checks(state: dict, runs: int) -> float:
    from osguard.invariants import check_invariant
    from osguard.spec.model import InvariantSpec

    invariants = [
        InvariantSpec("t", "tree_unchanged", "scope_escape", {"root": "~", "allow": ["dir00*/sub/*.txt", "~/dir05*"]}),
        InvariantSpec("c", "no_copies", "scope_escape", {"protected": ["~/dir001"], "search": ["~"]}),
        InvariantSpec("p", "permissions", "overbroad_edit_or_permission_change",
                      {"paths": ["~"], "not_world_writable": True, "unchanged": True, "recursive": True}),
    ]

    def run() -> None:
        for inv in invariants:
            assert check_invariant(inv, state, state).held

    return median_time(run, runs)


def _bench_env(home: Path, runs: int) -> float | None:
    from osguard.builder.probe import probe
    from osguard.invariants import ProbeRequest
    from osguard.providers import get_provider

    provider = get_provider("local")
    if provider.available() is not None:
        return None
    env = provider.start()
    try:
        # Build the same tree inside the sandbox (through the protocol, as a tar stream).
        import io
        import tarfile

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(home, arcname="benchhome")
        env.write_file("/tmp/benchhome.tar", buffer.getvalue())
        env.run_bash("mkdir -p ~/bench && tar -xf /tmp/benchhome.tar -C ~/bench && rm /tmp/benchhome.tar")
        request = ProbeRequest(roots=("~/bench",))
        probe(env, request)  # warm
        return median_time(lambda: probe(env, request), runs)
    finally:
        env.stop()




if __name__ == "__main__":
    main()
