"""Benchmark: one evaluation command on docker (a ``command`` invariant or success check),
from the environment paused to the command's output, the evaluation image made two ways.

- before (the baseline): the container's layer committed, then its sized folders (home,
  /tmp, /var/tmp: volumes, never committed) copied into a second layer through a helper
  container and committed again (``_commit_with_home``, what ``osguard env commit`` does),
  and the command run in a container of that image;
- now (``EngineView``): the layer committed once, the sized folders read as archives at the
  same moment, one evaluation container with fresh volumes filled with those copies; the
  first command of an evaluation pays for all that, each further one (the other command
  invariants of the probe, the success check) is one exec in the same container.

Both run the same command in the same environment, interleaved, after ``--home-files`` files
were written to its home (a LibreOffice profile is a few hundred). Medians over ``--runs``.

Usage: .venv/bin/python bench/bench_eval_commit.py [--runs 5] [--home-files 400] [--write bench/results.md]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _timing import interleaved, machine_line, write_section

COMMAND = "ls -a ~ /tmp >/dev/null && cat ~/bench/d00/f000.txt | wc -c"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--home-files", type=int, default=400)
    parser.add_argument("--write", help="update the '## Evaluation commit (docker)' section of this Markdown file")
    args = parser.parse_args()

    from osguard.providers import get_provider
    from osguard.providers.docker import _commit_with_home
    from osguard.providers.view import _command_argv

    provider = get_provider("docker")
    reason = provider.available()
    if reason:
        raise SystemExit(f"docker: {reason}")
    env = provider.start()
    try:
        folders, per = max(1, args.home_files // 100), min(100, args.home_files)
        env.execute(f"/usr/bin/python3 -c \"import os, random\nr = random.Random(7)\n"
                    f"for d in range({folders}):\n    p = '/home/user/bench/d%02d' % d\n    os.makedirs(p)\n"
                    f"    for f in range({per}):\n        open('%s/f%03d.txt' % (p, f), 'wb')"
                    f".write(r.randbytes(r.randint(512, 6144)))\"", shell=True)
        view = env.trusted_view()
        client, container_id = view.client, view.container_id

        def before() -> str:
            client.api.pause(container_id)
            try:
                image = _commit_with_home(client, client.containers.get(container_id), "osguard-eval",
                                          env.info.id + "-before", env.info.id, pause=False)
            finally:
                client.api.unpause(container_id)
            argv = _command_argv(COMMAND, True)
            runner = client.containers.create(image, entrypoint=argv[:1], command=argv[1:], user="1000:1000",
                                              network_mode="none", labels={"osguard": "1"})
            try:
                runner.start()
                runner.wait(timeout=120)
                return runner.logs(stdout=True, stderr=False).decode()
            finally:
                runner.remove(force=True, v=True)
                client.images.remove(image, force=True)

        def now() -> str:
            try:
                return view.execute(COMMAND, shell=True).output
            finally:
                view._drop_image()  # noqa: SLF001 - each evaluation commits afresh, as a probe does

        def further() -> str:
            return view.execute(COMMAND, shell=True).output

        samples = interleaved({"before": before, "now": now, "further": further}, args.runs, warmup=1,
                              prepare={"further": lambda _: view.execute("true", shell=True)})
    finally:
        env.stop()
    same = len({*samples.results["before"], *samples.results["now"], *samples.results["further"]}) == 1
    body = (f"`.venv/bin/python bench/bench_eval_commit.py --runs {args.runs} --home-files {args.home_files}` — "
            f"{machine_line()}; medians of {args.runs} interleaved rounds after one warm-up\n\n"
            "One evaluation command from the environment paused to its output (the evaluation image made, "
            "the command run in a container of it, both removed; a further command of the same evaluation "
            "reuses both):\n\n"
            "| evaluation image | median (s) | × before |\n|---|---:|---:|\n"
            f"| before: two commits (layer, then home, /tmp, /var/tmp through a helper container) | "
            f"{samples.median('before'):.2f} | 1.00 |\n"
            f"| now, the first command of an evaluation: one commit, the folders' archives copied into fresh "
            f"volumes of one evaluation container | "
            f"{samples.median('now'):.2f} | {samples.ratio('now', 'before'):.2f} |\n"
            f"| now, a further command of the same evaluation (an exec in that container) | "
            f"{samples.median('further'):.2f} | {samples.ratio('further', 'before'):.2f} |\n\n"
            f"Same output on both sides in every round: {'yes' if same else 'NO'}. "
            f"Load average at the end: {os.getloadavg()[0]:.1f}.\n")
    print(body)
    if args.write:
        write_section(Path(args.write), "## Evaluation commit (docker)", body)


if __name__ == "__main__":
    main()
