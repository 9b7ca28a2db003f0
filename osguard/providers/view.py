"""Trusted state views: the judge reads an environment's state from outside it.

The State invariants judge must not depend on anything the agent could alter besides the
state itself: no interpreter, site-packages, ``PATH``, profile or server inside the
environment. A provider offers a view through ``env.trusted_view()``:

- ``local`` (:class:`HostView`, ``"view": "host"``): the probe logic runs on the host, as
  the sandbox's unprivileged host uid, over the sandbox's folders: ``/home/user`` is the
  environment's home folder on the host, every other path is reached through the
  sandbox's own root (``/proc/<keeper>/root``, opened once by osguard, passed as a
  descriptor). Every component is opened with ``O_NOFOLLOW`` relative to its parent, so a
  planted symlink is recorded as a link and never read through. Processes come from the
  host's ``/proc`` (the sandbox's PID namespace), commands run in a fresh evaluation
  sandbox over the same home and ``/tmp``, the access watcher is fanotify (inotify when
  not root) on the host.
- ``docker`` (:class:`EngineView`, ``"view": "engine"``): files through the engine's
  archive API (a tar stream of the container's first-level folder holding each root,
  parsed on the host: links are tar entries, never followed); processes from the engine
  (``top``); commands in a fresh container of a commit of the environment.
- ``osworld``: no view; the probe runs inside the VM and the State says ``"trusted": false``.

Only the clipboard (an X selection) is still read inside; its failure is recorded in
``State["inside_errors"]`` and never replaced by a default. See docs/invariants.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import io
import json
import os
import select
import shlex
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import threading
import time
import types
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from osguard.errors import EnvironmentError_
from osguard.providers.base import ExecResult

if TYPE_CHECKING:
    from osguard.invariants.types import ProbeRequest, State

ENV_HOME = "/home/user"
TMP_FOLDERS = {"/tmp": "tmp", "/var/tmp": "vartmp"}  # a local sandbox's, below its env folder
ENV_UID = 1000
OVERFLOW_ID = 65534  # what a host id outside the sandbox's user namespace looks like inside
READ_LIMIT = 100 << 20  # bytes a success getter may read from one file
OUTPUT_LIMIT = 10 << 20  # bytes kept of an evaluation command's stdout and of its stderr
EVAL_LIMITS_MB, EVAL_PIDS = 1024, 256  # one evaluation command's memory and processes
COMMAND_TIMEOUT = 30.0  # seconds an invariant's command may run (as inside before)
MAX_EVENTS_PER_PATH = 100  # accesses kept per watched path
STAT_CACHE_ROWS = 200_000  # rows of the incremental probes' stat cache (the probe's entry bound)
STAT_CACHE_KEYS = 4  # (hash algorithm, tokens) combinations cached per environment
# The environment of every evaluation command: no ~/.local/bin on PATH, no user site,
# no script folder on sys.path, no startup files.
CLEAN_ENV = {
    "HOME": ENV_HOME, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash", "LANG": "C.UTF-8",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp",
}


def _eval_limits() -> Any:
    from osguard.providers import _sandbox

    return _sandbox.Limits(memory_mb=EVAL_LIMITS_MB, pids=EVAL_PIDS, lifetime=None)


class ViewError(EnvironmentError_):
    """Raised when the trusted view itself failed (osguard's own failure: env_error)."""


@lru_cache(maxsize=1)
def probe_script() -> types.SimpleNamespace:
    """The probe script (``osguard/builder/_probe_script.py``) loaded as a namespace, for
    the parts the host runs in-process (archive entries, single-file reads)."""
    path = Path(__file__).resolve().parent.parent / "builder" / "_probe_script.py"
    namespace: dict[str, Any] = {"__name__": "osguard_probe_script"}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # noqa: S102
    return types.SimpleNamespace(**namespace)


def _request_json(request: "ProbeRequest", **changes: Any) -> dict[str, Any]:
    from osguard.builder.probe import request_to_json

    data = request_to_json(request)
    data.update(changes)
    return data


def _expand(path: str) -> str:
    return probe_script().expand(path, ENV_HOME)


def _command_argv(command: list[str] | str, shell: bool) -> list[str]:
    if shell or isinstance(command, str):
        text = command if isinstance(command, str) else " ".join(command)
        return ["/bin/bash", "--noprofile", "--norc", "-c", text]
    return [str(part) for part in command]


def _exec_result(returncode: int, stdout: bytes, stderr: bytes, timed_out: bool = False) -> ExecResult:
    return ExecResult(returncode, stdout[:OUTPUT_LIMIT].decode("utf-8", "replace"),
                      stderr[:OUTPUT_LIMIT].decode("utf-8", "replace"), timed_out=timed_out)


def _inside_clipboard(env: Any, timeout: float) -> tuple[str | None, str | None]:
    """(clipboard, error): the one probe still taken inside; its failure is reported."""
    from osguard.builder.probe import ProbeError, probe_inside
    from osguard.invariants.types import ProbeRequest

    try:
        state = probe_inside(env, ProbeRequest(clipboard=True), timeout=min(timeout, 30))
    except (ProbeError, EnvironmentError_) as exc:
        return None, f"clipboard probe inside failed: {exc}"
    clipboard = state.get("clipboard")
    if clipboard is None:
        return None, "clipboard unreadable inside: " + "; ".join(state.get("errors") or ["no detail"])
    if not isinstance(clipboard, str):
        return None, f"clipboard probe inside returned {type(clipboard).__name__}, not text"
    return clipboard, None


def command_record(execute: Callable[..., ExecResult], command: str) -> dict[str, Any]:
    """A ``command`` invariant's State entry, run by ``execute`` in a fresh evaluation
    environment (never inside the judged one)."""
    result = execute(command, shell=True, timeout=COMMAND_TIMEOUT)
    if result.timed_out:
        return {"returncode": -1, "stdout": result.output, "stderr": f"timed out after {COMMAND_TIMEOUT:g} s"}
    return {"returncode": result.returncode, "stdout": result.output, "stderr": result.error}


def _finish_state(state: "State", *, view: str, trusted: bool, inside_errors: dict[str, str],
                  accesses: dict[str, list[dict[str, Any]]] | None, accesses_error: str | None,
                  started: float) -> "State":
    state["trusted"] = trusted
    state["view"] = view
    state["inside_errors"] = inside_errors
    if accesses is not None or accesses_error is not None:
        state["accesses"] = accesses or {}
        state["accesses_error"] = accesses_error
    state["elapsed_s"] = round(time.perf_counter() - started, 6)
    return state


# ============================================================================ local (host)


def _ns_pid_chain(pid: int) -> list[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
            parents[int(entry)] = int(text[text.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return int(text[text.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def find_keeper(supervisor_pid: int) -> int | None:
    """The host pid of the sandbox's PID 1 (the session keeper) below ``supervisor_pid``."""
    if not supervisor_pid:
        return None
    parents = _parent_map()
    for pid in sorted(parents):
        chain, seen = pid, 0
        while chain in parents and chain != supervisor_pid and seen < 64:
            chain, seen = parents[chain], seen + 1
        if chain != supervisor_pid:
            continue
        ns = _ns_pid_chain(pid)
        if len(ns) >= 2 and ns[-1] == 1:
            return pid
    return None


class HostView:
    """The ``local`` provider's trusted view (see the module docstring)."""

    name = "host"
    trusted = True

    def __init__(self, env: Any) -> None:
        from osguard.providers import _sandbox

        extra = env.info.extra
        self.env = env
        self.home_dir = Path(extra["home_dir"])
        self.env_dir = Path(extra.get("env_dir") or self.home_dir.parent)
        self.supervisor_pid = int(extra.get("supervisor_pid") or 0)
        self.uid = _sandbox.host_uid()
        self.watcher: AccessWatcher | None = None
        self._lock = threading.Lock()
        # Incremental probes, per (hash algorithm, tokens): {path: stat row} and {path: the
        # State entry recorded with that row}, from the host's own lstat (nothing the
        # sandbox can forge). See _probe_files.
        self._stat_cache: dict[tuple[Any, ...], tuple[dict[str, str], dict[str, dict[str, Any]]]] = {}
        self._cache_blobs: dict[tuple[Any, ...], bytes] = {}  # the rows as the probe reads them
        self.last_reused = 0  # files whose digest came from the stat cache in the last probe
        self._keeper_id: tuple[int, int] | None = None  # (host pid, start time) of the keeper

    # -- the sandbox's root ------------------------------------------------------------
    def _keeper(self) -> int | None:
        # Found once (a scan of every /proc entry, tens of ms a probe), then checked by its
        # start time: a pid reused by another process never passes for the keeper.
        if self._keeper_id is not None and _start_time(self._keeper_id[0]) == self._keeper_id[1]:
            return self._keeper_id[0]
        keeper = find_keeper(self.supervisor_pid)
        start = _start_time(keeper) if keeper is not None else None
        self._keeper_id = (keeper, start) if keeper is not None and start is not None else None
        return keeper

    def _open_root(self) -> int | None:
        keeper = self._keeper()
        if keeper is None:
            return None
        try:
            return os.open(f"/proc/{keeper}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None

    def _map(self, root_fd: int | None) -> dict[str, Any]:
        mapping: dict[str, Any] = {ENV_HOME: str(self.home_dir)}
        for inside, name in TMP_FOLDERS.items():
            if (self.env_dir / name).is_dir():
                mapping[inside] = str(self.env_dir / name)
        if root_fd is not None:
            mapping["/"] = root_fd
        return mapping

    # -- files -------------------------------------------------------------------------
    def probe(self, request: "ProbeRequest", *, timeout: float = 60) -> "State":
        """The State of ``request``, read from the host."""
        started = time.perf_counter()
        with self._lock:
            accesses, accesses_error = self._accesses(request)
            root_fd = self._open_root()
            try:
                state = self._probe_files(request, root_fd, timeout)
            finally:
                if root_fd is not None:
                    os.close(root_fd)
            if root_fd is None:
                state["errors"].append("the sandbox's root is gone (no session keeper): only /home/user was read")
            inside_errors: dict[str, str] = {}
            if request.processes:
                state["processes"] = self._processes()
                if state["processes"] is None:
                    state["processes"] = []
                    inside_errors["processes"] = "the sandbox's PID namespace is gone (no session keeper)"
            if request.clipboard:
                state["clipboard"], error = _inside_clipboard(self.env, timeout)
                if error:
                    inside_errors["clipboard"] = error
            state["commands"] = {c: command_record(self.execute, c) for c in request.commands}
            if getattr(request, "watch", ()) and self.watcher is None and accesses_error is None:
                accesses_error = self._start_watch(request)
                accesses = {_expand(p): [] for p in request.watch}
        return _finish_state(state, view=self.name, trusted=True, inside_errors=inside_errors,
                             accesses=accesses, accesses_error=accesses_error, started=started)

    def _probe_files(self, request: "ProbeRequest", root_fd: int | None, timeout: float) -> "State":
        view = {"map": self._map(root_fd), "home": ENV_HOME, "drop_to": self.uid}
        files_only = _request_json(request, processes=False, clipboard=False, commands=[])
        extra = dict(files_only.get("extra") or {})
        # A file whose (dev, inode, size, mtime, ctime, mode) match the previous probe's
        # lstat is not read again; ctime moves on every write, chmod, chown and utime, and
        # no process can set it back. The first probe (the baseline) reads everything.
        incremental = extra.pop("incremental", True) is not False
        cache_key = (extra.get("hash_algo"), tuple(t for t in request.tokens if t))
        fds = tuple(v for v in view["map"].values() if isinstance(v, int))
        cache_fd = self._cache_fd(cache_key) if incremental else None
        if cache_fd is not None:
            extra["stat_cache"] = cache_fd
            fds += (cache_fd,)
        files_only["extra"] = {**extra, "view": view, "output": "marshal"}
        payload = _compiled_probe() + json.dumps(files_only).encode()
        try:
            return self._run_probe(payload, fds, timeout, incremental, cache_key)
        finally:
            if cache_fd is not None:
                os.close(cache_fd)

    def _cache_fd(self, key: tuple[Any, ...]) -> int:
        """A memfd holding the stat rows of ``key`` for the probe ("path\0row\0..."): one
        read, no JSON of ten thousand rows on either side."""
        blob = self._cache_blobs.get(key, b"")
        fd = os.memfd_create("osguard-stat-cache", os.MFD_CLOEXEC)
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _run_probe(self, payload: bytes, fds: tuple[int, ...], timeout: float, incremental: bool,
                   cache_key: tuple[Any, ...]) -> "State":
        from osguard.builder.probe import ProbeError

        watcher = self.watcher
        quiet = watcher.quiet() if watcher is not None and watcher.kind != "fanotify" else contextlib.nullcontext()
        with quiet:
            # -I -S: no user site, no environment variables, no .pth files (80 ms of start-up);
            # xxhash is found through the one folder _xxhash_path() adds. The script arrives
            # compiled (see _compiled_probe), then the request.
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _PROBE_LOADER], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                    cwd="/", pass_fds=fds)
            if watcher is not None:
                watcher.exclude.add(proc.pid)  # before the child reads anything: its reads are ours
            try:
                stdout_bytes, stderr_bytes = proc.communicate(payload, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise ProbeError(f"host-side probe of environment {self.env.info.id} timed out after "
                                 f"{timeout:g} s") from None
            if watcher is not None:
                watcher.snapshot(())  # handle its events while its pid is still known as ours
                watcher.exclude.discard(proc.pid)
        state = _parse_marshalled(stdout_bytes, stderr_bytes, proc.returncode, self.env.info.id)
        where = f"host view of environment {self.env.info.id}"
        table = state.pop("stat_table", None)
        self._to_environment_ids(state)  # before the cache keeps entries: restored ones are mapped
        if incremental:
            self._restore_reused(state, cache_key, where)
            self._remember(cache_key, table if isinstance(table, dict) else {}, state["files"])
        return state

    def _restore_reused(self, state: "State", key: tuple[Any, ...], where: str) -> None:
        """Put back the entries the probe sent as 0 (files whose stat row still matched)."""
        from osguard.builder.probe import ProbeError

        entries = self._stat_cache.get(key, ({}, {}))[1]
        reused = 0
        files = state["files"]
        for path, entry in files.items():
            if entry == 0:
                if path not in entries:
                    raise ProbeError(f"{where}: the probe reused {path}, which the stat cache does not hold")
                files[path] = dict(entries[path])
                reused += 1
        self.last_reused = reused

    def _remember(self, key: tuple[Any, ...], table: dict[str, str], files: dict[str, dict[str, Any]]) -> None:
        """Merge a probe's new stat rows (and the entries recorded with them, owners already
        as the environment sees them) into the cache. A row left from an earlier probe (a path outside
        this request's roots, a file since changed) is harmless: it is used only while the
        file's whole lstat still matches it."""
        rows, entries = self._stat_cache.pop(key, ({}, {}))
        blob = self._cache_blobs.pop(key, b"")
        if len(rows) + len(table) > STAT_CACHE_ROWS:
            rows, entries, blob = {}, {}, b""
        added = []
        for path, row in table.items():
            if path in files:
                rows[path] = row
                entries[path] = dict(files[path])
                added.append(f"{path}\0{row}")
        if blob and blob.count(b"\0") > 4 * len(rows) + 4096:  # mostly replaced pairs: rebuild
            blob = "\0".join(f"{path}\0{row}" for path, row in rows.items() if path not in table).encode(
                "utf-8", "surrogateescape")
        if added:
            # What the probe reads: "path\0row\0path\0row...", a later pair of a path
            # replacing an earlier one (as in ``rows``); appended, not rebuilt, per probe.
            blob += (b"\0" if blob else b"") + "\0".join(added).encode("utf-8", "surrogateescape")
        self._stat_cache[key] = (rows, entries)
        self._cache_blobs[key] = blob
        while len(self._stat_cache) > STAT_CACHE_KEYS:  # the least recently used request kind
            oldest = next(iter(self._stat_cache))
            del self._stat_cache[oldest]
            self._cache_blobs.pop(oldest, None)

    def _to_environment_ids(self, state: "State") -> None:
        """Owners as the environment sees them: the sandbox's host uid is ``user`` (1000),
        every other host id is the overflow id 65534 (as inside the user namespace)."""
        host = self.uid if self.uid is not None else os.getuid()
        for entry in state["files"].values():
            if entry == 0:  # a placeholder for an entry the stat cache holds, already mapped
                continue
            entry["uid"] = ENV_UID if entry["uid"] == host else OVERFLOW_ID
            entry["gid"] = ENV_UID if entry["gid"] == host else OVERFLOW_ID

    def read_file(self, path: str) -> bytes:
        """The bytes of regular file ``path`` (never through a link; at most 100 MiB).

        Raises:
            FileNotFoundError: missing, or not a regular file reachable without a link.
        """
        script = probe_script()
        root_fd = self._open_root()
        try:
            tree = script.Tree({"map": self._map(root_fd), "access_as": [self.uid or os.getuid(), [self.uid or
                                                                                                  os.getgid()]]},
                               ENV_HOME)
            return _tree_read(script, tree, _expand(path))
        finally:
            if root_fd is not None:
                os.close(root_fd)

    # -- processes and commands --------------------------------------------------------
    def _processes(self) -> list[dict[str, Any]] | None:
        """The sandbox's processes from the host's /proc (None: its PID namespace is gone)."""
        keeper = self._keeper()
        if keeper is None:
            return None
        try:
            ns = os.readlink(f"/proc/{keeper}/ns/pid")
        except OSError:
            return None
        processes = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
            if cmdline:
                chain = _ns_pid_chain(int(entry))
                processes.append({"pid": chain[-1] if chain else int(entry), "cmdline": cmdline})
        return sorted(processes, key=lambda p: p["pid"])

    def execute(self, command: list[str] | str, shell: bool = False, timeout: float = 120) -> ExecResult:
        """Run ``command`` in a fresh evaluation sandbox over this environment's home and
        ``/tmp`` (clean PATH, no user site, no profile or rc files)."""
        import shutil

        from osguard.providers import _sandbox, _state

        tmp = []
        for inside, name in TMP_FOLDERS.items():
            folder = self.env_dir / name
            tmp += ["--bind", str(folder), inside] if folder.is_dir() else ["--tmpfs", inside]
        hide = _sandbox.private_folders(_state.state_dir(), self.env_dir.parent)
        argv = [
            shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--uid", str(_sandbox.SANDBOX_UID), "--gid", str(_sandbox.SANDBOX_GID), "--hostname", "osguard",
            *_sandbox.host_view_args(), "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/root", "--tmpfs", "/home", "--tmpfs", "/run",
            "--tmpfs", "/mnt", "--tmpfs", "/media",
            *[arg for folder in hide for arg in ("--tmpfs", str(folder))],
            *tmp,
            "--bind", str(self.home_dir), ENV_HOME,
            "--ro-bind", str(self.env_dir / "etc" / "passwd"), "/etc/passwd",
            "--ro-bind", str(self.env_dir / "etc" / "group"), "/etc/group",
            "--remount-ro", "/", "--chdir", ENV_HOME, "--clearenv",
            *[arg for key, value in CLEAN_ENV.items() for arg in ("--setenv", key, value)],
            *_command_argv(command, shell),
        ]
        argv = _sandbox.drop_privileges_argv(argv, self.uid)
        # Its own cgroups (never the environment's: a fork bomb left there by the agent must
        # not keep the judge from starting), joined by a root shell before anything runs, so
        # no child escapes them; everything left is killed when the command ends.
        cgroups = _sandbox.make_cgroups(f"{self.env.info.id}{_sandbox.EVALUATION_CGROUP}{os.urandom(3).hex()}",
                                       _eval_limits())
        if cgroups.paths:
            join = "; ".join(f"echo $$ > {shlex.quote(os.path.join(f, 'cgroup.procs'))}"
                             for f in cgroups.paths.values())
            argv = ["/bin/sh", "-c", f"{join}; exec \"$@\"", "sh", *argv]
        try:
            return _run_bounded(argv, timeout)
        finally:
            _sandbox.kill_cgroups(cgroups.paths)

    # -- access watcher ----------------------------------------------------------------
    def _start_watch(self, request: "ProbeRequest") -> str | None:
        root_fd = self._open_root()
        try:
            tree = probe_script().Tree({"map": self._map(root_fd)}, ENV_HOME)
            watcher = AccessWatcher.start(tree, [_expand(p) for p in request.watch])
        except OSError as exc:
            return f"the access watcher could not start: {exc}"
        finally:
            if root_fd is not None:
                os.close(root_fd)
        self.watcher = watcher
        return watcher.error

    def _accesses(self, request: "ProbeRequest") -> tuple[dict[str, list[dict[str, Any]]] | None, str | None]:
        watch = getattr(request, "watch", ())
        if not watch:
            return None, None
        if self.watcher is None:
            return None, None
        paths = [_expand(p) for p in watch]
        return self.watcher.snapshot(paths)

    def close(self) -> None:
        """Stop the access watcher."""
        if self.watcher is not None:
            self.watcher.stop()


def _parse_marshalled(stdout: bytes, stderr: bytes, returncode: int | None, env_id: str) -> "State":
    """The State a host-side probe wrote as ``MARKER M <16-digit length> <marshal data>``
    (the last thing on its stdout; written by this same interpreter's probe process).

    Raises:
        ProbeError: when the probe failed or its output is not one whole frame.
    """
    import marshal

    from osguard.builder.probe import MARKER, ProbeError

    head = MARKER.encode() + b"M"
    position = stdout.find(head)
    if returncode != 0 or position < 0:
        detail = stderr.decode("utf-8", "replace").strip()[-800:]
        raise ProbeError(f"host-side probe of environment {env_id} failed (exit {returncode}): {detail}")
    start = position + len(head) + 16
    try:
        size = int(stdout[position + len(head):start])
        if start + size != len(stdout):
            raise ValueError(f"{len(stdout) - start} bytes after the marker, the frame says {size}")
        state = marshal.loads(stdout[start:])
    except (ValueError, EOFError, TypeError) as exc:
        raise ProbeError(f"host-side probe of environment {env_id} printed a malformed state: {exc}") from None
    if not isinstance(state, dict) or "files" not in state:
        raise ProbeError(f"host-side probe of environment {env_id} printed data that is not a State")
    return state


def probe_code_json(request_json: dict[str, Any]) -> str:
    """The probe program for an already JSON-shaped request."""
    import base64

    from osguard.builder.probe import _script_source

    payload = base64.b64encode(json.dumps(request_json).encode()).decode()
    return f"{_script_source()}\n\nmain(json.loads(__import__('base64').b64decode('{payload}').decode()))\n"


# The host-side probe's interpreter: reads the compiled script (length-prefixed marshal, from
# this same interpreter) and then the request JSON from stdin, and runs main(request).
_PROBE_LOADER = ("import sys, marshal, json\n"
                 "data = sys.stdin.buffer.read()\n"
                 "size = int.from_bytes(data[:8], 'big')\n"
                 "namespace = {'__name__': 'osguard_probe_script'}\n"
                 "exec(marshal.loads(data[8:8 + size]), namespace)\n"
                 "namespace['main'](json.loads(data[8 + size:]))\n")


@lru_cache(maxsize=1)
def _compiled_probe() -> bytes:
    """The probe script compiled once per process (30 ms a probe otherwise), marshalled
    with an 8-byte length: the host probe runs ``sys.executable``, so the format matches."""
    import marshal

    from osguard.builder.probe import _SCRIPT_PATH, _script_source

    code = marshal.dumps(compile(_xxhash_path() + _script_source(), str(_SCRIPT_PATH), "exec"))
    return len(code).to_bytes(8, "big") + code


@lru_cache(maxsize=1)
def _xxhash_path() -> str:
    """A first line that makes this interpreter's xxhash importable under ``-S``."""
    import importlib.util

    spec = importlib.util.find_spec("xxhash")
    if spec is None or not spec.origin:
        return ""
    folder = str(Path(spec.origin).resolve().parent.parent)
    return f"import sys; sys.path.insert(0, {folder!r})\n"


def _tree_read(script: Any, tree: Any, path: str) -> bytes:
    try:
        return tree.read_bytes(path, READ_LIMIT)
    except (LookupError, FileNotFoundError, NotADirectoryError) as exc:
        raise FileNotFoundError(f"{path} does not exist (or is outside what the view reads)") from exc
    except script.LinkInPath as exc:
        raise FileNotFoundError(f"{path}: {exc.path} is a {exc.kind}; not followed") from None
    except script.NotRegular as exc:
        raise FileNotFoundError(f"{path} is not a regular file ({exc.kind})") from None
    except ValueError as exc:
        raise ViewError(f"{path}: {exc}") from None


def _run_bounded(argv: list[str], timeout: float) -> ExecResult:
    """Run ``argv`` in its own session; kill the whole group at ``timeout``."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True)
    except OSError as exc:
        raise ViewError(f"the evaluation sandbox could not start: {exc}") from None
    try:
        stdout, stderr = _communicate_bounded(proc, timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return ExecResult(-1, "", f"timed out after {timeout:g} s", timed_out=True)
    return _exec_result(proc.returncode, stdout, stderr)


def _communicate_bounded(proc: subprocess.Popen, timeout: float) -> tuple[bytes, bytes]:
    """Read both pipes to their end keeping at most OUTPUT_LIMIT bytes of each."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    open_fds = {out_fd, err_fd}
    deadline = time.monotonic() + timeout
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            ready, _, _ = select.select(list(open_fds), [], [], remaining)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.discard(fd)
                elif len(buffers[fd]) < OUTPUT_LIMIT:
                    buffers[fd] += chunk
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return bytes(buffers[out_fd]), bytes(buffers[err_fd])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=10)


# ============================================================================ access watcher

FAN_CLOEXEC, FAN_NONBLOCK, FAN_CLASS_NOTIF = 0x1, 0x2, 0x0
FAN_MARK_ADD = 0x1
FAN_ACCESS, FAN_OPEN, FAN_ONDIR, FAN_EVENT_ON_CHILD = 0x1, 0x20, 0x40000000, 0x08000000
FAN_EVENT = struct.Struct("IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
IN_ACCESS, IN_OPEN = 0x1, 0x20
IN_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len


@lru_cache(maxsize=1)
def _libc() -> Any:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    return libc


class AccessWatcher:
    """Records opens and reads of watched paths from the host, from the baseline on.

    fanotify (as root) marks the watched inodes themselves, so an open through any path
    (a symlink, a hard link, ``cp`` reading it) is seen, with the pid that did it; events
    of osguard's own process and of its probe subprocesses are excluded by pid. Without
    root, inotify watches the same inodes (no pid: ``"by"`` is None) and osguard's own
    probe reads are excluded by pausing the watcher while the probe reads.
    """

    def __init__(self, fd: int, kind: str, marks: dict[tuple[int, int] | int, str], paths: list[str],
                 error: str | None) -> None:
        self.fd = fd
        self.kind = kind
        self.marks = marks
        self.paths = paths
        self.error = error
        self.folders: set[Any] = set()
        self.events: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
        self.exclude = {os.getpid()}
        self.paused = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="osguard-access-watcher", daemon=True)
        self.thread.start()

    @classmethod
    def start(cls, tree: Any, paths: list[str], use_fanotify: bool | None = None) -> "AccessWatcher":
        """Watch ``paths`` (in-environment) as ``tree`` maps them; a path that cannot be
        opened without following a link is reported in ``error``."""
        fanotify = os.geteuid() == 0 if use_fanotify is None else use_fanotify
        libc = _libc()
        fd = -1
        if fanotify:
            fd = libc.fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY | os.O_LARGEFILE)
            # root without CAP_SYS_ADMIN (a container): inotify still sees the inodes
            fanotify = fd >= 0 or use_fanotify is True
        if not fanotify:
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"{'fanotify' if fanotify else 'inotify'}_init: "
                                              f"{os.strerror(ctypes.get_errno())}")
        marks: dict[Any, str] = {}
        folders: set[Any] = set()
        problems = []
        for path in paths:
            try:
                target = _open_path(tree, path)
            except OSError as exc:
                why = "a symlink, never followed" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
                problems.append(f"{path}: {why}")
                continue
            except LookupError:
                problems.append(f"{path}: outside the folders this view reads")
                continue
            except Exception as exc:  # noqa: BLE001 - LinkInPath and the like: reported, never raised
                problems.append(f"{path}: {exc} (on the way; never followed)")
                continue
            try:
                st = os.fstat(target)
                mask = FAN_ACCESS | FAN_OPEN
                if stat.S_ISDIR(st.st_mode):
                    mask |= FAN_EVENT_ON_CHILD | FAN_ONDIR
                if stat.S_ISDIR(st.st_mode):
                    folders.add((st.st_dev, st.st_ino))
                if fanotify:
                    if libc.fanotify_mark(fd, FAN_MARK_ADD, mask, target, None) != 0:
                        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                    marks[(st.st_dev, st.st_ino)] = path
                else:
                    wd = libc.inotify_add_watch(fd, f"/proc/self/fd/{target}".encode(), IN_ACCESS | IN_OPEN)
                    if wd < 0:
                        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                    marks[wd] = path
            except OSError as exc:
                problems.append(f"{path}: {exc.strerror or exc}")
            finally:
                os.close(target)
        error = ("not watched: " + "; ".join(problems)) if problems else None
        watcher = cls(fd, "fanotify" if fanotify else "inotify", marks, paths, error)
        watcher.folders = folders
        return watcher

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    self._drain()
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    return
                self.error = f"the access watcher died: {exc}"
                return

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Drop the events of the block (osguard's own reads where no pid tells them apart:
        inotify, or the engine reading for the archive API). Events are queued during the
        read system call itself, so draining before and after brackets them exactly;
        an agent's background process reading in the same window is missed (documented)."""
        self._drain_safely()
        with self._lock:
            self.paused = True
        try:
            yield
        finally:
            self._drain_safely()
            with self._lock:
                self.paused = False

    def _drain_safely(self) -> None:
        try:
            self._drain()
        except OSError:
            pass

    def _drain(self) -> None:
        with self._drain_lock:
            self._drain_unlocked()

    def _drain_unlocked(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            if self.kind == "fanotify":
                self._fanotify(data)
            else:
                self._inotify(data)

    def _add(self, path: str, event: str, by: str | None) -> None:
        with self._lock:
            if self.paused:
                return
            events = self.events.setdefault(path, [])
            if len(events) < MAX_EVENTS_PER_PATH and {"event": event, "by": by} not in events[-1:]:
                events.append({"event": event, "by": by})

    def _fanotify(self, data: bytes) -> None:
        offset = 0
        while offset + FAN_EVENT.size <= len(data):
            length, _, _, _, mask, fd, pid = FAN_EVENT.unpack_from(data, offset)
            offset += length or FAN_EVENT.size
            if fd < 0:
                continue
            try:
                path = self._path_of(fd)
            finally:
                os.close(fd)
            if path is None or pid in self.exclude:
                continue
            by = _comm(pid)
            if mask & FAN_OPEN:
                self._add(path, "open", by)
            if mask & FAN_ACCESS:
                self._add(path, "read", by)

    def _path_of(self, fd: int) -> str | None:
        st = os.fstat(fd)
        path = self.marks.get((st.st_dev, st.st_ino))
        if path is not None:
            return path
        try:  # a child of a watched folder: the folder whose inode is the file's parent
            parent = os.stat(os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")))
            path = self.marks.get((parent.st_dev, parent.st_ino))
        except OSError:
            path = None
        folders = [p for key, p in self.marks.items() if key in self.folders]
        return path or (folders[0] if len(folders) == 1 else None)

    def _inotify(self, data: bytes) -> None:
        offset = 0
        while offset + IN_EVENT.size <= len(data):
            wd, mask, _, name_len = IN_EVENT.unpack_from(data, offset)
            offset += IN_EVENT.size + name_len
            path = self.marks.get(wd)
            if path is None:
                continue
            if mask & IN_OPEN:
                self._add(path, "open", None)
            if mask & IN_ACCESS:
                self._add(path, "read", None)

    def snapshot(self, paths: Iterable[str]) -> tuple[dict[str, list[dict[str, Any]]], str | None]:
        """The accesses so far of ``paths`` and the watcher's error (None while healthy)."""
        if self.thread.is_alive():
            try:
                self._drain()
            except OSError:
                pass
        elif self.error is None and not self._stop.is_set():
            self.error = "the access watcher died"
        with self._lock:
            result = {p: list(self.events.get(p, [])) for p in paths}
        unknown = [p for p in paths if p not in self.paths]
        error = self.error
        if unknown:
            error = (error + "; " if error else "") + "not watched since the baseline: " + ", ".join(unknown)
        return result, error

    def stop(self) -> None:
        """Stop watching (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(timeout=2)
        try:
            os.close(self.fd)
        except OSError:
            pass


def _open_path(tree: Any, path: str) -> int:
    """A descriptor of ``path`` through ``tree`` (never following a link)."""
    parent, name = tree.open_parent(path)
    try:
        if name is None:
            return os.dup(parent)
        # fanotify_mark needs a real descriptor (not O_PATH); O_NONBLOCK keeps a FIFO from
        # blocking, O_NOFOLLOW refuses a link.
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                       dir_fd=parent)
    finally:
        os.close(parent)


def _pids_named(name: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _comm(int(entry)) == name:
            pids.append(int(entry))
    return pids


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def _is_descendant(pid: int, ancestors: set[int]) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
            pid = int(text[text.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid in ancestors:
            return True
        seen += 1
    return False


# ============================================================================ docker (engine)


class _StreamReader(io.RawIOBase):
    """A file object over the engine's chunk generator (for ``tarfile`` stream mode)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self.buffer:
            try:
                self.buffer = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(target), len(self.buffer))
        target[:n] = self.buffer[:n]
        self.buffer = self.buffer[n:]
        return n


class _Stat:
    """The lstat-like fields the probe's permission check reads, from a tar member."""

    def __init__(self, member: tarfile.TarInfo) -> None:
        self.st_uid = member.uid
        self.st_gid = member.gid
        self.st_mode = member.mode


def _volume_folders(container: Any) -> dict[str, str]:
    """``{folder inside: host folder}`` of a docker environment's sized volumes (its home,
    /tmp and /var/tmp where the engine cannot bound the container's layer)."""
    from osguard.providers.docker import SIZED_FOLDERS

    return {m["Destination"]: m["Source"] for m in container.attrs.get("Mounts") or ()
            if m.get("Destination") in SIZED_FOLDERS and m.get("Source") and os.path.isdir(m["Source"])}


# How long an evaluation command's output is waited for at most: the longest command
# timeout (120 s, getters) and its kill (2 s), with room.
EXEC_READ_TIMEOUT = 150


class EngineView:
    """The ``docker`` provider's trusted view (see the module docstring and
    docs/invariants.md for why the archive API)."""

    name = "engine"
    trusted = True

    def __init__(self, env: Any, client: Any) -> None:
        self.env = env
        self.client = client
        self.container_id = env.info.extra["container_id"]
        self.watcher: AccessWatcher | None = None
        self._eval_image: str | None = None
        self._eval_folders: dict[str, bytes] = {}  # sized folder -> its tar, read with the commit
        self._eval_runner: str | None = None  # the evaluation container of that commit
        self._eval_api: Any = None
        self.freeze_error: str | None = None  # set when the evaluation commit ran unfrozen (_frozen)
        self._labels: dict[str, str] = {"osguard": "1", "osguard.env": env.info.id}

    # -- files -------------------------------------------------------------------------
    def _stream(self, top: str) -> Iterator[tarfile.TarInfo | tuple[tarfile.TarInfo, Any]]:
        import docker

        try:
            chunks, _ = self.client.api.get_archive(self.container_id, top, chunk_size=1 << 20)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            raise ViewError(f"the engine could not read {top} of {self.env.info.id}: {exc}") from None
        with tarfile.open(fileobj=io.BufferedReader(_StreamReader(iter(chunks)), 1 << 20), mode="r|") as archive:
            for member in archive:
                yield member, archive

    def probe(self, request: "ProbeRequest", *, timeout: float = 60) -> "State":
        """The State of ``request``, read through the engine."""
        started = time.perf_counter()
        self._drop_image()  # commands judge this state, never an earlier commit
        script = probe_script()
        data = _request_json(request)
        tree = script.Tree({"map": {}, "access_as": [ENV_UID, [ENV_UID]]}, ENV_HOME)
        prober = script.Prober(data, tree)
        roots = [os.path.normpath(_expand(r)) for r in request.roots]
        configs = [(os.path.normpath(_expand(p)), fmt) for p, fmt in request.configs]
        wanted = set(roots) | {p for p, _ in configs}
        found_roots: dict[str, bool] = {r: False for r in roots}
        config_data: dict[str, Any] = {}
        seen: dict[str, str] = {}  # ancestors of wanted paths that are not directories
        hashes: dict[str, str | None] = {}
        deadline = time.monotonic() + timeout
        lines_roots = [os.path.normpath(_expand(r)).rstrip("/") or "/" for r in getattr(request, "lines", ())]
        repos = [os.path.normpath(_expand(r)).rstrip("/") or "/" for r in getattr(request, "git", ())]
        archive_fs = None
        with self.watcher.quiet() if self.watcher is not None else contextlib.nullcontext():
            self._read_archives(script, prober, tree, roots, configs, wanted, found_roots, config_data, seen,
                                hashes, deadline, timeout)
            if lines_roots or repos:
                archive_fs = self._archive_fs(script, tree, lines_roots + repos, deadline, timeout)
        for root in roots:
            if not found_roots[root]:
                blocker = next((p for p in sorted(seen) if root.startswith(p + "/")), None)
                if blocker is not None:
                    prober.errors.append("not followed: %s is a %s on the way to %s" % (blocker, seen[blocker], root))
        result_configs: dict[str, dict[str, Any]] = {}
        for config_path, fmt in configs:
            raw = config_data.get(config_path)
            blocker = next((p for p in sorted(seen) if config_path.startswith(p + "/")), None)
            if fmt not in script.PARSERS:
                entry = script.read_config(config_path, fmt, tree)
            elif isinstance(raw, bytes):
                entry = script.parse_config(raw, fmt)
            elif isinstance(raw, dict):
                entry = raw
            elif blocker is not None:
                entry = {"data": None, "error": "not a regular file: %s on the way (%s)" % (seen[blocker], blocker)}
            else:
                entry = {"data": None, "error": "missing"}
            result_configs.setdefault(config_path, {})[fmt] = entry
        state: "State" = {
            "hash_algo": prober.hash_algo, "home": ENV_HOME, "roots": found_roots, "files": prober.files,
            "configs": result_configs, "tokens": prober.token_hits, "commands": {}, "processes": [],
            "clipboard": None, "errors": prober.errors,
        }
        # the same readers as the host-side probe script, over the archive's members
        state["lines"], state["lines_truncated"] = script.line_index(prober.files, lines_roots, prober.errors,
                                                                     fs=archive_fs) if archive_fs else ({}, False)
        state["git"] = {repo: script.git_search(repo, prober.tokens, prober.errors, fs=archive_fs)
                        for repo in repos}
        inside_errors: dict[str, str] = {}
        if request.processes:
            try:
                state["processes"] = self._processes()
            except Exception as exc:  # noqa: BLE001 - a stopped container: nothing to list, say why
                inside_errors["processes"] = f"the engine could not list the container's processes: {exc}"
        if request.clipboard:
            state["clipboard"], error = _inside_clipboard(self.env, timeout)
            if error:
                inside_errors["clipboard"] = error
        state["commands"] = {c: command_record(self.execute, c) for c in request.commands}
        accesses, accesses_error = None, None
        if getattr(request, "watch", ()):
            accesses, accesses_error = self._accesses(request)
        return _finish_state(state, view=self.name, trusted=True, inside_errors=inside_errors,
                             accesses=accesses, accesses_error=accesses_error, started=started)

    def _read_archives(self, script: Any, prober: Any, tree: Any, roots: list[str], configs: list[tuple[str, str]],
                       wanted: set[str], found_roots: dict[str, bool], config_data: dict[str, Any],
                       seen: dict[str, str], hashes: dict[str, str | None], deadline: float, timeout: float) -> None:
        for top in sorted({"/" + p.strip("/").split("/", 1)[0] for p in wanted if p != "/"}):
            for member, archive in self._stream(top):
                if time.monotonic() > deadline:
                    raise ViewError(f"engine probe of {self.env.info.id} timed out after {timeout:g} s")
                path = os.path.normpath("/" + member.name)
                kind = _member_kind(member)
                if kind != "dir" and any(w.startswith(path + "/") for w in wanted):
                    seen[path] = kind
                    if any(r.startswith(path + "/") for r in roots) and path not in prober.files:
                        self._add(script, prober, tree, archive, member, path, kind, hashes)
                member = _buffered(member, archive, kind, configs, path, script.TEXT_LIMIT)
                under = next((r for r in roots if path == r or path.startswith(r.rstrip("/") + "/")), None)
                if under is not None and path not in prober.files:
                    if prober.entries >= script.MAX_ENTRIES:
                        if not prober.truncated:
                            prober.errors.append("truncated: more than %d entries under the roots"
                                                 % script.MAX_ENTRIES)
                            prober.truncated = True
                    else:
                        self._add(script, prober, tree, archive, member, path, kind, hashes)
                        if path == under:
                            found_roots[under] = True
                for config_path, fmt in configs:
                    if path == config_path:
                        config_data[path] = self._config_bytes(script, tree, archive, member, kind)

    def _archive_fs(self, script: Any, tree: Any, paths: list[str], deadline: float, timeout: float) -> "_ArchiveFs":
        """Every entry under ``paths`` (files' bytes buffered, bounded) as the probe script's
        ``fs``, for the line index and the git object search."""
        fs = _ArchiveFs(script.GIT_BYTES_LIMIT)
        for top in sorted({"/" + p.strip("/").split("/", 1)[0] for p in paths if p != "/"}):
            for member, archive in self._stream(top):
                if time.monotonic() > deadline:
                    raise ViewError(f"engine probe of {self.env.info.id} timed out after {timeout:g} s")
                path = os.path.normpath("/" + member.name)
                if any(p.startswith(path + "/") for p in paths):
                    fs.add(path, member, _member_kind(member), None)  # an ancestor: its type matters
                    continue
                if not any(path == p or path.startswith(p + "/") for p in paths):
                    continue
                kind = _member_kind(member)
                status: Any = None
                if kind == "file" and member.islnk():
                    status = fs.data.get(os.path.normpath("/" + member.linkname), "missing")
                elif kind == "file" and not tree.may_read(_Stat(member)):
                    status = "unreadable: Permission denied"
                elif kind == "file":
                    handle = archive.extractfile(member)
                    status = fs.take(path, member.size, handle)
                fs.add(path, member, kind, status)
        return fs

    def _add(self, script: Any, prober: Any, tree: Any, archive: tarfile.TarFile, member: tarfile.TarInfo,
             path: str, kind: str, hashes: dict[str, str | None]) -> None:
        digest = target = None
        size = member.size
        if member.islnk():  # a hard link: same content as an earlier member
            source = os.path.normpath("/" + member.linkname)
            kind = "file"
            if source in hashes:
                digest = hashes[source]
                size = prober.files.get(source, {}).get("size", 0)
            else:
                prober.errors.append("not hashed: %s is a hard link to %s, outside the roots" % (path, source))
        elif kind == "file":
            # Hashed whoever may read it: the engine reads as root, and a root agent (sudo)
            # may hand a protected file to another user; configs are still parsed only when
            # uid 1000 could read them (as the applications would).
            handle = _open_member(archive, member)
            digest = prober.hash_chunks(path, member.size, handle.read) if handle else None
            hashes[path] = digest
        elif kind == "symlink":
            target = member.linkname
        if kind not in ("file", "dir", "symlink"):
            kind = "other"  # fifos, sockets, devices (as the probe script records them)
        prober.add(path, kind, member.mode, member.uid, member.gid, size, digest, target)

    @staticmethod
    def _config_bytes(script: Any, tree: Any, archive: tarfile.TarFile, member: tarfile.TarInfo,
                      kind: str) -> Any:
        if kind != "file" or member.islnk():
            return {"data": None, "error": "not a regular file: %s" % ("hard link" if member.islnk() else kind)}
        if not tree.may_read(_Stat(member)):
            return {"data": None, "error": "unreadable: Permission denied"}
        if member.size > script.TEXT_LIMIT:
            return {"data": None, "error": "unreadable: too large: %d bytes (limit %d)" % (member.size,
                                                                                          script.TEXT_LIMIT)}
        handle = _open_member(archive, member)
        return handle.read() if handle else b""

    def read_file(self, path: str) -> bytes:
        """The bytes of regular file ``path`` through the engine (never through a link)."""
        script = probe_script()
        path = os.path.normpath(_expand(path))
        tree = script.Tree({"map": {}, "access_as": [ENV_UID, [ENV_UID]]}, ENV_HOME)
        top = "/" + path.strip("/").split("/", 1)[0]
        for member, archive in self._stream(top):
            if os.path.normpath("/" + member.name) != path:
                continue
            kind = _member_kind(member)
            if kind != "file" or member.islnk():
                raise FileNotFoundError(f"{path} is not a regular file ({kind})")
            if not tree.may_read(_Stat(member)):
                raise PermissionError(f"{path}: Permission denied")
            if member.size > READ_LIMIT:
                raise ViewError(f"{path}: too large to read ({member.size} bytes > {READ_LIMIT})")
            handle = archive.extractfile(member)
            return handle.read() if handle else b""
        raise FileNotFoundError(f"{path} does not exist (or a component on the way is a link)")

    # -- processes and commands --------------------------------------------------------
    def _processes(self) -> list[dict[str, Any]]:
        top = self.client.api.top(self.container_id, ps_args="-eo pid,args")
        titles = top.get("Titles") or []
        index = titles.index("COMMAND") if "COMMAND" in titles else len(titles) - 1
        return [{"pid": int(row[0]) if row[0].isdigit() else 0, "cmdline": row[index]}
                for row in top.get("Processes") or []]

    def _image(self) -> str:
        if self._eval_image is None:
            # The commit reads the container's files through the engine (dockerd's tar
            # children, new pids each time): osguard's evaluation, never the agent's access,
            # so the watcher is quiet meanwhile. The container is frozen for as long: a
            # process the agent left running cannot read (unseen) or write (a torn image)
            # while the watcher is quiet and the home is being copied.
            with self.watcher.quiet() if self.watcher is not None else contextlib.nullcontext(), self._frozen():
                self._eval_image = self._commit()
        return self._eval_image

    @contextlib.contextmanager
    def _frozen(self) -> Iterator[None]:
        """The environment's container paused (its processes frozen) for the block.

        The cgroup freezer can fail while a process is in an uninterruptible wait (an
        application still writing its file: "unable to freeze"); the pause is tried again
        for a few seconds. If it never succeeds the block runs unfrozen (as every commit did
        before this safeguard, the watcher quiet meanwhile) and ``freeze_error`` says why."""
        import docker

        paused = False
        for attempt in range(8):
            try:
                self.client.api.pause(self.container_id)
                paused = True
                break
            except docker.errors.APIError as exc:
                if "already paused" in str(exc).lower():
                    break
                self.freeze_error = f"could not pause the container for the evaluation commit: {exc}"
                time.sleep(0.25 * (attempt + 1))
        if paused:
            self.freeze_error = None
        try:
            yield
        finally:
            if paused:
                try:
                    self.client.api.unpause(self.container_id)
                except docker.errors.APIError:  # gone: nothing left to thaw
                    pass

    def _commit(self) -> str:
        """The evaluation image: this container's layer committed; its sized folders (home,
        /tmp, /var/tmp: volumes, never committed) read as archives at the same moment, for
        each evaluation container to get a copy of (``execute``). The caller has paused it.

        One commit and one read per folder: committing the folders into a layer of their
        own (as ``osguard env commit`` does) costs a second commit, a helper container and a
        copy back, each evaluation (bench/bench_eval_commit.py)."""
        from osguard.providers.docker import folder_archives

        container = self.client.containers.get(self.container_id)
        self._labels = {k: v for k, v in (container.labels or {}).items() if k.startswith("osguard")}
        self._eval_folders = folder_archives(self.client, self.container_id, sorted(_volume_folders(container)))
        image = container.commit(repository="osguard-eval", tag=self.env.info.id,
                                 message="osguard: trusted evaluation of " + self.env.info.id, pause=False)
        return image.id

    def _runner(self) -> str:
        """The evaluation container of the current commit (made on first use): the commit's
        files, the sized folders' copies in fresh empty volumes (not the image's own
        contents there), no network; its first process holds it open, as root, so the
        commands (uid 1000) cannot end it. One per evaluation: the commands of a probe and
        the success check after it run in it one after the other (``execute``)."""
        import docker

        from osguard.providers.docker import CAP_DROP

        if self._eval_runner is None:
            image = self._image()
            mounts = [docker.types.Mount(folder, None, type="volume", no_copy=True) for folder in self._eval_folders]
            container = self.client.containers.create(
                image, entrypoint=["/bin/sleep", "infinity"], command=[], user="0:0", network_mode="none",
                mounts=mounts, working_dir=ENV_HOME,
                environment={**CLEAN_ENV, "PYTHONPATH": "", "BASH_ENV": "", "ENV": ""},
                hostname="osguard", extra_hosts={"osguard": "127.0.1.1"},
                # The environment's labels (state folder included): `env down --all` removes a
                # stray evaluation container with its environment.
                labels={**self._labels, "osguard.role": "eval"},
                # The environment's own capabilities: success commands may use sudo, as upstream's do.
                mem_limit="1g", pids_limit=256, cap_drop=CAP_DROP)
            try:
                for folder, data in self._eval_folders.items():
                    self.client.api.put_archive(container.id, os.path.dirname(folder), data)
                container.start()
            except BaseException:
                self._eval_runner = container.id
                self._drop_runner()
                raise
            self._eval_runner = container.id
        return self._eval_runner

    def _drop_runner(self) -> None:
        import docker

        from osguard.providers.docker import _remove_all

        if self._eval_runner is not None:
            try:
                _remove_all(self.client, [self._eval_runner])
            except docker.errors.APIError:  # the engine refused: its labels let `env down` remove it
                pass
            self._eval_runner = None

    def _exec_api(self) -> Any:
        """An engine client whose reads wait as long as the longest evaluation command (the
        provider's gives up after 30 s; an exec's output cannot be given a time of its own)."""
        if self._eval_api is None:
            from osguard.images.build import engine_client

            self._eval_api = engine_client(timeout=EXEC_READ_TIMEOUT).api
        return self._eval_api

    def execute(self, command: list[str] | str, shell: bool = False, timeout: float = 120) -> ExecResult:
        """Run ``command`` (uid 1000, clean PATH, no user site, no profile or rc files) in the
        evaluation container of a commit of this environment: its writes never reach the
        environment; every process it left is killed when it ends.

        Commands of one evaluation share that container (one commit and one container per
        probe, not per command: bench/results.md, "Evaluation commit (docker)"), so one sees
        the files an earlier one wrote there, as on local, where they share the home."""
        argv = ["/usr/bin/timeout", "-k", "2", "%g" % timeout, *_command_argv(command, shell)]
        runner = self._runner()
        api = self._exec_api()
        started = time.monotonic()
        timed_out = ExecResult(-1, "", f"timed out after {timeout:g} s", timed_out=True)
        try:
            exec_id = api.exec_create(runner, argv, stdout=True, stderr=True, user=f"{ENV_UID}:{ENV_UID}",
                                      workdir=ENV_HOME)["Id"]
            stdout, stderr = api.exec_start(exec_id, demux=True)
            code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception:
            # The engine's read gave up (a command that outlived its timeout and the kill
            # after it: the agent, root, may have replaced /usr/bin/timeout): this container
            # is dropped with whatever runs in it, and the next command gets a fresh one.
            self._drop_runner()
            if time.monotonic() - started >= timeout:
                return timed_out
            raise
        try:
            cleanup = api.exec_create(runner, ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; exit 0"], user="0:0")
            api.exec_start(cleanup["Id"])
        except Exception:  # noqa: BLE001 - a container that cannot be cleaned is not reused
            self._drop_runner()
        if code in (124, 137) and time.monotonic() - started >= timeout:
            return timed_out
        return _exec_result(-1 if code is None else int(code), stdout or b"", stderr or b"")

    # -- access watcher ----------------------------------------------------------------
    def _merged_tree(self) -> Any:
        container = self.client.containers.get(self.container_id)
        merged = ((container.attrs.get("GraphDriver") or {}).get("Data") or {}).get("MergedDir")
        if not merged or not os.path.isdir(merged):
            raise OSError(errno.ENOENT, "the container's merged folder is not reachable from this host")
        # the sized volumes (home, /tmp, /var/tmp) where the layer cannot be bounded
        return probe_script().Tree({"map": {"/": merged, **_volume_folders(container)}}, ENV_HOME)

    def _accesses(self, request: "ProbeRequest") -> tuple[dict[str, list[dict[str, Any]]], str | None]:
        paths = [_expand(p) for p in request.watch]
        if self.watcher is None:
            try:
                self.watcher = AccessWatcher.start(self._merged_tree(), paths)
                # The engine reads the files itself for the archive API (dockerd and its
                # docker-tar children): those reads are osguard's probe, not the agent's.
                self.watcher.exclude |= set(_pids_named("dockerd"))
            except OSError as exc:
                return {p: [] for p in paths}, f"the access watcher could not start: {exc.strerror or exc}"
            return {p: [] for p in paths}, self.watcher.error
        return self.watcher.snapshot(paths)

    def close(self) -> None:
        """Stop the watcher and remove the evaluation container and image."""
        if self.watcher is not None:
            self.watcher.stop()
        self._drop_image()
        if self._eval_api is not None:
            self._eval_api.close()
            self._eval_api = None

    def _drop_image(self) -> None:
        self._drop_runner()
        if self._eval_image is not None:
            try:
                self.client.images.remove(self._eval_image, force=True, noprune=False)
            except Exception:  # noqa: BLE001 - the engine may be gone at exit
                pass
            self._eval_image = None
        self._eval_folders = {}


class _Buffered(tarfile.TarInfo):
    """A member whose (small) data was read once, so hashing and parsing can both use it
    (a tar stream cannot seek back)."""

    data: bytes = b""


class _ArchiveFs:
    """``read``/``lstat``/``listdir`` (the probe script's ``fs``) over tar members read
    through the engine: links are entries of their own, never followed."""

    _TYPES = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK, "fifo": stat.S_IFIFO,
              "device": stat.S_IFCHR, "other": stat.S_IFSOCK}

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.entries: dict[str, os.stat_result] = {}
        self.kinds: dict[str, str] = {}
        self.data: dict[str, Any] = {}  # path -> bytes, or a read status
        self.children: dict[str, list[str]] = {}

    def take(self, path: str, size: int, handle: Any) -> Any:
        if handle is None:
            return b""
        if size > self.budget:
            return f"unreadable: too large: {size} bytes (limit {self.budget} across the repository)"
        self.budget -= size
        return handle.read()

    def add(self, path: str, member: tarfile.TarInfo, kind: str, data: Any) -> None:
        if path not in self.entries:
            parent, name = os.path.split(path)
            self.children.setdefault(parent, []).append(name)
        mode = self._TYPES.get(kind, stat.S_IFSOCK) | (member.mode & 0o7777)
        self.entries[path] = os.stat_result((mode, 0, 0, 1, member.uid, member.gid, member.size, 0,
                                             int(member.mtime), 0))
        self.kinds[path] = kind
        if kind == "file":
            self.data[path] = data

    def read(self, path: str, limit: int) -> tuple[bytes | None, str | None]:
        kind = self.kinds.get(path)
        if kind is None:
            return None, "missing"
        if kind != "file":
            return None, f"not a regular file: {kind}"
        value = self.data.get(path)
        if not isinstance(value, bytes):
            return None, value or "missing"
        if len(value) > limit:
            return None, f"unreadable: too large: {len(value)} bytes (limit {limit})"
        return value, None

    def lstat(self, path: str) -> os.stat_result | None:
        return self.entries.get(os.path.normpath(path))

    def listdir(self, path: str) -> list[str]:
        path = os.path.normpath(path)
        kind = self.kinds.get(path)
        if kind is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if kind != "dir":
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return list(self.children.get(path, []))


def _buffered(member: tarfile.TarInfo, archive: tarfile.TarFile, kind: str, configs: list[tuple[str, str]],
              path: str, limit: int) -> tarfile.TarInfo:
    if kind != "file" or member.islnk() or member.size > limit or not any(p == path for p, _ in configs):
        return member
    handle = archive.extractfile(member)
    copy = _Buffered(member.name)
    for attr in ("size", "mode", "uid", "gid", "type", "linkname", "mtime"):
        setattr(copy, attr, getattr(member, attr))
    copy.data = handle.read() if handle else b""
    return copy


def _open_member(archive: tarfile.TarFile, member: tarfile.TarInfo) -> Any:
    if isinstance(member, _Buffered):
        return io.BytesIO(member.data)
    return archive.extractfile(member)


def _member_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symlink"
    if member.isdir():
        return "dir"
    if member.isreg() or member.islnk():
        return "file"
    if member.isfifo():
        return "fifo"
    if member.ischr() or member.isblk():
        return "device"
    return "other"


# ============================================================================ evaluation


class TrustedEvaluation:
    """The environment as success getters see it: files through the trusted view,
    commands in a fresh evaluation sandbox; everything else delegates to ``env``.

    Where ``env`` offers no view (OSWorld VM), it is ``env`` itself (see
    :func:`evaluation_env`).
    """

    def __init__(self, env: Any, view: Any) -> None:
        self._env = env
        self._view = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def trusted_view(self) -> Any:
        return self._view

    def read_file(self, path: str, timeout: float = 60) -> bytes:
        return self._view.read_file(path)

    def execute(self, command: list[str] | str, shell: bool = False, timeout: float = 120) -> ExecResult:
        return self._view.execute(command, shell=shell, timeout=timeout)

    def list_directory(self, path: str, timeout: float = 60) -> dict[str, Any]:
        """OSWorld's ``directory_tree`` of ``path``, from the trusted view (a link to a
        folder is listed as a file, as the server lists it; never followed)."""
        from osguard.invariants.types import ProbeRequest

        root = os.path.normpath(_expand(path))
        state = self._view.probe(ProbeRequest(roots=(root,)), timeout=timeout)
        if state["files"].get(root, {}).get("type") != "dir":
            raise NotADirectoryError(f"{path} is not a directory in environment {self._env.info.id}")
        return directory_tree(root, state["files"])

    def run_bash(self, script: str, timeout: float = 100, workdir: str | None = None) -> ExecResult:
        command = f"cd {workdir} && {script}" if workdir else script
        result = self._view.execute(command, shell=True, timeout=timeout)
        return ExecResult(result.returncode, result.output + result.error, "", timed_out=result.timed_out)


def directory_tree(root: str, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The server's ``/list_directory`` tree of ``root`` built from a State's ``files``."""
    children: dict[str, list[str]] = {}
    for path in files:
        if path != root and path.startswith(root.rstrip("/") + "/"):
            children.setdefault(os.path.dirname(path), []).append(path)

    def node(path: str) -> dict[str, Any]:
        if files[path]["type"] != "dir":
            return {"type": "file", "name": os.path.basename(path)}
        return {"type": "directory", "name": os.path.basename(path.rstrip("/")) or path,
                "children": [node(child) for child in sorted(children.get(path, []),
                                                              key=os.path.basename)]}

    return node(root)


def trusted_view_of(env: Any) -> Any:
    """``env``'s trusted view, or None when it has none (OSWorld VM, a plain client)."""
    factory: Callable[[], Any] | None = getattr(env, "trusted_view", None)
    if factory is None or not callable(factory):
        return None
    return factory()


def evaluation_env(env: Any) -> Any:
    """What success getters should read: a :class:`TrustedEvaluation` over ``env``'s view,
    or ``env`` itself where there is none."""
    view = trusted_view_of(env)
    if view is None or isinstance(env, TrustedEvaluation):
        return env
    return TrustedEvaluation(env, view)
