"""The local provider's own promises: limits, lifetime, headless mode, death and cleanup."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from osguard.errors import EnvironmentDead
from osguard.providers import get_provider
from osguard.providers import _state


@pytest.fixture(autouse=True)
def _local_only() -> None:
    reason = get_provider("local").available()
    if reason:
        pytest.skip(f"provider local is not available here: {reason}")


def test_memory_limit_kills_the_hog_not_the_environment() -> None:
    with get_provider("local", memory_mb=300, gui=False).start() as env:
        if "memory" not in env.info.extra["cgroups"]:
            pytest.skip("no memory cgroup here: " + "; ".join(env.capabilities.notes))
        result = env.run_python("blocks = [bytearray(50 * 2**20) for _ in range(40)]\nprint('survived')", timeout=60)
        assert result.returncode in (-9, 137) or "MemoryError" in result.error
        assert "survived" not in result.output
        assert env.run_bash("echo alive").output == "alive\n"


def test_process_limit_is_the_configured_one() -> None:
    with get_provider("local", pids=64, gui=False).start() as env:
        if "pids" not in env.info.extra["cgroups"]:
            pytest.skip("no pids cgroup here")
        assert Path(env.info.extra["cgroups"]["pids"], "pids.max").read_text().strip() == "64"
        # children that outlive the loop however slowly it runs (a loaded machine), killed after
        probe = ("import subprocess\nchildren = []\nfor _ in range(100):\n"
                 "    try:\n        children.append(subprocess.Popen(['sleep', '120']))\n"
                 "    except OSError as exc:\n        print(exc.errno)\n        break\nprint(len(children))\n"
                 "for child in children:\n    child.kill()\n    child.wait()")
        errno_line, started = env.run_python(probe, timeout=60).output.split()
        assert errno_line == "11"  # EAGAIN: the pids controller refused the fork
        assert 0 < int(started) < 64
        _recovers(env)


def test_process_limit_without_cgroups_falls_back_to_rlimit() -> None:
    # RLIMIT_NPROC counts every task of the sandbox uid, other environments' too (a parallel
    # worker's LibreOffice threads come and go by the hundred: seen 379 started of a budget
    # of 300 while another worker's check ran), so the bound is roomy both ways:
    # the fork bomb must be stopped by EAGAIN long before its 1000 children
    with get_provider("local", pids=300, gui=False, use_cgroups=False).start() as env:
        assert env.info.extra["cgroups"] == {}
        assert "no cgroup v1 pids controller: processes limited with RLIMIT_NPROC instead" in env.capabilities.notes
        # children that outlive the loop however slowly it runs (a loaded machine), killed after
        probe = ("import subprocess\nchildren = []\nfor _ in range(1000):\n"
                 "    try:\n        children.append(subprocess.Popen(['sleep', '120']))\n"
                 "    except OSError as exc:\n        print(exc.errno)\n        break\nprint(len(children))\n"
                 "for child in children:\n    child.kill()\n    child.wait()")
        errno_line, started = env.run_python(probe, timeout=60).output.split()
        assert errno_line == "11" and int(started) < 1000
        _recovers(env)


def _recovers(env, within: float = 20) -> None:
    """Once the sleeps are gone, the environment runs commands again."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if env.run_bash("echo alive").output == "alive\n":
            return
        time.sleep(0.5)
    raise AssertionError("the environment did not recover from its process limit")


def test_lifetime_ends_the_environment() -> None:
    env = get_provider("local", gui=False, lifetime=1.5).start()
    try:
        assert env.is_alive()
        deadline = time.monotonic() + 15
        while env.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not env.is_alive()
        # The supervisor closes its port first, then cleans up.
        while _state.record_path(env.info.id).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _state.record_path(env.info.id).exists()
        assert not Path(env.info.extra["home_dir"]).exists()
    finally:
        env.stop()


def test_headless_environment_says_so() -> None:
    with get_provider("local", gui=False).start() as env:
        assert env.capabilities.gui is False and env.capabilities.accessibility is False
        assert "headless: started without a display (--headless)" in env.capabilities.notes
        assert env.run_bash("echo ${DISPLAY:-none}").output == "none\n"
        assert env.accessibility_tree() is None


def test_gtk4_applications_draw_with_cairo() -> None:
    """GNOME Files (GTK 4) with its default OpenGL renderer on Xvfb's software GL sometimes
    never finished loading its first folder under load: the session hands applications
    GSK_RENDERER=cairo (osguard.server.session), and a command sees it as an app would."""
    with get_provider("local").start() as env:
        if not env.capabilities.gui:
            pytest.skip(f"environment has no display: {'; '.join(env.capabilities.notes)}")
        assert env.run_bash("echo $GSK_RENDERER").output == "cairo\n"


def test_dead_environment_raises_environment_dead() -> None:
    env = get_provider("local", gui=False).start()
    try:
        supervisor = env.info.extra["supervisor_pid"]
        os.kill(supervisor, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state.pid_alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.05)
        # The forwarder goes down with its supervisor a moment later; until then a request
        # can still be accepted and dropped (the "stopped answering during" wording).
        port = int(env.info.endpoint.rsplit(":", 1)[1])
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                break
            time.sleep(0.05)
        with pytest.raises(EnvironmentDead) as caught:
            env.run_bash("echo hi")
        assert str(caught.value) == (
            f"environment {env.info.id} at {env.info.endpoint} is not answering "
            "(ConnectError: [Errno 111] Connection refused); it has stopped or crashed"
        )
    finally:
        env.stop()
    # stop() cleaned up after the dead supervisor: no record, no folders, no cgroups.
    assert not _state.record_path(env.info.id).exists()
    assert not Path(env.info.extra["env_dir"]).exists()
    for folder in env.info.extra["cgroups"].values():
        assert not Path(folder).exists()


def test_keep_home_leaves_the_home_behind(tmp_path: Path) -> None:
    env = get_provider("local", gui=False, keep_home=True).start()
    env.run_bash("echo kept > ~/Documents/kept.txt")
    env.stop()
    home = Path(env.info.extra["home_dir"])
    try:
        assert (home / "Documents" / "kept.txt").read_text() == "kept\n"
    finally:
        import shutil

        shutil.rmtree(Path(env.info.extra["env_dir"]), ignore_errors=True)


def test_environments_are_isolated_from_each_other() -> None:
    provider = get_provider("local", gui=False)
    with provider.start() as first, provider.start() as second:
        first.run_bash("echo mine > ~/Desktop/first.txt; echo tmp > /tmp/first.txt")
        assert second.run_bash("ls ~/Desktop /tmp").output.count("first.txt") == 0
        assert first.info.endpoint != second.info.endpoint


def test_client_of_another_environment_is_refused() -> None:
    from osguard.providers.base import EnvironmentInfo
    from osguard.providers.client import HttpEnvironment

    with get_provider("local", gui=False).start() as env:
        impostor = HttpEnvironment(env.info.endpoint, EnvironmentInfo("local-deadbeef", "local", env.info.endpoint),
                                   env.capabilities)
        with pytest.raises(EnvironmentDead) as caught:
            impostor.run_bash("touch ~/should-not-exist")
        assert str(caught.value) == (
            f"environment local-deadbeef is gone: {env.info.endpoint} now answers for another environment"
        )
        assert not impostor.is_alive()
        assert env.run_bash("ls ~/should-not-exist").returncode != 0


def test_environments_cannot_read_each_others_homes() -> None:
    """Two sandboxes started side by side must never see each other's private folders
    through the read-only view of the host (their homes live on the host under the
    state/data folder): an agent in one episode must not read another episode's files."""
    first = get_provider("local", gui=False).start()
    second = get_provider("local", gui=False).start()
    try:
        first.run_bash("echo osguard-private-token > ~/Documents/private.txt")
        first_home = first.info.extra["home_dir"]
        read = second.run_bash(f"cat {first_home}/Documents/private.txt")
        assert read.returncode != 0 and "osguard-private-token" not in read.output
        listed = second.run_bash(f"ls -A {Path(first_home).parent.parent}")
        assert first.info.id not in listed.output and second.info.id not in listed.output
    finally:
        second.stop()
        first.stop()


def test_project_checkout_and_runs_are_invisible_inside() -> None:
    """An agent must not read the suite's specs (reference solutions, invariants) or earlier
    runs' results from the host: only system folders are visible in the sandbox."""
    repo = Path(__file__).resolve().parents[2]
    spec = next((repo / "variants").rglob("*.yaml"))
    env = get_provider("local", gui=False).start()
    try:
        result = env.run_bash(f"cat {spec}; ls {repo}")
        assert result.returncode != 0
        assert "references" not in result.output
        assert env.run_bash("ls /usr/bin/env /etc/hostname && python3 -c 'print(1)'").ok
    finally:
        env.stop()


def test_environments_of_other_state_folders_are_invisible_too(tmp_path: Path, monkeypatch) -> None:
    """Environments recorded under another state folder (another run, another test) must be
    as invisible as those of the same folder."""
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "one"))
    first = get_provider("local", gui=False).start()
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "two"))
    second = get_provider("local", gui=False).start()
    try:
        first_home = first.info.extra["home_dir"]
        listed = second.run_bash(f"ls -A {Path(first_home).parent.parent}")
        assert first.info.id not in listed.output
    finally:
        second.stop()
        monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "one"))
        first.stop()


def test_ending_an_environment_removes_its_evaluation_cgroups_too():
    """Never again: `osguard run` killed during a final evaluation left the evaluation
    sandbox's cgroups (osguard-<env>-eval-<hex>) behind after the environment was cleaned."""
    import os

    from osguard.providers import _sandbox

    env_id = f"cgtest-{os.urandom(3).hex()}"
    limits = _sandbox.Limits(memory_mb=256, pids=64)
    env = _sandbox.make_cgroups(env_id, limits)
    if not env.paths:
        pytest.skip("no cgroup v1 controllers here")
    evaluation = _sandbox.make_cgroups(f"{env_id}{_sandbox.EVALUATION_CGROUP}abc123", limits)
    assert all(os.path.isdir(p) for p in (*env.paths.values(), *evaluation.paths.values()))
    assert _sandbox.kill_environment_cgroups(env.paths)
    assert not any(os.path.exists(p) for p in (*env.paths.values(), *evaluation.paths.values()))
