"""docker: the disk quota and owner-bound containers (issue #10, findings 4 and 7).

Needs an engine and the base image of the current sources (skipped with the reason
otherwise), like tests/providers/test_docker_provider.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from osguard.images import engine_client
from osguard.providers.docker import DockerProvider, _supports_storage_opt

from _support import docker_skip_reason

_SKIP = docker_skip_reason()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=f"docker: {_SKIP}"),
              pytest.mark.usefixtures("private_state_dir")]
MIB = 1024 * 1024
SUITE = Path(__file__).parent.parent / "runner" / "data" / "suite"
OSGUARD = [sys.executable, "-m", "osguard"]


def test_writing_past_the_quota_fails_inside_and_the_host_grows_less():
    """`head -c 2000M /dev/zero > ~/big` once grew the host's disk by 2 GB: a write past
    ``disk_mb`` must fail inside with ENOSPC, in the home and in /tmp, and the
    container's layer on the host must grow by less than the quota."""
    with DockerProvider(flavor="base", disk_mb=64).start(timeout=60) as env:
        home = env.run_bash("ls -A ~ | sort | tr '\\n' ' '").output
        assert ".bashrc" in home and "Desktop" in home  # the image's home was seeded
        for target in ("~/big", "/tmp/big", "/var/tmp/big"):
            result = env.run_bash(f"head -c 100M /dev/zero > {target}; echo status=$?", timeout=120)
            assert "No space left on device" in result.output and "status=1" in result.output, (target, result.output)
        listed = engine_client().api.containers(all=True, size=True, filters={"id": env.info.extra["container_id"]})
        size = listed[0].get("SizeRw") or 0
        assert size < 64 * MIB, f"the container layer grew to {size / MIB:.0f} MiB"
        assert env.run_bash("rm ~/big && echo ok > ~/Desktop/f && cat ~/Desktop/f").output == "ok\n"


def test_the_container_log_is_bounded():
    """What the session prints (an agent can write to PID 1's stdout) must not grow the
    host's disk without bound through the engine's log file."""
    from osguard.server.limits import ENV_LOG_BYTES

    with DockerProvider(flavor="base").start(timeout=60) as env:
        result = env.run_bash("head -c 30M /dev/zero | tr '\\0' x > /proc/1/fd/1; echo $?", timeout=120)
        container = engine_client().containers.get(env.info.extra["container_id"])
        assert container.attrs["HostConfig"]["LogConfig"] == {
            "Type": "json-file", "Config": {"max-size": str(ENV_LOG_BYTES), "max-file": "1"}}
        log_path = Path(container.attrs["LogPath"])
        if log_path.exists():  # readable as root
            assert log_path.stat().st_size < 2 * ENV_LOG_BYTES, (log_path.stat().st_size, result.output)


def test_commit_keeps_the_sized_home(tmp_path):
    """A committed environment keeps what its (volume) home holds, deletions included."""
    if _supports_storage_opt(engine_client()):
        pytest.skip("the engine bounds the container layer itself: the home is no volume here")
    provider = DockerProvider(flavor="base", disk_mb=128)
    tag = f"osguard/test-faults-commit:{os.getpid()}"
    with provider.start(timeout=60) as env:
        env.run_bash("echo kept > ~/Desktop/kept.txt && rm ~/.bashrc")
        provider.commit(env, tag)
    try:
        with provider.start(image=tag, timeout=60) as again:
            assert again.run_bash("cat ~/Desktop/kept.txt; ls -A ~").output.splitlines()[0] == "kept"
            assert ".bashrc" not in again.run_bash("ls -A ~").output
            assert again.run_bash("head -c 200M /dev/zero > ~/big; echo $?").output.strip().endswith("1")
    finally:
        engine_client().images.remove(tag, force=True)


def _containers(state: Path) -> list[str]:
    return [c.name for c in engine_client().containers.list(
        all=True, filters={"label": [f"osguard.state={state.resolve()}"]})]


def test_sigkill_of_osguard_run_leaves_no_container(tmp_path):
    """A SIGKILLed `osguard run --provider docker` must never leave a container behind
    (before: both containers ran on with no owner)."""
    state = tmp_path / "envs"
    state.mkdir()
    environ = {**os.environ, "OSGUARD_STATE_DIR": str(state)}
    actions = tmp_path / "acts.json"
    actions.write_text(json.dumps({"rt-rename-todo": ["sleep 0.3", "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2",
                                                      "DONE"]}))
    argv = [*OSGUARD, "run", str(SUITE / "rt-rename-todo.yaml"), "--agent", f"replay:{actions}", "--provider", "docker",
            "--no-progress"]
    began = time.monotonic()
    whole = subprocess.run([*argv, "--out", str(tmp_path / "whole")], capture_output=True, text=True, env=environ,
                           timeout=300)
    assert whole.returncode == 0, whole.stderr
    duration = time.monotonic() - began
    problems = []
    kills = int(os.environ.get("OSGUARD_DOCKER_KILLS", "10"))  # CI: 10; more by hand
    for index in range(kills):
        offset = duration * (index + 0.5) / kills
        proc = subprocess.Popen([*argv, "--out", str(tmp_path / f"killed-{index}")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=environ)
        time.sleep(offset)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        listed = subprocess.run([*OSGUARD, "env", "list", "--json"], capture_output=True, text=True, env=environ,
                                timeout=120)
        assert listed.returncode == 0, listed.stderr
        left = _containers(state)
        rows = json.loads(listed.stdout)
        if left or rows:
            problems.append(f"kill {index} at {offset:.2f} s of {duration:.2f} s: containers {left}, listed {rows}")
            subprocess.run([*OSGUARD, "env", "down", "--all"], capture_output=True, env=environ, timeout=120)
    assert problems == []
