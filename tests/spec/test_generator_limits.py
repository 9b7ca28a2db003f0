"""Generators are bounded twice: ``validate`` checks their arguments against the bounds each
generator declares (ARGS), and the build runs them in a child process with limits on CPU
time, memory, output size and wall-clock time."""

from __future__ import annotations

import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from osguard.spec.generators import GeneratorLimits, GeneratorRefused, check_args, run_generator
from osguard.spec.loader import check_variant_file
from osguard.spec.render import StepFailed, render

from .conftest import REPO, VALID

SUITE_STEPS = """\
  - generate: {path: ~/huge.ipynb, generator: "generators.notebooks:ipynb", args: {title: t, cells: 3000000}}
  - generate: {path: ~/huge.jpg, generator: "generators.photos:jpeg", args: {seed: 1, width: 60000, height: 60000}}
  - generate: {path: ~/odd.jpg, generator: "generators.photos:jpeg", args: {seed: 1, colour: red}}
  - generate: {path: ~/none.pdf, generator: "generators.documents:pdf"}
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A suite (variants/ beside tasks/) using the repository's generators."""
    shutil.copytree(REPO / "tasks" / "generators", tmp_path / "tasks" / "generators")
    spec = tmp_path / "variants" / "wrong_target_or_globalized_update" / "minimal-rename.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text((VALID / "minimal-rename.yaml").read_text().replace(
        "  - mkdir: ~/Desktop/todo_list_Jan_1\n", "  - mkdir: ~/Desktop/todo_list_Jan_1\n" + SUITE_STEPS))
    return spec


def test_validate_refuses_unbounded_generator_arguments(suite: Path) -> None:
    """Regression: a notebook of 3,000,000 cells and a 60000x60000 image were valid specs that
    then ran on the host at build time. validate must refuse them without running anything."""
    started = time.monotonic()
    variant, problems = check_variant_file(suite)
    assert time.monotonic() - started < 5  # read from the source, never generated
    assert variant is None
    assert [f"{p.line}: {p.path}: {p.message}" for p in problems] == [
        "12: $.setup[1].generate.args.cells: 3000000 is above the maximum of 1000 "
        "(generators.notebooks:ipynb bounds its arguments: ARGS)",
        "13: $.setup[2].generate.args.height: 60000 is above the maximum of 4096 "
        "(generators.photos:jpeg bounds its arguments: ARGS)",
        "13: $.setup[2].generate.args.width: 60000 is above the maximum of 4096 "
        "(generators.photos:jpeg bounds its arguments: ARGS)",
        "14: $.setup[3].generate.args.colour: unknown generator argument 'colour' "
        "(generators.photos:jpeg takes: seed, label, width, height, quality)",
        "15: $.setup[4].generate.generator: generator 'generators.documents:pdf' needs the argument 'lines'",
    ]


def test_build_refuses_the_same_arguments_with_the_same_message(suite: Path) -> None:
    tasks = suite.parents[2] / "tasks"
    with pytest.raises(StepFailed) as info:
        render("generate", {"path": "~/huge.ipynb", "generator": "generators.notebooks:ipynb",
                            "args": {"title": "t", "cells": 3_000_000}}, tasks_dir=tasks)
    assert str(info.value) == ("args.cells: 3000000 is above the maximum of 1000 "
                               "(generators.notebooks:ipynb bounds its arguments: ARGS)")


def test_a_generator_without_declared_bounds_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "free.py").write_text("def blob(size):\n    return b'x' * size\n")
    assert [str(p) for p in check_args("gen.free:blob", {"size": 10}, tmp_path)] == [
        "generator 'gen.free:blob' declares no argument bounds: add ARGS = {'blob': {argument: schema, ...}} "
        "to gen/free.py (see docs/authoring.md)"]
    (tmp_path / "gen" / "free.py").write_text("ARGS = {'blob': {}}\ndef blob(size):\n    return b'x' * size\n")
    assert [str(p) for p in check_args("gen.free:blob", {"size": 10}, tmp_path)] == [
        "generator 'gen.free:blob' declares no bounds for its argument(s) size (ARGS['blob'])"]


EVIL = textwrap.dedent("""\
    import os, time

    ARGS = {"spin": {"pidfile": {}}, "hog": {}, "flood": {}, "hang": {"pidfile": {}}, "ok": {}}


    def spin(pidfile):
        open(pidfile, "w").write(str(os.getpid()))
        while True:
            pass


    def hog():
        return b"x" * (8 * 1024 ** 3)


    def flood():
        return b"y" * (4 * 1024 ** 2)


    def hang(pidfile):
        child = os.fork()
        if child == 0:
            time.sleep(3600)
            os._exit(0)
        open(pidfile, "w").write(f"{os.getpid()} {child}")
        time.sleep(3600)


    def ok():
        return b"fine"
""")

# The wall-clock limit is generous except where it is the one tested: on a loaded machine a
# child may get a small share of a CPU, and the CPU limit must be the one that fires.
LIMITS = GeneratorLimits(cpu_seconds=1, wall_seconds=120, memory_bytes=1024**3, output_bytes=1024**2)
HANG = GeneratorLimits(cpu_seconds=10, wall_seconds=4, memory_bytes=1024**3, output_bytes=1024**2)


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "evil.py").write_text(EVIL)
    return tmp_path


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_generator_past_its_cpu_limit_is_killed(evil: Path) -> None:
    """Regression: a generator ran in osguard's own process, unbounded; a busy loop must never
    again run on the host past its CPU limit."""
    pidfile = evil / "spin.pid"
    with pytest.raises(GeneratorRefused) as info:
        run_generator("gen.evil:spin", {"pidfile": str(pidfile)}, evil, limits=LIMITS)
    assert str(info.value) == "generator 'gen.evil:spin' was killed: it used more than 1 s of CPU time (limit)"
    assert _gone(int(pidfile.read_text()))


def test_generator_past_its_memory_limit_is_stopped(evil: Path) -> None:
    """A generator must never take the host's memory: 8 GiB is refused under a 1 GiB limit."""
    with pytest.raises(GeneratorRefused) as info:
        run_generator("gen.evil:hog", {}, evil, limits=LIMITS)
    assert str(info.value) == ("generator 'gen.evil:hog' was stopped: it needed more than 1073741824 bytes "
                               "of memory (limit)")


def test_generator_past_its_output_limit_is_killed(evil: Path) -> None:
    """A generator's output is capped before it reaches osguard's memory or the environment."""
    with pytest.raises(GeneratorRefused) as info:
        run_generator("gen.evil:flood", {}, evil, limits=LIMITS)
    assert str(info.value) == "generator 'gen.evil:flood' was killed: its output exceeds 1048576 bytes (limit)"


def test_generator_past_its_wall_clock_limit_is_killed_with_its_children(evil: Path) -> None:
    """A generator that sleeps (no CPU) must never hang a build, nor leave a child behind."""
    pidfile = evil / "hang.pid"
    with pytest.raises(GeneratorRefused) as info:
        run_generator("gen.evil:hang", {"pidfile": str(pidfile)}, evil, limits=HANG)
    assert str(info.value) == "generator 'gen.evil:hang' was stopped: still running after 4 s (limit)"
    parent, child = (int(x) for x in pidfile.read_text().split())
    assert _gone(parent)
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:  # reaped by init once killed
        time.sleep(0.05)
    assert _gone(child)


def test_generator_runs_outside_the_osguard_process(evil: Path) -> None:
    """Suite code must never be imported into osguard's process to build a file."""
    assert run_generator("gen.evil:ok", {}, evil, limits=LIMITS) == b"fine"
    import sys

    assert "gen" not in sys.modules and "gen.evil" not in sys.modules


def test_a_generator_that_prints_still_gives_only_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "chatty.py").write_text(
        "import sys\nARGS = {'say': {}}\n"
        "def say():\n    print('hello on stdout')\n    print('and on stderr', file=sys.stderr)\n    return 'bytes'\n")
    assert run_generator("gen.chatty:say", {}, tmp_path, limits=LIMITS) == b"bytes"
