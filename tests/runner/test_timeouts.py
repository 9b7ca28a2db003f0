"""Per-step and per-episode timeouts of `osguard run`, on the real local sandbox with real
plug-in agents and guardrails (tests/runner/data/timeout_plugins.py) that hang on cue: a
stuck call ends its own episode as agent_error, the other episodes of the run complete,
and no sandbox is left running."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from osguard.runner import run_suite

from _support import process_alive

DATA = Path(__file__).parent / "data"
SUITE = DATA / "suite"


@pytest.fixture()
def plugins(monkeypatch, tmp_path):
    """The plug-in module, importable as ``timeout_plugins``; its abandoned threads are
    released at the end. Provider records go to a private state folder, to be checked."""
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "envs"))
    import timeout_plugins

    timeout_plugins.RELEASE.clear()
    timeout_plugins.HUNG.clear()
    timeout_plugins.LATE.clear()
    yield timeout_plugins
    timeout_plugins.RELEASE.set()


class _Recording:
    """The real local provider, noting each started environment's supervisor pid."""

    def __init__(self):
        from osguard.providers import get_provider

        self.inner = get_provider("local")
        self.name = self.inner.name
        self.pids: list[int] = []

    def available(self):
        return self.inner.available()

    def start(self, **kwargs):
        env = self.inner.start(**kwargs)
        self.pids.append(int(env.info.extra["supervisor_pid"]))
        return env

    def __getattr__(self, item):
        return getattr(self.inner, item)


def _suite(tmp_path: Path, *ids: str) -> list:
    """Copies of the runner's test variant under the given ids."""
    from osguard.spec import load_suite

    folder = tmp_path / "suite"
    folder.mkdir(exist_ok=True)
    text = (SUITE / "rt-rename-todo.yaml").read_text()
    for vid in ids:
        (folder / f"{vid}.yaml").write_text(text.replace("id: rt-rename-todo", f"id: {vid}"))
    return load_suite([folder])


def _steps(run_dir: Path, episode: str) -> list[dict]:
    lines = (run_dir / "episodes" / episode / "steps.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _outcome(run_dir: Path, episode: str) -> dict:
    return json.loads((run_dir / "episodes" / episode / "outcome.json").read_text())


def _assert_nothing_left(run_dir: Path, provider: _Recording, state_dir: Path, started: int) -> None:
    from osguard.providers import _state

    assert len(provider.pids) == started
    assert not list((run_dir / "live-envs").glob("*.json"))
    assert _state.state_dir() == state_dir and _state.read_records() == []
    assert [p for p in provider.pids if process_alive(p)] == []


def test_hanging_agent_ends_its_episode_and_the_other_completes(plugins, tmp_path):
    suite = _suite(tmp_path, "tt-hang-agent", "tt-ok")
    out = tmp_path / "run"
    provider = _Recording()
    t0 = time.monotonic()
    summary = run_suite(suite, "python:timeout_plugins:agent", out_dir=out, provider=provider, progress=False,
                        step_timeout=2, episode_timeout=60)
    elapsed = time.monotonic() - t0
    got = {r["episode_id"]: r for r in summary.results}
    assert got["tt-hang-agent"]["outcome"] == "agent_error"
    assert got["tt-hang-agent"]["reason"] == "agent proposal timed out after 2 s at step 0"
    assert got["tt-ok"]["outcome"] == "safe_success", got["tt-ok"]["reason"]
    assert 2 <= got["tt-hang-agent"]["duration_s"] < 10 and elapsed < 20
    # everything recorded so far is written: the cut-short step, the outcome (not evaluated)
    (step,) = _steps(out, "tt-hang-agent")
    assert step["index"] == 0 and step["executed"] is None and step["proposals"] == []
    assert step["terminated"] == "agent_error" and step["error"] == got["tt-hang-agent"]["reason"]
    doc = _outcome(out, "tt-hang-agent")
    assert doc["timeout"] == {"kind": "agent", "limit_s": 2, "step": 0}
    assert doc["evaluation"] is None and (doc["step_timeout"], doc["episode_timeout"]) == (2, 60)
    assert _outcome(out, "tt-ok")["timeout"] is None
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["step_timeout"], manifest["episode_timeout"]) == (2, 60)
    _assert_nothing_left(out, provider, tmp_path / "envs", 2)
    # the stuck call was abandoned, not killed: its daemon thread is still waiting
    assert plugins.HUNG == ["agent:tt-hang-agent"] and plugins.LATE == []
    stuck = [t for t in threading.enumerate() if t.name == "osguard-agent-call"]
    assert stuck and all(t.daemon for t in stuck)
    plugins.RELEASE.set()
    for t in stuck:
        t.join(5)
    assert plugins.LATE == ["agent:tt-hang-agent"]
    # its late proposal never ran: the environment is gone and the result was dropped
    assert [s["index"] for s in _steps(out, "tt-hang-agent")] == [0]


def test_hanging_guardrail_ends_its_episode_and_the_other_completes(plugins, tmp_path):
    suite = _suite(tmp_path, "tt-hang-guard", "tt-ok")
    out = tmp_path / "run"
    provider = _Recording()
    summary = run_suite(suite, "python:timeout_plugins:agent", "python:timeout_plugins:guardrail", out_dir=out,
                        provider=provider, progress=False, step_timeout=2, episode_timeout=60)
    got = {r["episode_id"]: r for r in summary.results}
    assert got["tt-hang-guard"]["outcome"] == "agent_error"
    assert got["tt-hang-guard"]["reason"] == "guardrail verdict timed out after 2 s at step 0"
    assert got["tt-ok"]["outcome"] == "safe_success", got["tt-ok"]["reason"]
    (step,) = _steps(out, "tt-hang-guard")
    assert [p["action"]["code"] for p in step["proposals"]] == ["echo hang"]
    assert step["proposals"][0]["verdict"] is None and step["executed"] is None
    assert step["terminated"] == "agent_error" and step["error"] == got["tt-hang-guard"]["reason"]
    doc = _outcome(out, "tt-hang-guard")
    assert doc["timeout"] == {"kind": "guardrail", "limit_s": 2, "step": 0} and doc["evaluation"] is None
    assert plugins.HUNG == ["guardrail"]
    _assert_nothing_left(out, provider, tmp_path / "envs", 2)


def test_episode_timeout_is_not_evaluated_and_bounds_a_stuck_call(plugins, tmp_path):
    """One episode keeps working (`sleep 1` steps), one hangs with a long step timeout: the
    episode limit ends both, between steps and during the wait."""
    suite = _suite(tmp_path, "tt-slow", "tt-hang-agent")
    out = tmp_path / "run"
    provider = _Recording()
    summary = run_suite(suite, "python:timeout_plugins:agent", out_dir=out, provider=provider, progress=False,
                        workers=2, max_steps=100, step_timeout=60, episode_timeout=4)
    got = {r["episode_id"]: r for r in summary.results}
    for vid in ("tt-slow", "tt-hang-agent"):
        assert got[vid]["outcome"] == "agent_error"
        assert got[vid]["reason"] == "episode timed out after 4 s"
        assert 4 <= got[vid]["duration_s"] < 12
        doc = _outcome(out, vid)
        assert doc["timeout"]["kind"] == "episode" and doc["timeout"]["limit_s"] == 4
        assert doc["evaluation"] is None and doc["violated"] == []
    slow = _steps(out, "tt-slow")
    assert 1 <= got["tt-slow"]["steps"] < 5
    assert all(s["executed"] == {"kind": "shell", "code": "sleep 1"} for s in slow[:got["tt-slow"]["steps"]])
    assert _outcome(out, "tt-hang-agent")["timeout"]["step"] == 0
    _assert_nothing_left(out, provider, tmp_path / "envs", 2)


def test_timeouts_must_be_positive(variant, tmp_path):
    from osguard.errors import OsguardError

    with pytest.raises(OsguardError) as exc:
        run_suite([variant], "replay:safe", out_dir=tmp_path / "a", progress=False, step_timeout=0)
    assert str(exc.value) == "--step-timeout 0: expected a number of seconds > 0"
    with pytest.raises(OsguardError) as exc:
        run_suite([variant], "replay:safe", out_dir=tmp_path / "b", progress=False, episode_timeout=-1.5)
    assert str(exc.value) == "--episode-timeout -1.5: expected a number of seconds > 0"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_flags_reach_the_manifest_and_the_episode(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "osguard", "run", str(SUITE), "--agent", "replay:safe", "--step-timeout", "7.5",
         "--episode-timeout", "90", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "OSGUARD_STATE_DIR": str(tmp_path / "envs")})
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["step_timeout"], manifest["episode_timeout"]) == (7.5, 90)
    doc = _outcome(out, "rt-rename-todo")
    assert doc["outcome"] == "safe_success" and (doc["step_timeout"], doc["episode_timeout"]) == (7.5, 90)
    bad = subprocess.run(
        [sys.executable, "-m", "osguard", "run", str(SUITE), "--agent", "replay:safe", "--step-timeout", "0",
         "--out", str(tmp_path / "bad"), "--no-progress"],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert bad.returncode == 2
    assert "--step-timeout 0: expected a number of seconds > 0" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_ctrl_c_during_a_stuck_proposal_stops_the_run_at_once(tmp_path):
    """Waiting for a hung plug-in does not make the run deaf to SIGINT: exit 130, the
    environment stopped, nothing recorded for the interrupted episode."""
    import signal

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tt-hang-agent.yaml").write_text(
        (SUITE / "rt-rename-todo.yaml").read_text().replace("id: rt-rename-todo", "id: tt-hang-agent"))
    out = tmp_path / "run"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": str(DATA),
           "OSGUARD_STATE_DIR": str(tmp_path / "envs")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "osguard", "run", str(suite), "--agent", "python:timeout_plugins:agent",
         "--step-timeout", "120", "--out", str(out), "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while not list(out.glob("live-envs/*.json")):
            assert time.monotonic() < deadline and proc.poll() is None, "the environment never came up"
            time.sleep(0.1)
        time.sleep(1.5)  # reset and the first observation are quick; the proposal now hangs
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
        assert time.monotonic() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "run interrupted by SIGINT" in err and "Traceback" not in err
    assert not list((out / "live-envs").glob("*.json"))
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text() == ""
    assert [p.name for p in (out / "episodes").iterdir()] == []
    assert not list((tmp_path / "envs").glob("*.json"))
