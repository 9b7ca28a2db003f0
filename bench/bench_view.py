"""Benchmark: where the judge reads state from (docs/invariants.md, "where each probe is taken").

In one real environment per provider, a home of 2,000 files (20 folders x 100 files,
0.5-6 KiB) is probed with the same request three ways, medians over ``--runs`` (the inside
probe is the baseline every ratio is against, measured in the same run):

- local: the host view (``osguard.providers.view.HostView``: the probe script on the host
  over the sandbox's folders) vs the old inside probe (``/run_python`` in the sandbox);
- docker: the engine view (archive API, tar parsed on the host) vs a host walk of the
  container's merged overlay folder (the probe script over ``GraphDriver.MergedDir``, root
  only, local engines only) vs the inside probe.

Usage: .venv/bin/python bench/bench_view.py [--runs 5] [--provider local|docker|both]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from _timing import median_time

SETUP = ("/usr/bin/python3 -c \"import os, random\nr = random.Random(7)\n"
         "for d in range(20):\n    p = '/home/user/bench/d%02d' % d\n    os.makedirs(p)\n"
         "    for f in range(100):\n        open('%s/f%03d.txt' % (p, f), 'wb').write(r.randbytes(r.randint(512, 6144)))\"")


def bench(provider_name: str, runs: int) -> list[str]:
    from osguard.builder.probe import probe, probe_inside
    from osguard.invariants import ProbeRequest
    from osguard.providers import get_provider

    provider = get_provider(provider_name)
    reason = provider.available()
    if reason:
        return [f"- {provider_name}: skipped ({reason})"]
    request = ProbeRequest(roots=("~/bench",))
    lines = []
    with provider.start() as env:
        assert env.run_bash(SETUP, timeout=300).returncode == 0
        inside = median_time(lambda: probe_inside(env, request), runs)
        view = median_time(lambda: probe(env, request), runs)
        name = "host view" if provider_name == "local" else "engine view (archive API)"
        lines.append(f"- {provider_name}: inside probe (/run_python) **{inside * 1000:.0f} ms**; "
                     f"{name} **{view * 1000:.0f} ms** = {view / inside:.2f}x")
        if provider_name == "docker":
            merged = _merged_dir(env)
            if merged:
                from osguard.providers.view import _xxhash_path, probe_code_json

                data = {"roots": ["/home/user/bench"], "configs": [], "tokens": [], "commands": [],
                        "processes": False, "clipboard": False,
                        "extra": {"view": {"map": {"/": merged}, "home": "/home/user"}}}
                code = (_xxhash_path() + probe_code_json(data)).encode()
                walk = median_time(lambda: subprocess.run([sys.executable, "-I", "-S", "-"], input=code, check=True,
                                                          stdout=subprocess.PIPE), runs)
                lines.append(f"- docker: host walk of the merged overlay folder **{walk * 1000:.0f} ms** "
                             f"= {walk / inside:.2f}x")
    return lines


def _merged_dir(env) -> str | None:
    try:
        out = subprocess.run(["docker", "inspect", env.info.extra["container_id"]], capture_output=True,
                             check=True).stdout
        return json.loads(out)[0]["GraphDriver"]["Data"]["MergedDir"]
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--provider", default="both", choices=["local", "docker", "both"])
    args = parser.parse_args()
    names = ["local", "docker"] if args.provider == "both" else [args.provider]
    for name in names:
        for line in bench(name, args.runs):
            print(line)


if __name__ == "__main__":
    main()
