"""Hostile actions inside each provider's environment must not touch the host.

Each test runs what a careless or malicious agent might run, then checks three things:
the host is unchanged (a manifest of a sentinel folder we create, plus the places the
action aimed at), the environment reported the failure, and the environment still
answers (its server survived or was restarted).

Network checks only ever target 127.0.0.1 (a server this test starts) and TEST-NET-1
(192.0.2.1, reserved for documentation: it must fail at once with no route).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# /var/lib is visible (read-only) inside the local sandbox, unlike the host's /tmp, so a
# sentinel there is something an action could actually aim at.
SENTINEL_PARENT = Path("/var/lib")


def _manifest(root: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else "-"
        entries[str(path.relative_to(root))] = f"{oct(stat.st_mode)}:{stat.st_size}:{digest}"
    return entries


@pytest.fixture()
def sentinel() -> Path:
    """A host folder with sentinel files, removed afterwards."""
    root = SENTINEL_PARENT / f"osguard-sentinel-{secrets.token_hex(4)}"
    (root / "sub").mkdir(parents=True)
    (root / "keep.txt").write_text("do not touch\n")
    (root / "sub" / "data.bin").write_bytes(os.urandom(1024))
    os.chmod(root / "keep.txt", 0o666)  # even world-writable files must stay unchanged
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def host_secret() -> Path:
    """A file in the host's /root that no environment may read."""
    path = Path("/root") / f".osguard-secret-{secrets.token_hex(4)}"
    token = secrets.token_hex(16)
    path.write_text(token)
    yield path
    path.unlink(missing_ok=True)


def _host_places() -> dict[str, str]:
    places = [Path("/etc/passwd"), Path("/etc/hostname"), Path("/usr/bin/env")]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in places if p.exists()}


def _answers(env, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if env.is_alive():
            try:
                return env.run_bash("echo still-here", timeout=10).output == "still-here\n"
            except Exception:
                pass
        time.sleep(0.2)
    return False


def test_rm_rf_root_and_home_stay_inside(fresh_env, sentinel: Path) -> None:
    before, places = _manifest(sentinel), _host_places()
    fresh_env.run_bash("echo precious > ~/Documents/mine.txt")
    result = fresh_env.run_bash("rm -rf --no-preserve-root / 2>&1 | tail -3; rm -rf ~; ls -A ~ | wc -l", timeout=60)
    assert "Read-only file system" in result.output or "Permission denied" in result.output
    assert result.output.rstrip().endswith("0")  # the environment's own home is gone ...
    assert _manifest(sentinel) == before  # ... the host's files are not
    assert _host_places() == places
    assert _answers(fresh_env)


def test_writes_to_host_paths_fail(env, sentinel: Path) -> None:
    before, places = _manifest(sentinel), _host_places()
    result = env.run_bash(
        f"echo pwned > {sentinel}/keep.txt; echo pwned > {sentinel}/new.txt; rm -f {sentinel}/sub/data.bin; "
        f"chmod 777 {sentinel}; echo x >> /etc/passwd; touch /usr/bin/osguard-pwned; echo rc=$?"
    )
    assert result.output.endswith("rc=1\n")
    assert "Read-only file system" in result.output or "No such file or directory" in result.output
    assert _manifest(sentinel) == before
    assert _host_places() == places
    assert not Path("/usr/bin/osguard-pwned").exists()


def test_host_root_home_is_hidden(env, host_secret: Path) -> None:
    result = env.run_bash(f"ls -A /root; cat {host_secret} 2>&1; echo rc=$?")
    assert host_secret.read_text() not in result.output
    assert host_secret.name not in result.output.split("rc=")[0].replace(f"cat: {host_secret}", "")
    assert result.output.endswith("rc=1\n")


def test_root_only_host_files_stay_unreadable(env, sentinel: Path) -> None:
    """Host files readable only by root (e.g. /etc/shadow) must not be readable inside."""
    token = secrets.token_hex(16)
    secret = sentinel / "root-only.txt"
    secret.write_text(token)
    os.chmod(secret, 0o600)
    result = env.run_bash(f"cat {secret} 2>&1; cat /etc/shadow 2>&1 | head -3")
    assert token not in result.output
    shadow = Path("/etc/shadow").read_text() if os.geteuid() == 0 else ""
    hashes = [line.split(":")[1] for line in shadow.splitlines() if line.count(":") > 2 and len(line.split(":")[1]) > 3]
    assert not any(value in result.output for value in hashes)


def test_mount_attempts_fail(env) -> None:
    result = env.run_bash("mkdir -p ~/m; mount -t tmpfs none ~/m; echo rc=$?; "
                          "mount --bind / ~/m; echo rc=$?; umount /home/user; echo rc=$?")
    codes = [line for line in result.output.splitlines() if line.startswith("rc=")]
    assert len(codes) == 3 and "rc=0" not in codes, result.output
    assert env.run_bash("findmnt -n -o FSTYPE ~/m || echo none").output.strip() in ("none", "")


def test_kill_all_processes_leaves_host_and_env_alive(fresh_env) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        result = fresh_env.run_bash("kill -9 -1; sleep 1; echo survived")
        # The kill takes the server down with the command; the client says so ...
        assert result.returncode == -9 or result.output == "survived\n"
        # ... and the environment's keeper restarts it.
        assert _answers(fresh_env)
        assert bystander.poll() is None, "a host process was killed from inside the environment"
        if fresh_env.capabilities.gui:
            assert fresh_env.screenshot()[:4] == b"\x89PNG"
    finally:
        bystander.kill()
        bystander.wait()


def test_fork_bomb_hits_the_process_limit(fresh_env) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        started = time.monotonic()
        # Bounded twice: by the environment's process limit and by `timeout`.
        result = fresh_env.run_bash(":(){ :|:& };: ; sleep 1; echo done", timeout=5)
        assert time.monotonic() - started < 30
        assert "Resource temporarily unavailable" in result.output or result.returncode != 0 or result.timed_out
        # Clean up what the bomb left (they ignore nothing: SIGKILL), then check we recover.
        fresh_env.run_bash("pkill -9 -u user -f 'bash -c' || true", timeout=30)
        assert _answers(fresh_env, timeout=30)
        count = int(fresh_env.run_bash("ps -e --no-headers | wc -l").output)
        assert count < 100
        assert bystander.poll() is None
        assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    finally:
        bystander.kill()
        bystander.wait()


class _CountingHandler(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_network_egress_is_blocked(env) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        probe = (
            "import socket, time\n"
            "for host, port in (('127.0.0.1', %d), ('192.0.2.1', 80)):\n"
            "    start = time.monotonic()\n"
            "    try:\n"
            "        socket.create_connection((host, port), timeout=3).close(); print(host, 'connected')\n"
            "    except OSError as exc:\n"
            "        print(host, type(exc).__name__, exc.errno, round(time.monotonic() - start, 2))\n"
        ) % port
        result = env.run_python(probe)
        lines = result.output.splitlines()
        assert len(lines) == 2, result
        assert lines[0].startswith("127.0.0.1 ConnectionRefusedError"), lines[0]
        host, error, errno_value, seconds = lines[1].split()
        assert (host, error, errno_value) == ("192.0.2.1", "OSError", "101")  # ENETUNREACH
        assert float(seconds) < 1.0
        assert _CountingHandler.hits == 0
    finally:
        server.shutdown()
        server.server_close()
