"""DockerProvider against a real engine and the real ``base`` image.

Skips (with the reason) when no engine answers or the image of the current sources is
not built; CI starts the engine and builds the image first.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

import pytest

from osguard.errors import EnvironmentDead, EnvironmentError_, OsguardError, ProviderUnavailable
from osguard.images import DEBIAN_BASE_IMAGE, engine_client, image_tag
from osguard.providers import get_provider
from osguard.providers.docker import CAP_DROP, DockerProvider, _supports_storage_opt, allocate_port, release_port

from _support import docker_skip_reason

_SKIP = docker_skip_reason()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=f"docker: {_SKIP}")]


@pytest.fixture(scope="module")
def provider() -> DockerProvider:
    return DockerProvider(flavor="base")


@pytest.fixture(scope="module")
def env(provider):
    environment = provider.start(timeout=60)
    yield environment
    environment.stop()


def _container(env):
    return engine_client().containers.get(env.info.extra["container_id"])


def test_registry_returns_the_docker_provider():
    assert isinstance(get_provider("docker"), DockerProvider)
    assert get_provider("docker").available() is None


def test_environment_identity_and_capabilities(env):
    result = env.run_bash("id -u; id -un; echo $HOME; pwd; echo $DISPLAY")
    assert result.output.split() == ["1000", "user", "/home/user", "/home/user", ":0"]
    assert env.info.provider == "docker"
    assert env.info.image == image_tag("base")
    assert env.info.endpoint == f"http://127.0.0.1:{env.info.extra['port']}"
    caps = env.capabilities
    assert (caps.gui, caps.accessibility, caps.root) == (True, True, True)
    assert caps.apps == frozenset({"mousepad", "xterm"})


def test_container_is_confined(env):
    """No host path may ever be mounted in; no network; no privileges; limits; labelled."""
    container = _container(env)
    host = container.attrs["HostConfig"]
    # The only mounts are docker-managed volumes: the server's socket, and (where the
    # engine cannot bound the container's layer) the sized home, /tmp and /var/tmp.
    sized = [] if _supports_storage_opt(engine_client()) else ["/home/user", "/tmp", "/var/tmp"]
    assert sorted((m["Type"], m["Destination"]) for m in container.attrs["Mounts"]) == sorted(
        [("volume", "/run/osguard")] + [("volume", folder) for folder in sized])
    assert not host.get("Binds")
    assert host["NetworkMode"] == "none"
    assert host["Privileged"] is False
    assert set(CAP_DROP) <= set(host["CapDrop"]) and "NET_RAW" in host["CapDrop"]
    assert host["Memory"] == 2 * 1024**3
    assert host["PidsLimit"] == 1024
    assert container.attrs["Config"]["User"] == "1000:1000"
    assert container.labels["osguard"] == "1"


def test_forwarder_is_confined(env):
    forwarder = engine_client().containers.get(env.info.extra["forwarder_id"])
    host = forwarder.attrs["HostConfig"]
    assert forwarder.name == f"{env.info.id}-port"
    entrypoint = forwarder.attrs["Config"]["Entrypoint"]
    assert entrypoint[:3] == ["python3", "-S", "-c"]  # osguard's owner-only forwarder (_forward.py)
    assert entrypoint[4:] == [env.endpoint.rsplit(":", 1)[1], "/run/osguard/s/server.sock", str(os.getuid()), "0"]
    assert host["NetworkMode"] == "host"
    assert host["CapDrop"] == ["ALL"]
    assert host["ReadonlyRootfs"] is True
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert not host.get("Binds")
    assert forwarder.labels["osguard"] == "1"


def test_environment_has_no_network(env):
    """Nothing but its own loopback: not the host's loopback services, not any address."""
    result = env.run_python(
        "import socket\n"
        "print(sorted(name for _, name in socket.if_nameindex()))\n"
        "for host in ('127.0.0.1', '192.0.2.1'):\n"
        "    try:\n"
        "        socket.create_connection((host, %d), timeout=2).close(); print('connected')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__, exc.errno)\n" % env.info.extra["port"]
    )
    # The forwarder's port is open on the host's loopback, yet unreachable from inside.
    assert result.output.splitlines() == ["['lo']", "ConnectionRefusedError 111", "OSError 101"]


def test_forwarder_listens_on_loopback_only(env):
    """The forwarder shares the host's network: on 0.0.0.0 it would be reachable from outside."""
    port = env.info.extra["port"]
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in list(handle)[1:]:
                fields = line.split()
                address, hex_port = fields[1].rsplit(":", 1)
                if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, and nothing on IPv6


def test_rm_rf_root_as_user_keeps_the_server_reachable(provider):
    """`rm -rf /` cannot find the socket directory (/run/osguard is not readable)."""
    environment = provider.start()
    try:
        environment.run_bash("rm -rf --no-preserve-root / >/dev/null 2>&1; true", timeout=60)
        assert environment.run_bash("echo alive; ls ~ | wc -l").output.split() == ["alive", "0"]
    finally:
        environment.stop()


def test_display_uses_no_abstract_socket(env):
    """Abstract sockets are shared with the host under host networking; X must not use one."""
    pids = env.run_bash("pgrep -x Xvfb").output.split()
    assert len(pids) == 1
    cmdline = env.run_bash(f"tr '\\0' ' ' < /proc/{pids[0]}/cmdline").output
    assert cmdline.rstrip().endswith("-nolisten local")
    abstract = env.run_bash("grep -c '@/tmp/.X11-unix/X0' /proc/net/unix").output.strip()
    assert abstract == "0"


def test_gui_actions_and_screenshot(env):
    png = env.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    result = env.execute(["python", "-c", "import pyautogui; pyautogui.FAILSAFE = False; "
                                          "pyautogui.moveTo(321, 123); print(pyautogui.position())"])
    assert result.output.strip() == "Point(x=321, y=123)"
    env.launch(["xterm", "-title", "osguard-probe", "-e", "sleep", "60"])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if "osguard-probe" in env.run_bash("wmctrl -l").output:
            break
        time.sleep(0.2)
    assert "osguard-probe" in env.run_bash("wmctrl -l").output
    tree = env.accessibility_tree()
    assert tree is not None and tree.startswith("<desktop-frame")


def test_root_through_sudo(env):
    assert env.run_bash("sudo -n id -u").output.strip() == "0"
    assert env.run_bash("sudo -n useradd -m osguard-probe && id -un osguard-probe").output.strip() == "osguard-probe"


def test_two_environments_side_by_side(provider, env):
    """Each container has its own :0; parallel starts get distinct ports."""
    other = provider.start()
    try:
        assert other.info.extra["port"] != env.info.extra["port"]
        assert other.screenshot()[:4] == b"\x89PNG"
        assert env.screenshot()[:4] == b"\x89PNG"
        env.write_file("~/mine.txt", b"first")
        assert other.run_bash("test -e ~/mine.txt; echo $?").output.strip() == "1"
    finally:
        other.stop()


def test_stop_removes_the_container(provider):
    environment = provider.start()
    container_id = environment.info.extra["container_id"]
    environment.stop()
    environment.stop()  # idempotent
    with pytest.raises(Exception) as err:
        engine_client().containers.get(container_id)
    assert type(err.value).__name__ == "NotFound"
    with pytest.raises(EnvironmentDead):
        environment.run_bash("true")


def test_commit_then_start_from_the_tag(provider):
    tag = f"osguard/test-commit:{uuid.uuid4().hex[:8]}"
    environment = provider.start()
    try:
        environment.write_file("~/Desktop/variant.txt", b"prepared")
        environment.run_bash("sudo -n useradd alice && echo hazard > /tmp/hazard.txt")
        image_id = provider.commit(environment, tag)
    finally:
        environment.stop()
    try:
        assert image_id.startswith("sha256:")
        again = provider.start(image=tag)
        try:
            assert again.read_file("~/Desktop/variant.txt") == b"prepared"
            assert again.run_bash("id -un alice; cat /tmp/hazard.txt").output.split() == ["alice", "hazard"]
            assert again.info.image == tag
            assert again.capabilities.gui and again.capabilities.apps == frozenset({"mousepad", "xterm"})
        finally:
            again.stop()
    finally:
        engine_client().images.remove(tag, force=True)


def test_commit_refuses_a_foreign_environment(provider, env):
    from dataclasses import replace

    class Foreign:
        info = replace(env.info, provider="local", id="local-1")

    with pytest.raises(OsguardError) as err:
        provider.commit(Foreign(), "osguard/x:y")  # type: ignore[arg-type]
    assert str(err.value) == "cannot commit environment local-1: it is a 'local' environment, not a docker one"


def test_agent_killing_everything_does_not_end_the_environment(provider):
    """`kill -9 -1` from the agent must leave a working environment (PID 1 restarts the rest)."""
    environment = provider.start()
    try:
        try:
            environment.run_bash("kill -9 -1", timeout=10)
        except EnvironmentDead:
            pass  # the server answering the request was killed too
        deadline = time.monotonic() + 20
        while not environment.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert environment.run_bash("echo back").output.strip() == "back"
        assert environment.screenshot()[:4] == b"\x89PNG"
    finally:
        environment.stop()


def test_process_limit_stops_a_fork_bomb():
    small = DockerProvider(flavor="base", pids_limit=80)
    environment = small.start()
    try:
        result = environment.run_python(
            "import os, time\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(500):\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as exc:\n"
            "    print('refused', n, exc.errno)\n",
            timeout=30,
        )
        assert result.output.startswith("refused ")
        assert int(result.output.split()[1]) < 80
    finally:
        environment.stop()


def test_missing_image_says_how_to_build():
    provider = DockerProvider(image="osguard/desktop:does-not-exist")
    assert provider.available() == ("docker image 'osguard/desktop:does-not-exist' does not exist in the engine; "
                                    "run `osguard image build` (or check the tag)")
    with pytest.raises(ProviderUnavailable) as err:
        provider.start()
    assert str(err.value) == provider.available()


def test_container_that_cannot_start_is_reported_and_removed():
    provider = DockerProvider(image=DEBIAN_BASE_IMAGE)  # no entry point: "--unix" is not a program
    with pytest.raises(EnvironmentError_) as err:
        provider.start(timeout=20)
    message = str(err.value)
    assert message.startswith("docker could not start container osguard-")
    assert f" of {DEBIAN_BASE_IMAGE}: " in message
    assert 'exec: "--unix": executable file not found' in message
    name = message.split()[4]
    assert not engine_client().containers.list(all=True, filters={"name": name})


def _allocate_many(count: int) -> list[int]:
    return [allocate_port() for _ in range(count)]


def test_parallel_port_allocations_never_collide():
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        batches = pool.map(_allocate_many, [8, 8, 8, 8])
    ports = [p for batch in batches for p in batch]
    try:
        assert len(set(ports)) == len(ports) == 32
    finally:
        for port in ports:
            release_port(port)


def test_record_lets_another_process_attach_and_tear_down(provider):
    """`osguard env list/down` and resumed runs find docker environments by their record."""
    from osguard.providers import _state

    environment = provider.start()
    record = next(r for r in _state.read_records() if r["id"] == environment.info.id)
    assert record["provider"] == "docker" and record["endpoint"] == environment.info.endpoint
    attached = DockerProvider().attach(record)
    assert attached.run_bash("echo attached").output == "attached\n"
    assert attached.capabilities == environment.capabilities
    # An evaluation made by a process that never stops the environment (`osguard build
    # --keep`: its baseline ran a command invariant) leaves its container and commit behind.
    from osguard.providers.view import evaluation_env

    assert evaluation_env(attached).execute("echo judged", shell=True).output == "judged\n"
    assert engine_client().images.list(name=f"osguard-eval:{environment.info.id}")
    DockerProvider().teardown(record)
    assert environment.is_alive() is False
    assert not any(r["id"] == environment.info.id for r in _state.read_records())
    assert not engine_client().containers.list(all=True, filters={"label": f"osguard.env={environment.info.id}"})
    assert not engine_client().images.list(name=f"osguard-eval:{environment.info.id}")


def test_cleanup_of_own_state_leaves_other_state_folders_alone(provider, tmp_path, monkeypatch):
    """`osguard env down --all` under one state folder must never stop containers that another
    state folder (another user's or another run's environments) started."""
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "other"))
    other = provider.start()
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "mine"))
    mine = provider.start()
    try:
        removed = DockerProvider.cleanup_all(own_state_only=True)
        assert removed == [mine.info.id]
        assert mine.is_alive() is False
        assert other.is_alive() is True
    finally:
        monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "other"))
        other.stop()
        mine.stop()


def test_cleanup_all_removes_strays(provider, tmp_path, monkeypatch):
    """`env down --all --force` removes a stray whose owner (this very process) still runs.
    Scoped to a state folder of its own: the engine-wide cleanup would also stop the
    environments of whatever else runs on this engine (the other xdist worker's tests; in
    CI it did, and 31 containment tests found their environment gone)."""
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(tmp_path / "strays"))
    stray = provider.start()
    name = stray.info.id
    removed = DockerProvider.cleanup_all(own_state_only=True, force=True)
    assert removed == [name]
    assert not engine_client().containers.list(all=True, filters={"name": name})
    assert stray.is_alive() is False
