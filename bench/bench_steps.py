"""Benchmark: applying the suite's file-making steps on `local`, builder path and export path.

For every rootless variant of the suite, its file-making setup and hazard steps (everything
but OSWorld's own step types) are applied into one running local environment, repeatedly:

- baseline: the transport floor -- ``env.write_file`` of every file the steps write (bytes
  rendered beforehand), nothing else;
- builder: ``run_steps`` with a build's context (render on the host, then the applier
  commands through ``env.execute``; consecutive file steps share them);
- export: the exported OSWorld ``execute`` steps (``python3 -c <applier> <ops>``) through
  ``env.execute``, as OSWorld's SetupController runs them.

Medians over ``--runs``, ratios to the baseline measured in the same run (the machine is
noisy). Run against another checkout with ``PYTHONPATH=<checkout>`` to compare versions.

Usage: .venv/bin/python bench/bench_steps.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OSWORLD_TYPES = ("execute", "command", "launch", "open", "sleep", "activate_window", "close_window")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault("OSGUARD_STATE_DIR", tempfile.mkdtemp(prefix="bench-steps-"))

    import base64

    import osguard
    from osguard.builder import StepContext, run_steps
    from osguard.builder.steps import environment_home
    from osguard.providers import get_provider
    from osguard.spec import load_suite
    from osguard.spec.export import config_steps
    from osguard.spec.loader import tasks_dir_for
    from osguard.spec.render import render_step

    variants = [v for v in load_suite([REPO / "variants"]) if not v.requires.root]
    work = []
    for variant in variants:
        setup = [s for s in variant.setup if s.type not in OSWORLD_TYPES]
        hazards = [s for s in variant.hazards if s.type not in OSWORLD_TYPES]
        tasks = tasks_dir_for(variant.source_path)
        writes = [(op["path"], base64.b64decode(op["b64"])) for s in setup + hazards
                  for op in render_step(s, tasks_dir=tasks) or [] if op["op"] == "write"]
        exported = [s["parameters"]["command"] for s in config_steps(setup + hazards, tasks_dir=tasks)]
        work.append((variant, setup, hazards, writes, exported))
    steps_total = sum(len(w[1]) + len(w[2]) for w in work)

    provider = get_provider("local")
    env = provider.start(timeout=120)
    try:
        def baseline() -> None:
            for _, _, _, writes, _ in work:
                for path, data in writes:
                    env.write_file(path, data)

        home = environment_home(env)

        def builder() -> None:
            for variant, setup, hazards, _, _ in work:
                # as build_variant does: one context (home asked once) for both phases
                ctx = StepContext(home=home, tasks_dir=tasks_dir_for(variant.source_path), variant=variant)
                run_steps(env, setup, variant, phase="setup", ctx=ctx)
                run_steps(env, hazards, variant, phase="hazards", ctx=ctx)

        def export() -> None:
            for _, _, _, _, commands in work:
                for command in commands:
                    result = env.execute(command)
                    assert result.returncode == 0, result.error

        samples: dict[str, list[float]] = {"baseline": [], "builder": [], "export": []}
        functions = {"baseline": baseline, "builder": builder, "export": export}
        builder()  # warm-up: generator imports, office libraries, page cache
        for _ in range(args.runs):
            for name, function in functions.items():  # interleaved: load changes hit all alike
                started = time.perf_counter()
                function()
                samples[name].append(time.perf_counter() - started)
    finally:
        env.stop()

    base = statistics.median(samples["baseline"])
    print(f"osguard from {Path(osguard.__file__).parent}")
    print(f"{len(work)} variants, {steps_total} file steps, {sum(len(w[3]) for w in work)} files written, "
          f"{args.runs} runs, load {os.getloadavg()[0]:.1f}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:9s} median {median * 1000:8.1f} ms   x{median / base:5.2f} baseline")


if __name__ == "__main__":
    main()
