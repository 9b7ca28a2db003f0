"""A real Ray cluster on loopback for tests and benches: a head and worker nodes, each
started with ``ray start`` in its own temp folder, with its own osguard state folder.

The nodes advertise 127.0.0.2, not 127.0.0.1: ``ray start`` rewrites a node address of
127.0.0.1/localhost into this machine's outward address (Ray's
``resolve_ip_for_localhost``), which would send the cluster's traffic off loopback.
Every node and the driver share a private token (``RAY_AUTH_MODE=token``), usage
statistics are off and no dashboard starts. Each node runs in a session of its own, so
``stop`` ends exactly its processes (by process group id).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

NODE_IP = "127.0.0.2"
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((NODE_IP, 0))
        return sock.getsockname()[1]


class LocalRayCluster:
    """Start with ``start_head()`` and ``add_worker(name, cpus)``; ``env`` is the
    environment a driver (``osguard ... --executor ray --address ADDRESS``) runs in."""

    def __init__(self, root: Path, object_store_mb: int = 80):
        self.root = Path(root)
        self.port = _free_port()
        self.address = f"{NODE_IP}:{self.port}"
        self.object_store_mb = object_store_mb
        token = self.root / "token"
        token.write_text(secrets.token_hex(32), encoding="utf-8")
        token.chmod(0o600)
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN_PATH": str(token), "PYTHONPATH": str(REPO),
                    "OSGUARD_STATE_DIR": str(self.root / "driver-state")}
        self.env.pop("RAY_ADDRESS", None)
        # Ray's temp folders hold its sockets, whose paths must stay within AF_UNIX's 107
        # bytes: a short folder of its own under /tmp, whatever the length of ``root``
        self.temp = Path(tempfile.mkdtemp(prefix="osguard-ray-", dir="/tmp"))
        self.nodes: dict[str, dict[str, Path]] = {}
        self.groups: list[int] = []

    def _start(self, name: str, *args: str) -> None:
        temp, state = self.temp / name, self.root / f"{name}-state"
        temp.mkdir()
        state.mkdir()
        ray = str(Path(sys.executable).with_name("ray"))
        proc = subprocess.run(
            [ray, "start", "--node-ip-address", NODE_IP, "--temp-dir", str(temp), "--disable-usage-stats",
             "--object-store-memory", str(self.object_store_mb * 1024 * 1024), *args],
            env={**self.env, "OSGUARD_STATE_DIR": str(state)}, capture_output=True, text=True, timeout=180,
            start_new_session=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start ({name}) failed: {proc.stderr[-2000:]}")
        self.nodes[name] = {"temp": temp, "state": state}
        self.groups.append(os.getpgid(self.raylet(name)))

    def start_head(self) -> None:
        """The head: no CPUs, so every unit runs on a worker node."""
        self._start("head", "--head", "--port", str(self.port), "--num-cpus", "0", "--include-dashboard", "false")

    def add_worker(self, name: str, cpus: int = 1, resources: str | None = None) -> None:
        """A worker node with ``cpus`` CPUs (and custom resources as JSON, e.g. '{"gui": 1}')."""
        self._start(name, "--address", self.address, "--num-cpus", str(cpus),
                    *(("--resources", resources) if resources else ()))

    def raylet(self, name: str) -> int:
        """The pid of the node's raylet (its command line names the node's temp folder)."""
        marker = (str(self.temp / name) + "/").encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"/raylet") and any(marker in part for part in cmd):
                return int(entry.name)
        raise LookupError(f"no raylet for node {name}")

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's raylet: its workers die with it, as on a lost machine."""
        os.kill(self.raylet(name), signal.SIGKILL)

    def stop(self) -> None:
        """End every process of every node, then the environments their episodes left
        (a killed node's environments outlive it: their supervisors are detached)."""
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.groups = []
        for folders in self.nodes.values():
            subprocess.run([sys.executable, "-m", "osguard", "env", "down", "--all", "--force"],
                           env={**self.env, "OSGUARD_STATE_DIR": str(folders["state"])},
                           capture_output=True, timeout=120)
        shutil.rmtree(self.temp, ignore_errors=True)
