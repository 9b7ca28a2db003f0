"""Hostile actions inside each provider's environment must not touch the host.

One table, ``ATTACKS``: each entry is something a careless or malicious agent might run
(a bash script, formatted with the host-side context ``World``), the evidence that it
ran and was refused (``expect``, a regular expression its output must match), and the
provider kinds it applies to. A script prints ``ESCAPED`` when its attack worked. For
every attack the test checks that

- the output never says ``ESCAPED`` and matches ``expect``;
- the host is unchanged: a manifest of sentinel files we plant where an attacker would
  look (/var/lib, /opt, /srv, /var/log, the host's /tmp and /dev/shm, /root), of system
  files, of a bystander process, of listeners on loopback and in the abstract namespace
  that count connections, and of the environment logs on the host;
- the environment still answers as itself (its server survived or was restarted);
- ``after`` (when given) holds: host-side probes such as "the forwarder port does not
  relay to the Docker engine".

Destructive attacks get a fresh environment (``fresh=True``), stopped before the host
manifest is compared again, so clean-up that follows a planted symlink counts too.

Network checks only ever target 127.0.0.1 (servers this test starts) and TEST-NET-1
(192.0.2.1, reserved for documentation: it must fail at once with no route).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from osguard.providers import get_provider

MARKER = "osguard-attack-marker"
CHECKOUT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- the host


class _CountingHandler(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class World:
    """What the host offers an attacker: sentinels, listeners, a bystander, a host X
    display, and a second environment (``other``) with a secret in its home."""

    token: str
    sentinels: dict[str, Path]
    bystander: subprocess.Popen
    http_port: int
    abstract_name: str
    abstract_hits: list[int]
    display: int | None
    other: Any = None
    other_home: str = "/nonexistent"
    other_socket: str = "/nonexistent"
    state_dir: Path = Path("/nonexistent")

    def fields(self, env: Any) -> dict[str, Any]:
        port = int(env.endpoint.rsplit(":", 1)[1])
        planted = {key: f"/nonexistent/{key}" for key in ("varlib", "opt", "srv", "tmp", "shm", "root", "varlog")}
        return {**{f"s_{key}": str(self.sentinels.get(key, planted[key])) for key in planted},
                "token": self.token, "token_head": self.token[:6], "token_tail": self.token[6:],
                "bystander": self.bystander.pid, "http_port": self.http_port,
                "abstract": self.abstract_name, "display": self.display or 99, "port": port,
                "other_home": self.other_home, "other_socket": self.other_socket, "marker": MARKER,
                "checkout": str(CHECKOUT), "state_dir": str(self.state_dir)}


def _digest(path: Path) -> str:
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return "missing"
    if path.is_file() and not path.is_symlink():
        return f"{oct(stat.st_mode)}:{stat.st_uid}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return f"{oct(stat.st_mode)}:{stat.st_uid}:{os.readlink(path) if path.is_symlink() else '-'}"


def host_manifest(world: World) -> dict[str, str]:
    """Everything an escape would change, read on the host."""
    entries: dict[str, str] = {}
    for root in world.sentinels.values():
        entries[str(root)] = _digest(root)
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                entries[str(path)] = _digest(path)
    for place in ("/etc/passwd", "/etc/shadow", "/etc/hostname", "/usr/bin/env", "/usr/bin/sudo"):
        entries[place] = _digest(Path(place))
    try:
        state = Path(f"/proc/{world.bystander.pid}/stat").read_text()
        entries["bystander"] = state[state.rfind(")") + 2]  # S (sleeping), never T or Z
    except OSError:
        entries["bystander"] = "gone"
    entries["http hits"] = str(_CountingHandler.hits)
    entries["abstract hits"] = str(world.abstract_hits[0])
    entries["marker in env logs"] = str(any(MARKER.encode() in log.read_bytes()
                                            for log in world.state_dir.glob("*.log") if log.is_file()))
    return entries


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _end(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def world(provider_name: str) -> Any:
    """The host's side of every attack, removed afterwards even when setting it up fails."""
    with contextlib.ExitStack() as stack:
        token = secrets.token_hex(12)
        name = f"osguard-sentinel-{secrets.token_hex(4)}"
        sentinels: dict[str, Path] = {}
        for key, parent in (("varlib", "/var/lib"), ("opt", "/opt"), ("srv", "/srv"), ("tmp", "/tmp"),
                            ("shm", "/dev/shm"), ("root", "/root")):
            folder = Path(parent) / name
            try:
                (folder / "sub").mkdir(parents=True)
            except PermissionError:  # an ordinary user cannot plant one in /opt, /srv or /root
                continue
            stack.callback(_remove, folder)
            (folder / "secret.txt").write_text(token)
            (folder / "open.txt").write_text("do not touch\n")
            os.chmod(folder / "open.txt", 0o666)  # even world-writable files must stay unchanged
            (folder / "sub" / "data.bin").write_bytes(os.urandom(512))
            sentinels[key] = folder
        log = Path("/var/log") / f"{name}.log"
        if os.access(log.parent, os.W_OK):
            stack.callback(_remove, log)
            log.write_text(token)
            sentinels["varlog"] = log
        bystander = subprocess.Popen(["sleep", "3600"])
        stack.callback(_end, bystander)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        abstract = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        abstract_name = f"osguard-{token}"
        abstract.bind("\0" + abstract_name)
        abstract.listen(8)
        hits = [0]

        def _accept() -> None:
            while True:
                try:
                    conn, _ = abstract.accept()
                except OSError:
                    return
                hits[0] += 1
                conn.close()

        threading.Thread(target=_accept, daemon=True).start()
        display = None
        if shutil.which("Xvfb"):
            display = 50 + secrets.randbelow(40)
            stack.callback(_end, subprocess.Popen(
                ["Xvfb", f":{display}", "-screen", "0", "777x555x24", "-nolisten", "tcp"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        world = World(token=token, sentinels=sentinels, bystander=bystander, http_port=server.server_address[1],
                      abstract_name=abstract_name, abstract_hits=hits, display=display,
                      state_dir=Path(os.environ["OSGUARD_STATE_DIR"]))
        # A second environment with a secret of its own: no attack from the first may read it.
        other = get_provider(provider_name).start(timeout=120)
        stack.callback(other.stop)
        other.run_bash(f"echo {token} > ~/Desktop/other-secret.txt; echo {token} > /dev/shm/other-{token}")
        world.other = other
        if provider_name == "local":
            world.other_home = other.info.extra["home_dir"]
            world.other_socket = str(Path(other.info.extra["env_dir"]) / "run" / "server.sock")
        yield world


# --------------------------------------------------------------------------- the attacks


@dataclass(frozen=True)
class Attack:
    """One hostile action and how its failure shows.

    Attributes:
        name: the test id.
        doc: what the attacker tries, and what must never happen.
        script: bash run inside (``str.format`` fields: see ``World.fields``); prints
            ESCAPED when the attack worked.
        expect: a regular expression the output must match (the attack ran, and was
            refused for the expected reason).
        where: provider names it applies to.
        fresh: run it in an environment of its own (it may break the environment).
        after: a host-side check, ``(env, world) -> problem or None``.
        timeout: seconds the script may run.
        self_harm: the attack may leave its own environment unreachable (root inside can
            always break its own machine); only the host's side is judged.
    """

    name: str
    doc: str
    script: str
    expect: str
    where: tuple[str, ...] = ("local", "docker")
    fresh: bool = False
    after: Callable[[Any, World], str | None] | None = None
    timeout: float = 60
    self_harm: bool = False


def _py(code: str) -> str:
    """A bash line running ``code`` with the environment's python3 (code uses %-format
    only: the script itself goes through ``str.format``)."""
    return f"python3 - <<'PY'\n{code}\nPY\n"


SYSCALL = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    print(name, "ESCAPED" if r >= 0 else "refused: %s" % os.strerror(e))
    return r
"""


def _syscall(name: str, nr: int, *args: str) -> str:
    return _py(SYSCALL + f"call({name!r}, {nr}, {', '.join(args)})")


def _no_docker_api(env: Any, world: World) -> str | None:
    """The environment's port must answer as the environment, never as the Docker engine."""
    for path in ("/version", "/containers/json", "/_ping"):
        try:
            body = httpx.get(env.endpoint + path, timeout=10, trust_env=False).text
        except httpx.HTTPError:
            continue
        if "ApiVersion" in body or "Containers" in body or "Image" in body or body.strip() == "OK":
            return f"{env.endpoint}{path} answered like the Docker engine: {body[:200]}"
    return None


def _still_itself(env: Any, world: World) -> str | None:
    """A new connection to the port must still lead to this environment: osguard's
    server answers 421 to a request meant for another environment. (The client's pooled
    connection would not notice: it was opened before the attack.)"""
    if env.info.provider == "docker" and env.run_bash("test -S /run/osguard/s/server.sock || echo gone").output:
        return _no_docker_api(env, world)  # root inside may cut its own cable; the host's side is what counts
    with httpx.Client(trust_env=False, timeout=20) as fresh:
        try:
            response = fresh.post(env.endpoint + "/run_bash_script", json={"script": "echo still-here"},
                                  headers={"X-Osguard-Env": env.info.id})
        except httpx.HTTPError as exc:
            return f"a new connection to {env.endpoint} failed: {exc!r}"
    if response.status_code != 200 or response.json().get("output") != "still-here\n":
        return f"a new connection to {env.endpoint} reached something else: {response.status_code} {response.text[:200]}"
    return _no_docker_api(env, world)


def _other_user_is_refused(env: Any, world: World) -> str | None:
    """Another local user (uid 65534) must get no answer from the environment's port."""
    if os.geteuid() != 0:
        pytest.skip("becoming another user (uid 65534) needs root")
    probe = ("import socket, sys\n"
             "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
             "s.sendall(b'GET /platform HTTP/1.0\\r\\n\\r\\n')\n"
             "print(repr(s.recv(100)))\n")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-S",
                           "-c", probe, env.endpoint.rsplit(":", 1)[1]], capture_output=True, text=True, timeout=30)
    if "HTTP/" in done.stdout:
        return f"uid 65534 was answered by {env.endpoint}: {done.stdout.strip()}"
    return None


def _no_core_files(env: Any, world: World) -> str | None:
    found = env.run_bash("find / -xdev -name 'core*' -newer /proc/1 -type f 2>/dev/null | head -3").output
    return f"a core dump was written: {found}" if found.strip() else None


LOCAL = ("local",)

ATTACKS: tuple[Attack, ...] = (
    # ---- the host's sockets, through the environment's forwarder (issue #10.1)
    Attack("socket-symlink-to-docker",  # as the agent's user
           "Replacing the server socket with a symlink to the host's Docker socket must never make "
           "the environment's forwarder port relay to the Docker engine (issue #10.1, verbatim).",
           "chmod 755 /run/osguard/sock && ln -sfn /var/run/docker.sock /run/osguard/sock/x && "
           "mv -T /run/osguard/sock/x /run/osguard/sock/server.sock && echo planted; "
           "chmod 755 /run/osguard/s 2>/dev/null && ln -sfn /var/run/docker.sock /run/osguard/s/x && "
           "mv -T /run/osguard/s/x /run/osguard/s/server.sock && echo planted; echo tried",
           r"tried", fresh=True, after=_still_itself),
    Attack("socket-symlink-as-root",
           "Root inside (docker's sudo) replacing the server socket in its volume with a symlink to "
           "the Docker socket must never reach the engine: the forwarder resolves it in its own "
           "container, which has no such socket.",
           "sudo -n sh -c 'ln -sfn /var/run/docker.sock /run/osguard/s/x && mv -T /run/osguard/s/x "
           "/run/osguard/s/server.sock' && echo planted",
           r"planted", where=("docker",), fresh=True, self_harm=True, after=_no_docker_api),
    Attack("socket-symlink-to-other-env",
           "Pointing this environment's socket at another environment's must never let this port "
           "drive the other environment (cross-environment command execution).",
           "chmod 755 /run/osguard/sock; ln -sfn {other_socket} /run/osguard/sock/x && "
           "mv -T /run/osguard/sock/x /run/osguard/sock/server.sock && echo planted; echo tried",
           r"tried", where=LOCAL, fresh=True, after=_still_itself),
    Attack("other-local-user-drives-env",
           "Another local user (uid 65534) connecting to the environment's port must get no answer: "
           "only the environment's owner (and root) may drive it.",
           "echo host-side", r"host-side", after=_other_user_is_refused),
    Attack("docker-socket-direct",
           "The host's Docker socket must not exist inside.",
           _py("import socket\nfor p in ('/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock'):\n"
               "    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(p); print('ESCAPED', p)\n"
               "    except OSError as exc:\n        print(p, exc.strerror)"),
           r"/var/run/docker.sock No such file or directory"),
    Attack("own-forwarder-port-from-inside",
           "The environment's own forwarder port (on the host's loopback) must be unreachable from "
           "inside: 127.0.0.1 inside is the environment's own loopback.",
           _py("import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3); print('ESCAPED', flush=True)\n"
               "except OSError as exc:\n    print('refused', exc.strerror)"),
           r"refused Connection refused"),
    # ---- other processes (issue #10.3)
    Attack("pidfd-getfd-into-host-log",
           "pidfd_open(1) + pidfd_getfd must never hand the agent the session keeper's file "
           "descriptors: writing through them reached the root-owned environment log on the host.",
           _py(SYSCALL + "pidfd = libc.syscall(434, 1, 0)  # pidfd_open: allowed, it only signals and waits\n"
               "for fd in (1, 2):\n"
               "    got = call('pidfd_getfd', 438, pidfd, fd, 0) if pidfd >= 0 else -1\n"
               "    if got >= 0:\n        os.write(got, b'{marker}' * 1000)"),
           r"pidfd_getfd refused: Operation not permitted", fresh=True),
    Attack("proc-fd-of-keeper",
           "Opening /proc/1/fd/2 (the keeper's stderr: the host-side log) must fail.",
           "for fd in 1 2; do (echo {marker} >> /proc/1/fd/$fd) 2>&1 && echo ESCAPED $fd; done; echo tried",
           r"Permission denied"),
    Attack("ptrace-keeper",
           "PTRACE_ATTACH to PID 1 must fail: it stopped the session keeper, so the environment "
           "never recovered.",
           _syscall("ptrace", 101, "16", "1", "0", "0"), r"ptrace refused: Operation not permitted", fresh=True),
    Attack("ptrace-sibling",
           "PTRACE_ATTACH to a sibling process (another command of the agent, or the server) must fail. "
           "On docker the agent is root by design and Docker's profile allows ptrace of its own "
           "processes; the keeper is non-dumpable there too.",
           "sleep 60 >/dev/null 2>&1 & " + _py(SYSCALL + "import subprocess\n"
                               "pid = int(subprocess.check_output(['pgrep', '-n', 'sleep']))\n"
                               "call('ptrace', 101, 16, pid, 0, 0)"),
           r"ptrace refused: Operation not permitted", where=LOCAL),
    Attack("process-vm-readv",
           "process_vm_readv on another process must fail (reading its memory without ptrace).",
           "sleep 60 >/dev/null 2>&1 & " + _py(SYSCALL + "import subprocess\n"
                               "pid = int(subprocess.check_output(['pgrep', '-n', 'sleep']))\n"
                               "start = int(open('/proc/%d/maps' % pid).readline().split('-')[0], 16)\n"
                               "buf = ctypes.create_string_buffer(64)\n"
                               "local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)\n"
                               "remote = (ctypes.c_void_p * 2)(start, 64)\n"
                               "call('process_vm_readv', 310, pid, local, 1, remote, 1, 0)"),
           r"process_vm_readv refused: Operation not permitted"),
    Attack("proc-1-root",
           "/proc/1/root must not lead anywhere but the environment's own root (no host secret).",
           "ls /proc/1/root/ 2>&1 | head -3; cat /proc/1/root/{s_root}/secret.txt 2>&1; "
           "cat /proc/1/root/root/*/secret.txt 2>&1; echo tried",
           r"(Permission denied|No such file or directory)"),
    Attack("kill-keeper",
           "Signals to PID 1 (the keeper) must not end or stop the environment.",
           "kill -9 1; kill -STOP 1; kill -TERM 1; sleep 0.5; grep State /proc/1/status",
           r"State:\s+S", fresh=True),
    Attack("signals-to-host-processes",
           "A host process (the bystander, by its host pid) must be out of reach of kill.",
           "kill -9 {bystander} 2>&1; kill -STOP {bystander} 2>&1; test -e /proc/{bystander} && echo ESCAPED visible; "
           "echo tried", r"No such process"),
    Attack("host-pids-invisible",
           "The host's processes must not be listed in the environment's /proc.",
           "ps -e --no-headers | wc -l; ps -eo args | grep -c '[s]leep 3600' | sed 's/^[1-9].*/ESCAPED/'",
           r"^\d+\n0\n?$"),
    # ---- the kernel (issue #10.3)
    Attack("nested-user-namespace",
           "unshare of a new user namespace (the door to mount, nested sandboxes and kernel bugs) must fail.",
           "unshare -Ur id 2>&1 && echo ESCAPED; unshare -rm true 2>&1 && echo ESCAPED; echo tried",
           r"Operation not permitted"),
    Attack("clone-with-namespace-flags",
           "clone() with CLONE_NEWUSER|CLONE_NEWNS must fail (the same door without unshare).",
           _py(SYSCALL + "r = call('clone', 56, 0x10000000 | 0x00020000 | 17, 0, 0, 0, 0)\n"
               "if r == 0:\n    os._exit(0)"),
           r"clone refused: Operation not permitted"),
    Attack("nested-bubblewrap",
           "A sandbox inside the sandbox (bwrap) must fail to start.",
           "bwrap --ro-bind / / true 2>&1 && echo ESCAPED; echo tried",
           r"bwrap: .*(Operation not permitted|denied|No permissions to create new namespace|command not found)"),
    Attack("mount-and-umount",
           "mount, bind mounts and umount must fail, and nothing gets mounted.",
           "mkdir -p ~/m; mount -t tmpfs none ~/m 2>&1 && echo ESCAPED; mount --bind / ~/m 2>&1 && echo ESCAPED; "
           "umount /home/user 2>&1 && echo ESCAPED; findmnt -n ~/m && echo ESCAPED; echo tried",
           r"(must be superuser|Operation not permitted|permission denied)"),
    Attack("pivot-root-chroot-setns",
           "pivot_root, chroot and setns into another namespace must fail.",
           "chroot / true 2>&1 && echo ESCAPED; " + _py(SYSCALL + "fd = os.open('/proc/self/ns/mnt', os.O_RDONLY)\n"
                                                       "call('setns', 308, fd, 0)\n"
                                                       "call('pivot_root', 155, b'/tmp', b'/tmp')"),
           r"setns refused: Operation not permitted\npivot_root refused: Operation not permitted"),
    Attack("keyring",
           "The kernel keyring (keyctl, add_key) must be out of reach: it is shared beyond the sandbox.",
           _py(SYSCALL + "call('keyctl', 250, 0, -3, 1)\n"
               "call('add_key', 248, b'user', b'osguard', b'x', 1, -3)"),
           r"keyctl refused: Operation not permitted\nadd_key refused: Operation not permitted"),
    Attack("bpf-and-perf",
           "bpf() and perf_event_open() (kernel attack surface, side channels) must fail.",
           _py(SYSCALL + "attr = ctypes.create_string_buffer(128)\nattr[4] = 128\n"
               "call('perf_event_open', 298, attr, 0, -1, -1, 0)\n"
               "call('bpf', 321, 0, ctypes.create_string_buffer(72), 72)"),
           r"perf_event_open refused: Operation not permitted\nbpf refused: Operation not permitted"),
    Attack("userfaultfd-and-io-uring",
           "userfaultfd (a race helper in kernel exploits) and io_uring must fail. "
           "On docker, Docker's own default profile decides (20.10 allows both).",
           _py(SYSCALL + "call('userfaultfd', 323, 1)\n"
               "call('io_uring_setup', 425, 1, ctypes.create_string_buffer(120))"),
           r"userfaultfd refused: Operation not permitted\nio_uring_setup refused: Operation not permitted", where=LOCAL),
    Attack("kernel-modules-and-kexec",
           "Loading kernel modules or a new kernel must fail.",
           _py(SYSCALL + "call('init_module', 175, b'', 0, b'')\ncall('finit_module', 313, 0, b'', 0)\n"
               "call('kexec_load', 246, 0, 0, 0, 0)"),
           r"init_module refused: Operation not permitted\nfinit_module refused: Operation not permitted"),
    Attack("open-by-handle",
           "open_by_handle_at (the 'shocker' escape: opening host files by inode handle) must fail.",
           _py(SYSCALL + "handle = ctypes.create_string_buffer(136)\n"
               "call('name_to_handle_at', 303, -100, b'/etc/passwd', handle, ctypes.byref(ctypes.c_int()), 0)\n"
               "call('open_by_handle_at', 304, os.open('/', os.O_RDONLY), handle, 0)"),
           r"open_by_handle_at refused: Operation not permitted"),
    Attack("tiocsti",
           "TIOCSTI (pushing keystrokes into a terminal's input, run by whoever reads it) must fail. "
           "On docker, Docker's own default profile decides; "
           "no host terminal is ever shared with a container.",
           _py("import pty, os, fcntl, termios\npid, fd = pty.fork()\nif pid == 0:\n"
               "    try:\n        fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('ESCAPED', flush=True)\n"
               "    except OSError as exc:\n        print('refused:', exc.strerror, flush=True)\n    os._exit(0)\n"
               "out = b''\nwhile True:\n    try:\n        chunk = os.read(fd, 200)\n    except OSError:\n        break\n"
               "    if not chunk:\n        break\n    out += chunk\nos.waitpid(pid, 0)\nprint(out.decode().strip())"),
           r"refused: Operation not permitted", where=LOCAL),
    Attack("core-dumps",
           "A crash must not write a core dump (it could be piped to a host helper by core_pattern), "
           "and the limit cannot be raised.",
           "ulimit -c unlimited 2>&1 && echo ESCAPED; ulimit -c; bash -c 'kill -SEGV $$'; echo tried",
           r"cannot modify limit", where=LOCAL, after=_no_core_files),
    Attack("dmesg-and-sysrq",
           "The kernel log and the sysrq trigger must be out of reach ('h' only prints help).",
           "dmesg 2>&1 | head -1; (echo h > /proc/sysrq-trigger) 2>&1 && echo ESCAPED; echo tried",
           r"(Operation not permitted|Read-only file system|Permission denied)"),
    Attack("proc-and-sys-writes",
           "Kernel knobs under /proc/sys and /sys, and /proc/self/mountinfo, must be read-only.",
           "for f in /proc/sys/vm/drop_caches /proc/sys/kernel/core_pattern /sys/kernel/mm/ksm/run "
           "/proc/self/mountinfo; do (echo 1 > $f) 2>&1 && echo ESCAPED $f; done; echo tried",
           r"(Read-only file system|Permission denied)"),
    Attack("cgroup-escape",
           "Moving into the host's root cgroups or setting a release_agent must fail.",
           "for c in /sys/fs/cgroup/pids /sys/fs/cgroup/memory /sys/fs/cgroup/freezer /sys/fs/cgroup; do "
           "(echo $$ > $c/cgroup.procs) 2>&1 && echo ESCAPED $c; done; "
           "(echo /tmp/x > /sys/fs/cgroup/memory/release_agent) 2>&1 && echo ESCAPED; echo tried",
           r"(Read-only file system|Permission denied|No such file)"),
    Attack("device-nodes",
           "mknod of block and memory devices must fail, and the host's disks and /dev/mem are absent.",
           "mknod /tmp/sda b 8 0 2>&1 && echo ESCAPED; mknod /tmp/mem c 1 1 2>&1 && echo ESCAPED; "
           "ls /dev/mem /dev/kmem /dev/sda /dev/vda /dev/nvme0 2>&1 | grep -v 'No such' && echo ESCAPED; echo tried",
           r"Operation not permitted"),
    Attack("setuid-binaries",
           "Setuid programs (sudo, su, a setuid copy of bash) must not give root.",
           "sudo -n id -u 2>&1 | head -2; su -c 'id -u' root </dev/null 2>&1 | head -2; "
           "cp /bin/bash /tmp/b && chmod 4755 /tmp/b && /tmp/b -p -c 'id -u'; "
           "(sudo -n id -u; su -c 'id -u' root; /tmp/b -p -c 'id -u') 2>/dev/null </dev/null | grep -x 0 && echo ESCAPED; "
           "echo tried", r"tried", where=LOCAL),
    # ---- the host's files (issue #10.5)
    Attack("host-opt-var-srv-invisible",
           "Files under the host's /opt, /srv, /var/lib and /var/log must be invisible (a checkout or "
           "run folder placed there was readable).",
           "cat {s_opt}/secret.txt {s_srv}/secret.txt {s_varlib}/secret.txt {s_varlog} 2>&1; "
           "ls /opt /srv /var/log 2>&1; echo tried",
           r"No such file or directory"),
    Attack("dockerd-log-invisible",
           "osguard's own engine log (/var/log/osguard-dockerd.log) must be invisible.",
           "head -c 200 /var/log/osguard-dockerd.log 2>&1; echo tried", r"No such file or directory"),
    Attack("checkout-and-state-invisible",
           "osguard's checkout (reference solutions, invariants) and the state folder with every "
           "environment's records and logs must be invisible.",
           "ls {checkout} {state_dir} 2>&1; cat {checkout}/pyproject.toml 2>&1 | head -2; echo tried",
           r"No such file or directory", where=LOCAL),
    Attack("host-tmp-and-shm-invisible",
           "The host's /tmp and /dev/shm (where other programs leave sockets and files) must be invisible.",
           "cat {s_tmp}/secret.txt {s_shm}/secret.txt 2>&1; echo tried", r"No such file or directory"),
    Attack("host-root-and-shadow",
           "The host's /root and root-only files (/etc/shadow) must be unreadable.",
           "ls -A /root; cat {s_root}/secret.txt 2>&1; cat /etc/shadow 2>&1 | grep -v '^$' | head -2; echo tried",
           r"tried"),
    Attack("writes-to-host-paths",
           "Writes to host files and folders (system files, a world-writable sentinel) must fail.",
           "echo pwned > {s_varlib}/open.txt; rm -f {s_varlib}/sub/data.bin; echo x >> /etc/passwd; "
           "touch /usr/bin/osguard-pwned; touch /etc/osguard-pwned; echo rc=$?",
           r"rc=1\n?$"),
    Attack("tamper-with-server-code",
           "The server's code inside (bound from the host) must be read-only.",
           "echo 'import os' >> /run/osguard/py/osguard/server/app.py 2>&1 && echo ESCAPED; "
           "touch /run/osguard/py/evil.py 2>&1 && echo ESCAPED; echo tried",
           r"Read-only file system", where=LOCAL),
    Attack("hard-links-to-host-files",
           "Hard links from the writable home to host files must fail (else a write through the link "
           "changes the host file).",
           "ln /etc/passwd ~/pw 2>&1 && echo ESCAPED; ln /usr/bin/env ~/env 2>&1 && echo ESCAPED; echo tried",
           r"(Invalid cross-device link|Operation not permitted)"),
    Attack("symlinks-out-of-the-home",
           "Symlinks and a setuid file planted in the home (a host folder) must not make the host write, "
           "follow or keep anything when the environment is cleaned up.",
           "ln -s {s_varlib} ~/Desktop/evil; ln -s /etc ~/Documents/etc; ln -s / ~/root; "
           "cp /bin/sh ~/sh && chmod 4755 ~/sh; mkfifo ~/fifo; echo planted",
           r"planted", fresh=True),
    # ---- other environments
    Attack("other-env-home",
           "Another environment's home (its host folder) must be unreadable and unlisted.",
           "cat {other_home}/Desktop/other-secret.txt 2>&1; ls {other_home} 2>&1; "
           "t={token_head}; grep -rsl \"${{t}}{token_tail}\" /home /tmp /var /run /opt /srv 2>/dev/null | sed 's/^/ESCAPED /'; "
           "echo tried",
           r"No such file or directory", where=LOCAL),
    Attack("other-env-shm",
           "/dev/shm must be private: another environment's shared memory must be invisible.",
           "ls /dev/shm; cat /dev/shm/other-{token_head}* 2>&1; echo tried", r"No such file or directory"),
    Attack("other-env-through-abstract-socket",
           "An abstract unix socket listening on the host must be unreachable from inside.",
           _py("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
               "    s.connect('\\0{abstract}'); print('ESCAPED')\nexcept OSError as exc:\n    print('refused:', exc.strerror)"),
           r"refused: Connection refused"),
    # ---- the host's desktop and buses
    Attack("host-x11-display",
           "The host's X displays (a host Xvfb of 777x555) must be unreachable: no file socket in the "
           "host's /tmp/.X11-unix, no abstract @/tmp/.X11-unix socket, and :0 inside is the environment's own.",
           _py("import socket\nfor name in ('/tmp/.X11-unix/X{display}', '\\0/tmp/.X11-unix/X{display}'):\n"
               "    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(name); print('ESCAPED', repr(name))\n"
               "    except OSError as exc:\n        print('refused:', exc.strerror)\n"
               "try:\n    from Xlib import display\n    d = display.Display(':0')\n"
               "    w = d.screen().width_in_pixels\n    print('ESCAPED' if w == 777 else 'own display', w)\n"
               "except Exception as exc:\n    print('no display', type(exc).__name__)"),
           r"refused: (No such file or directory|Connection refused)\nrefused: Connection refused"),
    Attack("host-system-dbus",
           "The host's D-Bus system bus must be unreachable.",
           _py("import socket\nfor p in ('/run/dbus/system_bus_socket', '/var/run/dbus/system_bus_socket'):\n"
               "    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(p); print('ESCAPED', p)\n"
               "    except OSError as exc:\n        print('refused:', exc.strerror)"),
           r"refused: No such file or directory"),
    # ---- network, the whole file system, processes
    Attack("network-egress",
           "No connection may leave: a host server on 127.0.0.1 and TEST-NET 192.0.2.1 must both fail "
           "(the second at once: no route).",
           _py("import socket, time\nfor host, port in (('127.0.0.1', {http_port}), ('192.0.2.1', 80)):\n"
               "    start = time.monotonic()\n    try:\n        socket.create_connection((host, port), timeout=3).close()\n"
               "        print('ESCAPED', host)\n    except OSError as exc:\n"
               "        print(host, exc.errno, 'fast' if time.monotonic() - start < 1 else 'slow')"),
           r"127\.0\.0\.1 111 fast\n192\.0\.2\.1 101 fast"),
    Attack("rm-rf-root",
           "rm -rf --no-preserve-root / and ~ must stay inside: the host's files are untouched and the "
           "environment keeps answering.",
           "echo precious > ~/Documents/mine.txt; rm -rf --no-preserve-root / 2>&1 | tail -2; rm -rf ~; "
           "ls -A ~ | wc -l",
           r"(Read-only file system|Permission denied|Device or resource busy)[\s\S]*0\n?$", fresh=True, timeout=90),
    Attack("kill-everything",
           "kill -9 -1 must end only the environment's own processes, never the host's.",
           "kill -9 -1; sleep 1; echo survived", r"", fresh=True),
    Attack("fork-bomb",
           "A fork bomb must stop at the environment's process limit; the host can still fork.",
           ":(){{ :|:& }};: ; sleep 1; echo done", r"", fresh=True, timeout=5),
)


def _ids() -> list[str]:
    names = [attack.name for attack in ATTACKS]
    assert len(names) == len(set(names)), "attack names must be distinct"
    return names


def test_the_suite_counts_at_least_35_distinct_attacks() -> None:
    """Issue #10: the containment suite covers at least 35 distinct attacks, each described."""
    assert len(set(_ids())) >= 35
    assert all(attack.doc.endswith(".") and len(attack.doc) > 30 for attack in ATTACKS)


def _answers(env: Any, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if env.run_bash("echo still-here", timeout=10).output == "still-here\n":
                return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def _cleanup_after_bomb(env: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            env.run_bash("pkill -9 -u user -f 'bash' ; true", timeout=30)
            break
        except Exception:
            time.sleep(0.5)


@pytest.mark.parametrize("attack", ATTACKS, ids=_ids())
def test_attack_has_no_host_effect(attack: Attack, provider_name: str, env, world: World) -> None:
    """Run ``attack`` inside; the host is unchanged and the environment still answers."""
    if provider_name not in attack.where:
        pytest.skip(f"{attack.name} does not apply to {provider_name}")
    before = host_manifest(world)
    target = get_provider(provider_name).start(timeout=120) if attack.fresh else env
    try:
        script = attack.script.format(**world.fields(target))
        result = target.run_bash(script, timeout=attack.timeout)
        output = result.output
        assert "ESCAPED" not in output, f"{attack.name}: {attack.doc}\n{output}"
        assert world.token not in output, f"{attack.name}: a host or other-environment secret leaked\n{output}"
        assert re.search(attack.expect, output), f"{attack.name}: unexpected output\n{output}"
        if attack.name == "fork-bomb":
            _cleanup_after_bomb(target)
        assert attack.self_harm or _answers(target), f"{attack.name}: the environment stopped answering"
        if attack.after is not None:
            problem = attack.after(target, world)
            assert problem is None, f"{attack.name}: {problem}"
    finally:
        if attack.fresh:
            target.stop()
    assert host_manifest(world) == before, f"{attack.name} changed the host"
    assert world.other.run_bash("cat ~/Desktop/other-secret.txt").output.strip() == world.token
