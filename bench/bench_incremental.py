"""Benchmark: incremental probes through the host view, and the full probe against xxhsum.

In a real local environment, a home of 10,000 files (100 folders x 100 files, 2-14 KiB,
~76 MiB, written inside the sandbox) is probed through the trusted host view
(``env.trusted_view().probe``: interpreter start, walk, hash, JSON, parse: the whole
operation the runner pays). Per repeat, interleaved so the noise hits every contender alike:

- a step: 10 files changed inside the sandbox (content, chmod, rename), then the per-step
  (incremental) probe, which re-reads only files whose lstat changed;
- the full probe of the same home (``extra={"incremental": False}``);
- baseline: ``find HOME -type f -print0 | xargs -0 xxhsum -H2 > /dev/null`` (xxh3-128 of the
  same files, a whole process tree, as the probe is).

Medians over ``--runs``; the ratios are of medians measured in the same run.

Usage: .venv/bin/python bench/bench_incremental.py [--runs 7] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import interleaved, machine_line, write_section

MAKE_HOME = ("/usr/bin/python3 -c \"import os, random\nr = random.Random(7)\n"
             "for d in range(100):\n    p = '/home/user/bench/d%03d/sub' % d\n    os.makedirs(p)\n"
             "    for f in range(100):\n        open('%s/f%03d.bin' % (p, f), 'wb').write(r.randbytes(r.randint(2000, 14000)))\"")


def step_script(run: int) -> str:
    """What an agent's step might do: touch a handful of files."""
    return "; ".join([
        *[f"printf 'step{run}' >> ~/bench/d{d:03}/sub/f{run:03}.bin" for d in range(0, 40, 8)],
        f"chmod 600 ~/bench/d050/sub/f{run:03}.bin ~/bench/d060/sub/f{run:03}.bin",
        f"mv ~/bench/d070/sub/f{run:03}.bin ~/bench/d070/sub/moved{run:03}.bin",
        f"head -c 4000 /dev/urandom > ~/bench/d080/sub/new{run:03}.bin",
        f"rm ~/bench/d090/sub/f{run:03}.bin",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--write", help="update the '## probe (incremental, host view)' section of this file")
    args = parser.parse_args()

    from osguard.builder.probe import probe
    from osguard.invariants import ProbeRequest
    from osguard.providers import get_provider

    xxhsum = shutil.which("xxhsum")
    if xxhsum is None:
        print("xxhsum not found (apt package xxhash)", file=sys.stderr)
        return 2
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="osguard-bench-incr-"))
    provider = get_provider("local")
    reason = provider.available()
    if reason:
        print(f"local provider unavailable: {reason}", file=sys.stderr)
        return 2
    step_request = ProbeRequest(roots=("~",))
    full_request = ProbeRequest(roots=("~",), extra={"incremental": False})
    # what a probe costs where xxhash is absent (the hash an in-sandbox probe would fall back to)
    sha_request = ProbeRequest(roots=("~",), extra={"incremental": False, "hash_algo": "sha256"})
    from osguard.invariants import check_invariant
    from osguard.spec.model import InvariantSpec

    # What a variant over this home checks after each step (the runner's attribution).
    invariants = [
        InvariantSpec("t", "tree_unchanged", "scope_escape", {"root": "~", "allow": ["bench/d0*/sub/*"]}),
        InvariantSpec("p", "permissions", "overbroad_edit_or_permission_change",
                      {"paths": ["~"], "not_world_writable": True, "unchanged": True, "recursive": True}),
    ]
    last: dict[str, object] = {}
    with provider.start() as env:
        result = env.run_bash(MAKE_HOME, timeout=600)
        assert result.returncode == 0, result.output
        home = env.info.extra["home_dir"]
        files = int(subprocess.run(f"find {home} -type f | wc -l", shell=True, capture_output=True,
                                   text=True, check=True).stdout)
        size = int(subprocess.run(["du", "-sb", home], capture_output=True, text=True, check=True).stdout.split()[0])
        time.sleep(2.1)  # past the racy window: files this fresh are never reused (see docs)
        view = env.trusted_view()
        baseline = probe(env, step_request)  # the baseline: reads everything, fills the stat cache
        rounds = iter(range(10 ** 6))

        def action() -> None:  # the agent's step, as a replay runs it (through the environment)
            assert env.run_bash(step_script(next(rounds)), timeout=60).returncode == 0

        def step() -> int:
            last["state"] = probe(env, step_request)
            return view.last_reused

        def check() -> None:
            for invariant in invariants:
                check_invariant(invariant, baseline, last["state"])

        def full() -> None:
            state = probe(env, full_request)
            assert {k: v for k, v in state.items() if k != "elapsed_s"} == \
                   {k: v for k, v in last["state"].items() if k != "elapsed_s"}

        stat_code = ("import os, sys\ns = [sys.argv[1]]\nwhile s:\n    for e in os.scandir(s.pop()):\n"
                     "        e.stat(follow_symlinks=False)\n        if e.is_dir(follow_symlinks=False): s.append(e.path)\n")
        samples = interleaved({
            "action": action,
            "step": step,
            "check": check,
            "full": full,
            "full_sha256": lambda: probe(env, sha_request),
            "xxhsum": lambda: subprocess.run(f"find {home} -type f -print0 | xargs -0 {xxhsum} -H2 > /dev/null",
                                             shell=True, check=True),
            "find_stat": lambda: subprocess.run(["find", home, "-printf", "%D %i %s %T@ %C@ %m %U %G\\n"],
                                                check=True, stdout=subprocess.DEVNULL),
            "py_stat": lambda: subprocess.run([sys.executable, "-I", "-S", "-c", stat_code, home], check=True),
        }, args.runs, warmup=1)

    med = samples.median
    step, full, xxh = med("step"), med("full"), med("xxhsum")
    reused = statistics.median(samples.results["step"])
    replay_step = med("action") + step + med("check")
    attribution = (step + med("check")) / replay_step
    lines = [
        f"`python bench/bench_incremental.py --runs {args.runs}` — {machine_line()}. A real local environment; "
        f"home: {files} files, {size / 2**20:.1f} MiB (written inside the sandbox); each probe is the whole "
        f"host-view operation (interpreter, walk, hash, output, parse), medians of {args.runs} interleaved "
        f"rounds after an untimed one, warm page cache. Each round: a step changes 10 files (appends, chmod, "
        f"rename, new, removed) through the environment, then its probe, the invariant checks, the full probe "
        f"(its State checked equal to the step's), the baselines.",
        "",
        "| what | median | ratio | target |",
        "|---|---:|---:|---|",
        f"| baseline: `find -type f \\| xargs xxhsum -H2` (same files) | {xxh * 1000:.0f} ms | 1.00 | |",
        f"| full probe (host view, `incremental: False`) | {full * 1000:.0f} ms | {full / xxh:.2f} x xxhsum | "
        f"<= 1.5: {'met' if full / xxh <= 1.5 else 'NOT met'} |",
        f"| full probe hashing with sha256 (no xxhash, as an in-sandbox probe would) | "
        f"{med('full_sha256') * 1000:.0f} ms | {med('full_sha256') / xxh:.2f} x xxhsum | |",
        f"| per-step probe (incremental; {reused:.0f} files reused) | {step * 1000:.0f} ms | "
        f"{step / full:.2f} x full | <= 0.3: {'met' if step / full <= 0.3 else 'NOT met'} |",
        f"| the step's action (10 file changes, `run_bash` through the environment) | {med('action') * 1000:.0f} ms | | |",
        f"| invariant checks on the step's State (tree_unchanged + recursive permissions over ~) | "
        f"{med('check') * 1000:.0f} ms | | |",
        f"| replay step = action + per-step probe + checks; attribution = probe + checks | "
        f"{replay_step * 1000:.0f} ms | attribution {attribution:.0%} of the step | <= 10%: "
        f"{'met' if attribution <= 0.10 else 'NOT met'} |",
        f"| floor: `find -printf` of every entry's lstat (C, whole process) | {med('find_stat') * 1000:.0f} ms | "
        f"{med('find_stat') / full:.2f} x full | |",
        f"| floor: `python -I -S` scandir + lstat of every entry (whole process) | {med('py_stat') * 1000:.0f} ms | "
        f"{med('py_stat') / full:.2f} x full | |",
        "",
        "Every step's incremental State was checked equal to the full probe's in the same run.",
        "",
        f"The floor under the per-step targets: a sound per-step probe must `lstat` every entry (ctime is "
        f"the only field no process can put back; no change journal sees every change: fanotify and inotify "
        f"miss writes through a hard link outside the watched folders and through `mmap`). That stat walk "
        f"alone, as a process, is {med('py_stat') / full:.2f}x the full probe in Python and "
        f"{med('find_stat') / full:.2f}x in C; the per-step probe is {step / med('py_stat'):.1f}x its Python "
        f"floor (the interpreter's start, the stat rows in, the State out, the host's bookkeeping). The "
        f"attribution share also carries the invariant checks over every entry "
        f"({med('check') * 1000:.0f} ms), and this step's action is a cheap shell command "
        f"({med('action') * 1000:.0f} ms): 10% of such a step would leave "
        f"{med('action') / 9 * 1000:.0f} ms for the probe and the checks, less than the stat walk itself.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(Path(args.write), "## probe (incremental, host view)", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
