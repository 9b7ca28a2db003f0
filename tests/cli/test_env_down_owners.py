"""``osguard env down`` never stops an environment whose owner process still runs
(issue #10, finding 8).

What must never happen again: two runs of the same user share the state folder, and
``env down --all`` in one terminal stopped the environments another terminal's live run
was using. Two real owner processes each start a real local sandbox; liveness is proven by
pid *and* /proc start time, so a reused pid does not protect a dead owner's environment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from osguard.providers import _state

OSGUARD = [sys.executable, "-m", "osguard"]
OWNER = """
import sys
from osguard.providers import get_provider
# detached: the environment outlives its owner (as after `env up`); otherwise it ends with it
options = {"detached": sys.argv[2] == "detached"}
provider = get_provider("local", gui=False, **options) if sys.argv[1] == "local" else get_provider(sys.argv[1], **options)
env = provider.start(timeout=120)
print(env.info.id, flush=True)
sys.stdin.read()  # until the test closes stdin or kills us
env.stop()
"""


@pytest.fixture(params=["local", "docker"])
def environ(request: pytest.FixtureRequest, tmp_path: Path):
    """A private state folder shared by the owners and the CLI, for one provider."""
    from _support import available_provider, docker_skip_reason

    if request.param == "docker":
        reason = docker_skip_reason()
        if reason:
            pytest.skip(reason)
    else:
        available_provider("local")
    environ = dict(os.environ, OSGUARD_STATE_DIR=str(tmp_path / "envs"), OWNER_PROVIDER=request.param)
    yield environ
    subprocess.run([*OSGUARD, "env", "down", "--all", "--force"], env=environ, capture_output=True, timeout=120)


def _owner(environ: dict[str, str], detached: bool = False) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, environ["OWNER_PROVIDER"], "detached" if detached else "owned"],
                            env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    env_id = proc.stdout.readline().strip()
    assert env_id.startswith(("local-", "osguard-")), env_id
    return proc, env_id


def _cli(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*OSGUARD, *args], env=environ, capture_output=True, text=True, timeout=180)


def _answers(environ: dict[str, str], env_id: str) -> bool:
    result = _cli(environ, "env", "exec", env_id, "--", "echo", "hi")
    return result.returncode == 0 and result.stdout == "hi\n"


def test_down_all_keeps_environments_of_live_owners(environ: dict[str, str]) -> None:
    first, first_id = _owner(environ, detached=True)
    second, second_id = _owner(environ)
    try:
        down = _cli(environ, "env", "down", "--all")
        assert down.returncode == 0, down.stderr
        assert sorted(down.stdout.splitlines()) == sorted(
            f"kept {env_id}: its owner, process {proc.pid}, is still running (--force stops it anyway)"
            for proc, env_id in ((first, first_id), (second, second_id)))
        assert _answers(environ, first_id) and _answers(environ, second_id)

        single = _cli(environ, "env", "down", first_id)
        assert (single.returncode, single.stderr) == (
            2, f"error: environment {first_id} belongs to process {first.pid}, which is still running; "
               "pass --force to stop it anyway\n")
        assert _answers(environ, first_id)

        # the first owner dies without stopping its (detached) environment: now it is a
        # leftover (an environment that is not detached ends with its owner by itself:
        # tests/runner/test_kill_leaks.py)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        down = _cli(environ, "env", "down", "--all")
        assert down.returncode == 0, down.stderr
        assert down.stdout.splitlines() == [  # oldest record first
            f"stopped {first_id}",
            f"kept {second_id}: its owner, process {second.pid}, is still running (--force stops it anyway)",
        ]
        assert [r["id"] for r in json.loads(_cli(environ, "env", "list", "--json").stdout)] == [second_id]
        assert _answers(environ, second_id)

        forced = _cli(environ, "env", "down", "--all", "--force")
        assert (forced.returncode, forced.stdout.splitlines()[0]) == (0, f"stopped {second_id}")
        assert _cli(environ, "env", "list").stdout == "no running environments\n"
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def test_a_reused_pid_does_not_count_as_the_owner() -> None:
    """Same pid, another start time: a different process, so the owner is dead."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start = _state.process_start(sleeper.pid)
        assert isinstance(start, int)
        assert _state.owner_alive({"pid": sleeper.pid, "start": start})
        assert not _state.owner_alive({"pid": sleeper.pid, "start": start - 1})
        assert not _state.owner_alive({"pid": sleeper.pid})  # records written before owners were kept
        assert not _state.owner_alive(_state.owner())  # the caller may stop its own environments
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not _state.owner_alive({"pid": sleeper.pid, "start": start})
