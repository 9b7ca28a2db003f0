"""The host-side keeper of one local environment (a detached process).

``python -S osguard/providers/_supervisor.py CONFIG.json`` is started by ``LocalProvider``
in its own session, so the environment outlives the command that started it
(``osguard env up``). It

1. binds ``127.0.0.1:PORT`` and prints ``{"port": ..., "pid": ...}`` on stdout;
2. binds the server's unix socket in the environment's control folder (on the host,
   mode 0700, never visible inside) and starts the bubblewrap sandbox inside the
   environment's cgroups with that socket and the seccomp filter as inherited file
   descriptors (bwrap's ``--die-with-parent`` ends the sandbox if this process dies);
3. forwards each TCP connection from the environment's owner (the connecting socket's
   uid, as the kernel reports it in /proc/net/tcp, is ours or root's) to that unix
   socket; other local users' connections are closed unanswered;
4. ends everything on SIGTERM, when the sandbox exits, or when its lifetime is over:
   kills the cgroups, removes the environment's folders and its state record.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

if __package__:
    from osguard.providers import _forward, _sandbox
else:
    # Run as a script (`python -S .../_supervisor.py`): starting without site and without
    # osguard's package imports saves tens of milliseconds per environment.
    import _forward  # type: ignore[no-redef]
    import _sandbox  # type: ignore[no-redef]

LOG_LIMIT = 4 * 1024 * 1024  # osguard.server.limits.ENV_LOG_BYTES (the config carries the value)


class Supervisor:
    """One environment's host-side process (see the module docstring)."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.socket_path = config["socket_path"]
        self.cgroups: dict[str, str] = config.get("cgroups", {})
        self.sandbox: subprocess.Popen | None = None
        self.listener: socket.socket | None = None
        self.ending = threading.Event()
        self._end_lock = threading.Lock()
        # The environment's owner, and root (who could take over this process anyway).
        self.allowed_uids = {os.getuid(), 0}

    # -- start ------------------------------------------------------------------------
    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(self.config.get("port") or 0)))
        listener.listen(64)
        self.listener = listener
        log = open(self.config["log_path"], "ab", buffering=0)
        cgroups = self.cgroups
        nproc = self.config.get("nproc_fallback")
        server_socket = _bind_server_socket(self.socket_path)
        argv = list(self.config["argv"])
        fds = [server_socket.fileno()]
        argv += ["--listen-fd", str(server_socket.fileno())]
        program = _sandbox.seccomp_program()
        if program is not None:
            seccomp_fd = os.memfd_create("osguard-seccomp")
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            fds.append(seccomp_fd)
            argv[1:1] = ["--seccomp", str(seccomp_fd)]
        argv = _sandbox.drop_privileges_argv(argv, self.config.get("host_uid"))
        # The sandbox writes into a pipe, never into the log file itself: what reaches the
        # log is bounded (``log_limit``), whatever the sandbox prints.
        read_end, write_end = os.pipe()
        self.sandbox = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL, stdout=write_end, stderr=write_end, pass_fds=tuple(fds),
            # Runs between fork and exec, while this process has a single thread.
            preexec_fn=lambda: _sandbox.prepare_child(cgroups, nproc),
            start_new_session=True,
        )
        # The sandbox has them now; the server socket stays reachable by path. The lease
        # (``lease_fd``) is never passed on: only this process watches it.
        for fd in (*fds, write_end):
            os.close(fd)
        threading.Thread(target=_copy_log, args=(read_end, log, int(self.config.get("log_limit") or LOG_LIMIT)),
                         daemon=True).start()
        port = listener.getsockname()[1]
        sys.stdout.write(json.dumps({"port": port, "pid": os.getpid(), "sandbox_pid": self.sandbox.pid}) + "\n")
        sys.stdout.flush()
        # Nobody reads our stdout/stderr from now on; a closed pipe must not kill us.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 1)
        os.dup2(log.fileno(), 2)
        signal.signal(signal.SIGTERM, lambda *_: self.end("stopped"))
        signal.signal(signal.SIGINT, lambda *_: self.end("stopped"))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        threading.Thread(target=self._watch_sandbox, daemon=True).start()
        if self.config.get("lease_fd") is not None:
            threading.Thread(target=self._watch_lease, args=(int(self.config["lease_fd"]),), daemon=True).start()
        lifetime = self.config.get("lifetime")
        if lifetime:
            threading.Timer(float(lifetime), lambda: self.end(f"lifetime of {lifetime} s is over")).start()

    def _watch_sandbox(self) -> None:
        assert self.sandbox is not None
        code = self.sandbox.wait()
        self.end(f"the sandbox exited with status {code}")

    def _watch_lease(self, fd: int) -> None:
        """End the environment when its owner ends: the owner holds the pipe's only write
        end, so EOF here means it closed it (stop) or died, however it died."""
        while True:
            try:
                if not os.read(fd, 64):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        owner = self.config.get("owner") or {}
        self.end(f"its owner (pid {owner.get('pid', '?')}) ended")

    # -- forwarding -------------------------------------------------------------------
    def serve(self) -> None:
        assert self.listener is not None
        _forward.serve(self.listener, self.socket_path, self.allowed_uids, self.ending)

    # -- end --------------------------------------------------------------------------
    def end(self, reason: str) -> None:
        with self._end_lock:
            if self.ending.is_set():
                return
            self.ending.set()
        sys.stderr.write(f"osguard-supervisor: ending environment {self.config['id']}: {reason}\n")
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
        if self.sandbox is not None and self.sandbox.poll() is None:
            try:
                os.killpg(self.sandbox.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.cgroups:
            _sandbox.kill_environment_cgroups(self.cgroups)
        # A sandbox that died on its own leaves its log for diagnosis (`env down --all` removes it).
        cleanup_dirs(self.config, keep_log=reason.startswith("the sandbox exited"))
        os._exit(0)


def cleanup_dirs(config: dict, keep_log: bool = False) -> None:
    """Remove an environment's folders, log and state record (unless asked to keep the home)."""
    import shutil

    if config.get("env_dir"):
        home = os.path.join(config["env_dir"], "home")
        if config.get("keep_home") and _sandbox.mounts_under(home):
            # A kept home leaves its image: copy what it holds (at most the quota) out first.
            kept = os.path.join(config["env_dir"], "home.kept")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(home, kept, symlinks=True, ignore_dangling_symlinks=True)
            _sandbox.unmount_under(home)
            shutil.rmtree(home, ignore_errors=True)
            os.rename(kept, home)
            try:
                os.unlink(os.path.join(config["env_dir"], "home.img"))
            except OSError:
                pass
        # The home image is loop-mounted there: detach it first, or rmtree would empty it
        # and leave the mount (and its loop device) behind.
        _sandbox.unmount_under(config["env_dir"])
    if config.get("log_path") and not keep_log:
        try:
            os.unlink(config["log_path"])
        except OSError:
            pass

    if not config.get("keep_home"):
        shutil.rmtree(config["env_dir"], ignore_errors=True)
        try:  # the per-state-folder parent below /var/lib/osguard, once its last env is gone
            if Path(config["env_dir"]).parent.parent.name == "sandboxes":
                os.rmdir(Path(config["env_dir"]).parent)
        except OSError:
            pass
    else:  # the home is kept (with its home.img, where it was one)
        for name in ("run", "etc"):
            shutil.rmtree(os.path.join(config["env_dir"], name), ignore_errors=True)
    if config.get("record_path"):
        try:
            Path(config["record_path"]).unlink()
        except OSError:
            pass


def _copy_log(read_end: int, log, limit: int) -> None:
    """Copy the sandbox's output into its log, up to ``limit`` bytes; read and drop the rest."""
    written = 0
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            return
        if not chunk:
            return
        if written < limit:
            kept = chunk[:limit - written]
            written += len(kept)
            try:
                log.write(kept)
                if written >= limit:
                    log.write(f"\n[osguard: log truncated at {limit} bytes; the rest is dropped]\n".encode())
            except OSError:
                pass


def _bind_server_socket(path: str) -> socket.socket:
    """Bind and listen on the server's unix socket, in a folder only we can enter.

    The sandbox receives the listening socket as a file descriptor; this process connects
    to the path. The folder is ours, mode 0700 and never bound into the sandbox, so nothing
    inside can replace the socket with a symlink to another socket of the host.
    """
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not os.path.isdir(folder) or os.path.islink(folder) or info.st_uid != os.getuid():
        raise RuntimeError(f"{folder}: the control folder is not a folder of ours")
    os.chmod(folder, 0o700)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(128)
    return server


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    supervisor = Supervisor(config)
    supervisor.start()
    supervisor.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
