"""``osguard env ...`` end to end: real processes, a real local sandbox, a private state folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from osguard.providers import get_provider

OSGUARD = [sys.executable, "-m", "osguard.cli.app"]


@pytest.fixture()
def state(tmp_path: Path) -> dict[str, str]:
    reason = get_provider("local").available()
    if reason:
        pytest.skip(f"provider local is not available here: {reason}")
    environ = dict(os.environ, OSGUARD_STATE_DIR=str(tmp_path / "envs"))
    yield environ
    subprocess.run(OSGUARD + ["env", "down", "--all"], env=environ, capture_output=True, timeout=60)


def _run(environ: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(OSGUARD + list(args), env=environ, capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_up_exec_screenshot_down(state: dict[str, str], tmp_path: Path) -> None:
    up = json.loads(_run(state, "env", "up", "--json").stdout)
    assert up["provider"] == "local" and up["endpoint"].startswith("http://127.0.0.1:")
    env_id = up["id"]
    # The environment outlived `env up`.
    listed = json.loads(_run(state, "env", "list", "--json").stdout)
    assert [(row["id"], row["alive"]) for row in listed] == [(env_id, True)]
    assert _run(state, "env", "exec", "--", "echo", "hello").stdout == "hello\n"
    result = _run(state, "env", "exec", env_id, "--", "sh", "-c", "echo out; echo err >&2; exit 7", check=False)
    assert (result.returncode, result.stdout, result.stderr) == (7, "out\n", "err\n")
    result = _run(state, "env", "exec", "-s", "--", "cd ~/Desktop && pwd", check=False)
    assert (result.returncode, result.stdout) == (0, "/home/user/Desktop\n")
    if up["capabilities"]["gui"]:
        target = tmp_path / "shot.png"
        _run(state, "env", "screenshot", "-o", str(target))
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _run(state, "env", "down", env_id).stdout == f"stopped {env_id}\n"
    assert _run(state, "env", "list").stdout == "no running environments\n"
    assert not (Path(state["OSGUARD_STATE_DIR"]) / env_id).exists()


def test_errors_name_what_is_missing(state: dict[str, str]) -> None:
    result = _run(state, "env", "down", check=False)
    assert (result.returncode, result.stderr) == (2, "error: no running environment: start one with `osguard env up`\n")
    result = _run(state, "env", "up", "--provider", "dokcer", check=False)
    assert result.returncode == 2
    assert result.stderr == ("error: unknown provider 'dokcer': expected one of docker, local, osworld; "
                             "did you mean 'docker'?\n")
    up = json.loads(_run(state, "env", "up", "--json", "--headless").stdout)
    assert up["capabilities"]["gui"] is False
    assert "headless: started without a display (--headless)" in up["capabilities"]["notes"]
    # An id unlike any running one gets the list; a near miss of the running one is named too.
    # (A fixed "local-00000000" was once close enough to a random id to get the hint.)
    far = "osworld-" + next(d for d in "0123456789abcdef" if d not in up["id"]) * 8
    result = _run(state, "env", "exec", far, "--", "true", check=False)
    assert result.returncode == 2
    assert result.stderr == f"error: no environment {far!r} (running: {up['id']})\n"
    near = up["id"][:-1] + ("0" if up["id"][-1] != "0" else "1")
    result = _run(state, "env", "exec", near, "--", "true", check=False)
    assert result.returncode == 2
    assert result.stderr == f"error: no environment {near!r} (running: {up['id']}); did you mean {up['id']!r}?\n"
    result = _run(state, "env", "screenshot", "-o", "/tmp/never.png", check=False)
    assert result.stderr == f"error: environment {up['id']} has no display (headless): no screenshot\n"


def test_killed_supervisor_takes_the_sandbox_with_it_and_list_cleans(state: dict[str, str]) -> None:
    """A supervisor killed with SIGKILL must never leave a sandbox running behind it."""
    up = json.loads(_run(state, "env", "up", "--json", "--headless").stdout)
    record = json.loads((Path(state["OSGUARD_STATE_DIR"]) / f"{up['id']}.json").read_text())
    pids_cgroup = record["cgroups"].get("pids")
    os.kill(record["supervisor_pid"], signal.SIGKILL)
    if pids_cgroup:
        deadline = time.monotonic() + 10
        while Path(pids_cgroup, "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(pids_cgroup, "cgroup.procs").read_text().strip() == ""
    # Its supervisor is gone, so it is provably dead: `env list` removes what is left.
    assert json.loads(_run(state, "env", "list", "--json").stdout) == []
    assert _run(state, "env", "down", "--all").stdout == "no running environments\n"
    assert _run(state, "env", "list").stdout == "no running environments\n"
    assert list(Path(state["OSGUARD_STATE_DIR"]).iterdir()) == []
    if pids_cgroup:
        assert not Path(pids_cgroup).exists()


def test_env_up_disk_flag_bounds_the_environment(state: dict[str, str]) -> None:
    """`--disk` sizes the environment: a write past it fails inside with ENOSPC."""
    env_id = json.loads(_run(state, "env", "up", "--headless", "--disk", "64M", "--json").stdout)["id"]
    result = _run(state, "env", "exec", "-s", "--", "head -c 100M /dev/zero > ~/big; echo status=$?", check=False)
    assert "No space left on device" in result.stdout + result.stderr and "status=1" in result.stdout
    _run(state, "env", "down", env_id)
    bad = _run(state, "env", "up", "--disk", "lots", check=False)
    assert (bad.returncode, bad.stderr) == (2, "error: --disk 'lots': expected a size such as 512M or 4G\n")


def test_env_list_shows_what_it_cannot_prove_dead(state: dict[str, str]) -> None:
    """An unrecorded environment whose owner still runs (being started) must be listed,
    not silently dropped nor removed; once its owner is dead, `env list` removes it."""
    from osguard.providers import _sandbox, _state

    folder_root = Path(state["OSGUARD_STATE_DIR"])
    folder_root.mkdir(parents=True)
    previous = os.environ.get("OSGUARD_STATE_DIR")
    os.environ["OSGUARD_STATE_DIR"] = str(folder_root)
    try:
        data = _sandbox.data_root(folder_root)
    finally:
        if previous is None:
            os.environ.pop("OSGUARD_STATE_DIR")
        else:
            os.environ["OSGUARD_STATE_DIR"] = previous
    owner = subprocess.Popen(["sleep", "60"])
    try:
        folder = data / "local-0badf00d"
        folder.mkdir(parents=True)
        (folder / "owner.json").write_text(json.dumps({"id": "local-0badf00d", "owner": _state.owner(owner.pid),
                                                       "env_dir": str(folder), "cgroups": {}}))
        listed = _run(state, "env", "list").stdout
        assert listed.split() == ["local-0badf00d", "local", "(no", "record)", "starting", "in", "pid", str(owner.pid)]
        assert folder.exists()
    finally:
        owner.kill()
        owner.wait()
    assert _run(state, "env", "list").stdout == "no running environments\n"
    assert not folder.exists()
