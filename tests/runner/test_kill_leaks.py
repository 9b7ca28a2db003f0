"""SIGKILL of `osguard run` at any instant leaks nothing (issue #10, finding 7).

A real `osguard run` subprocess is killed at 10 instants (OSGUARD_KILLS) spread over environment
start-up, the episode and teardown. Before the fix, a kill during start-up left a
supervisor with no record (its sandbox, Xvfb, D-Bus and server running on), or folders
and cgroups nobody removed. Now every environment holds a lease on its owner and every
folder names its owner first, so after the next `osguard env list` there must be 0
processes, 0 cgroups, 0 folders, 0 mounts left.

The run is placed in fresh cgroups of its own (cgroup v1 pids/memory/freezer, where the
host has them): every process it or its environments start lands below them, so
"nothing left" is checked exactly, whatever else runs on the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from osguard.providers import _sandbox, get_provider

SUITE = Path(__file__).parent / "data" / "suite"
OSGUARD = [sys.executable, "-m", "osguard"]
KILLS = int(os.environ.get("OSGUARD_KILLS", "10"))  # CI: 10; more by hand
CONTROLLERS = ("pids", "memory", "freezer")


def _own_cgroup(controller: str) -> Path | None:
    mount = Path("/sys/fs/cgroup") / controller
    if not (mount / "cgroup.procs").exists():
        return None
    return mount / _sandbox._current_cgroup(controller).lstrip("/")


@pytest.fixture
def jail():
    """Fresh cgroups for the killed runs (and, below them, their environments)."""
    name = f"osguard-killtest-{uuid.uuid4().hex[:8]}"
    folders = []
    for controller in CONTROLLERS:
        parent = _own_cgroup(controller)
        if parent is None:
            continue
        folder = parent / name
        try:
            folder.mkdir()
        except OSError as exc:
            for made in folders:
                made.rmdir()
            pytest.skip(f"cannot create a cgroup to watch the run ({exc})")
        folders.append(folder)
    if not folders:
        pytest.skip("no cgroup v1 controller to watch the run's processes")
    yield folders
    for folder in folders:
        for child in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if child.is_dir():
                child.rmdir()
        folder.rmdir()


def _left_in(folders: list[Path]) -> tuple[list[str], list[int]]:
    """(child cgroups, processes) below the jail."""
    cgroups, pids = [], set()
    for folder in folders:
        for procs in folder.rglob("cgroup.procs"):
            pids.update(int(p) for p in procs.read_text().split())
            if procs.parent != folder:
                cgroups.append(str(procs.parent))
    return cgroups, sorted(pids)


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


def test_sigkill_of_osguard_run_at_spread_instants_leaves_nothing(tmp_path, jail):
    """A SIGKILLed `osguard run` must never leave an environment's processes, cgroups,
    folders or mounts behind, at whatever instant it is killed."""
    reason = get_provider("local").available()
    if reason:
        pytest.skip(f"provider local is not available here: {reason}")
    state = tmp_path / "envs"
    environ = {**os.environ, "OSGUARD_STATE_DIR": str(state)}
    actions = tmp_path / "acts.json"
    actions.write_text(json.dumps({"rt-rename-todo": ["sleep 0.3", "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2",
                                                      "DONE"]}))
    pids_jail = next((f for f in jail if f.parent.parent.name == "pids" or "pids" in f.parts), jail[0])

    def start(out: Path) -> subprocess.Popen:
        def enter_jail() -> None:
            for folder in jail:
                (folder / "cgroup.procs").write_text(str(os.getpid()))
        return subprocess.Popen([*OSGUARD, "run", str(SUITE / "rt-rename-todo.yaml"), "--agent", f"replay:{actions}",
                                 "--out", str(out), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environ, preexec_fn=enter_jail)

    began = time.monotonic()
    whole = start(tmp_path / "whole")
    _, stderr = whole.communicate(timeout=300)
    assert whole.returncode == 0, stderr.decode()
    duration = time.monotonic() - began
    assert _left_in(jail) == ([], [])

    problems = []
    for index in range(KILLS):
        offset = duration * (index + 0.5) / KILLS
        proc = start(tmp_path / f"killed-{index}")
        time.sleep(offset)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        listed = subprocess.run([*OSGUARD, "env", "list", "--json"], capture_output=True, text=True, env=environ,
                                timeout=120)
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        cgroups, pids = _left_in(jail)
        data = _sandbox.data_root(state) if state.is_dir() else state
        folders = sorted(p.name for p in data.glob("local-*")) if data.is_dir() else []
        files = sorted(p.name for p in state.glob("local-*")) if state.is_dir() else []
        mounts = _sandbox.mounts_under(data) if data.is_dir() else []
        if rows or cgroups or pids or folders or files or mounts:
            problems.append(f"kill {index} at {offset:.2f} s of {duration:.2f} s: listed {rows}, cgroups {cgroups}, "
                            f"processes {[(p, _cmd(p)) for p in pids]}, folders {folders}, files {files}, "
                            f"mounts {mounts}")
            # clean for the next instant, so one leak is not counted twenty times
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run([*OSGUARD, "env", "down", "--all"], capture_output=True, env=environ, timeout=120)
    assert problems == []
    assert pids_jail.exists()
