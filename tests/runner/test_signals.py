"""Robustness of a real `osguard run` subprocess: SIGTERM / SIGINT stop every environment
of the run; SIGKILL loses at most the episode in flight and --resume gives the same
results as a run left alone, without duplicates and without stray environments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _support import process_alive

SUITE = Path(__file__).parent / "data" / "suite"

OSGUARD = [sys.executable, "-m", "osguard"]


def _descendants(pid: int) -> set[int]:
    """Every live process whose parent chain leads to ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        parents[int(entry)] = int(fields[1])
    out: set[int] = set()
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in out:
                out.add(child)
                frontier.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _make_suite(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = (SUITE / "rt-rename-todo.yaml").read_text()
    for i in range(n):
        vid = f"rt-sig-{i}"
        (folder / f"{vid}.yaml").write_text(text.replace("id: rt-rename-todo", f"id: {vid}"))
    return folder


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    """The subprocess environment: its own provider state folder, so records can be checked."""
    return {**os.environ, "OSGUARD_STATE_DIR": str(tmp_path / "envs")}


def _records(tmp_path: Path) -> list[str]:
    folder = tmp_path / "envs"
    return sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []


def _env_processes(pids: set[int]) -> set[int]:
    """The processes of environments among ``pids`` (supervisor, bwrap, server)."""
    return {p for p in pids if any(k in _cmdline(p) for k in ("bwrap", "osguard.server", "_supervisor"))}


@pytest.mark.parametrize("sig,code,name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_signal_stops_every_environment(tmp_path, sig, code, name):
    suite = _make_suite(tmp_path / "suite", 2)
    actions = tmp_path / "slow.yaml"
    actions.write_text("- sleep 60\n- DONE\n")
    out = tmp_path / "run"
    proc = subprocess.Popen([*OSGUARD, "run", str(suite), "--agent", f"replay:{actions}", "--out", str(out),
                             "--workers", "2", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_isolated_env(tmp_path))
    try:
        # both episodes are in their `sleep 60` action
        _wait_for(lambda: len(list((out / "episodes").glob(".tmp-*"))) == 2
                  and sum("sleep 60" in _cmdline(p) for p in _descendants(proc.pid)) == 2, 60, "two running episodes")
        envs = _env_processes(_descendants(proc.pid))
        assert len([p for p in envs if "_supervisor" in _cmdline(p)]) == 2
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr
    assert stderr.strip().endswith(
        f"error: run interrupted by {name}; every environment was stopped; finished episodes are in "
        f"{out / 'results.jsonl'}; continue with --resume")
    _wait_for(lambda: not any(process_alive(p) for p in envs), 10, "the environments' processes to end")
    assert not (out / "results.jsonl").exists() or (out / "results.jsonl").read_text() == ""
    assert not list((out / "live-envs").glob("*.json"))
    assert _records(tmp_path) == []


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    suite = _make_suite(tmp_path / "suite", 4)
    mapping = {f"rt-sig-{i}": (["sleep 0.5", "find ~ -type d -name todo_list_Jan_1 -execdir mv {} todo_list_Jan_2 \\;", "DONE"]
                               if i % 2 else ["sleep 0.5", "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2", "DONE"])
               for i in range(4)}
    actions = tmp_path / "mixed.json"
    actions.write_text(json.dumps(mapping))
    base = [*OSGUARD, "run", str(suite), "--agent", f"replay:{actions}", "--no-progress"]

    env = _isolated_env(tmp_path)
    alone = subprocess.run([*base, "--out", str(tmp_path / "alone")], capture_output=True, text=True, timeout=300,
                           env=env)
    assert alone.returncode == 0, alone.stderr

    killed = tmp_path / "killed"
    proc = subprocess.Popen([*base, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        results = killed / "results.jsonl"
        _wait_for(lambda: results.exists() and results.read_text().count("\n") >= 1
                  and len(list((killed / "live-envs").glob("*.json"))) == 1, 120,
                  "one finished episode and one environment up")
        left = _env_processes(_descendants(proc.pid))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = results.read_text().count("\n")
    assert 1 <= done_before < 4
    assert list((killed / "live-envs").glob("*.json")), "the killed runner's environment should still be marked live"
    assert any(process_alive(p) for p in left), "the killed runner's environment outlives it (detached supervisor)"

    try:
        resumed = subprocess.run([*base, "--out", str(killed), "--resume"], capture_output=True, text=True,
                                 timeout=300, env=env)
    finally:
        # never leave the killed run's environment behind, even when the resume fails
        os.environ["OSGUARD_STATE_DIR"], saved = env["OSGUARD_STATE_DIR"], os.environ.get("OSGUARD_STATE_DIR")
        try:
            from osguard.providers import get_provider
            from osguard.runner.run import reap_leftovers

            leftovers = reap_leftovers(killed, get_provider("local"))
        finally:
            if saved is None:
                del os.environ["OSGUARD_STATE_DIR"]
            else:
                os.environ["OSGUARD_STATE_DIR"] = saved
    assert leftovers == [], "the resume should have ended the killed run's environment itself"
    assert resumed.returncode == 0, resumed.stderr
    assert f"({4 - done_before} run, {done_before} already done)" in resumed.stdout

    def outcomes(run: Path) -> dict[str, str]:
        lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
        assert len(lines) == len({x["episode_id"] for x in lines}), "duplicate episode in results.jsonl"
        return {x["episode_id"]: x["outcome"] for x in lines}

    assert outcomes(killed) == outcomes(tmp_path / "alone")
    assert set(outcomes(killed).values()) == {"safe_success", "unsafe_completion"}
    assert not list((killed / "episodes").glob(".tmp-*"))
    assert sorted(p.name for p in (killed / "episodes").iterdir()) == [f"rt-sig-{i}" for i in range(4)]
    # the environment the killed runner left behind was ended by the resume
    _wait_for(lambda: not any(process_alive(p) for p in left), 15, "the killed run's environment to end")
    assert not list((killed / "live-envs").glob("*.json"))
    assert _records(tmp_path) == []


def test_sigterm_stops_the_environments_a_ready_pool_prepared(tmp_path):
    """An environment a ready pool prepared for a later episode (ready or mid-build) must
    never outlive the run when it is stopped by a signal."""
    suite = _make_suite(tmp_path / "suite", 1)
    actions = tmp_path / "slow.yaml"
    actions.write_text("- sleep 60\n- DONE\n")
    out = tmp_path / "run"
    proc = subprocess.Popen([*OSGUARD, "run", str(suite), "--agent", f"replay:{actions}", "--out", str(out),
                             "--repeats", "3", "--pool", "1", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_isolated_env(tmp_path))
    try:
        # the first episode is in its `sleep 60`, and the pool has started the next environment
        _wait_for(lambda: sum("sleep 60" in _cmdline(p) for p in _descendants(proc.pid)) == 1
                  and len([p for p in _env_processes(_descendants(proc.pid)) if "_supervisor" in _cmdline(p)]) >= 2,
                  60, "a running episode and a prepared environment")
        envs = _env_processes(_descendants(proc.pid))
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    _wait_for(lambda: not any(process_alive(p) for p in envs), 10, "the environments' processes to end")
    assert not list((out / "live-envs").glob("*.json"))
    assert _records(tmp_path) == []
