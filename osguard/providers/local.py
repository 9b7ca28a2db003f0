"""``local``: osguard's embedded default environment, a bubblewrap sandbox on this machine.

No Docker, no VM: each environment is a set of private namespaces (bubblewrap) over a
read-only view of the host, with

- a fresh private home, seen as ``/home/user`` inside (owned by ``user``, uid 1000);
- the host's file system read-only; /root, /home, /run, /mnt, /media hidden; private
  /tmp and /var/tmp;
- no network (its own loopback only): the server listens on a unix socket and a host
  process forwards ``127.0.0.1:PORT`` to it;
- its own PID namespace (the session keeper is PID 1, so ``kill -9 -1`` inside cannot
  end it) and cgroup limits on memory and processes, plus a lifetime;
- where Xvfb is installed, a private X display ``:0`` with a window manager and the
  AT-SPI bus, so pyautogui actions, screenshots and accessibility trees work; without
  it the environment is headless (shell actions only) and its capabilities say so.

Why bubblewrap: it is a single small setuid-free binary (Debian's ``bubblewrap``) that
builds exactly these namespaces from a command line, starts in ~10 ms, and kills the
whole sandbox when its parent dies (``--die-with-parent``). See docs/environments.md.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from osguard.errors import EnvironmentError_, OsguardError, ProviderUnavailable
from osguard.providers import _sandbox, _state, _terminal
from osguard.providers.base import Capabilities, EnvironmentInfo
from osguard.providers.client import HttpEnvironment, capabilities_from_json
from osguard.server.limits import DISK_MB, ENV_LOG_BYTES

# Desktop applications a variant may require, by the executables that provide them.
APP_EXECUTABLES: dict[str, tuple[str, ...]] = {
    "libreoffice": ("libreoffice", "soffice"),
    "thunderbird": ("thunderbird",),
    "vscode": ("code",),
    "gimp": ("gimp",),
    "vlc": ("vlc",),
    "nautilus": ("nautilus",),  # GNOME Files
    "chrome": ("google-chrome", "chromium", "chromium-browser"),
    "firefox": ("firefox", "firefox-esr"),
    "xterm": ("xterm",),
    "gedit": ("gedit",),
}
HOME_FOLDERS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Public", "Templates", "Videos")
STOP_GRACE_SECONDS = 5.0
OWNER_FILE = "owner.json"  # in each environment folder, written before anything else
STRAY_GRACE_SECONDS = 30.0  # a folder without owner.json younger than this may be starting
SUPERVISOR_SCRIPT = str(Path(__file__).resolve().with_name("_supervisor.py"))


class LocalProvider:
    """Starts local bubblewrap environments (see the module docstring).

    Args:
        gui: True to require a display, False for headless, None (default) for a display
            when Xvfb is installed.
        geometry: screen size ``WIDTHxHEIGHT`` (OSWorld's is 1920x1080).
        memory_mb: memory limit of the whole environment.
        pids: process (and thread) limit of the whole environment.
        lifetime: seconds after which the environment is ended (None: never).
        keep_home: keep the environment's home folder on the host after it ends.
        python: the interpreter that runs the server inside (the system Python, whose
            Debian packages provide Xlib, Pillow and pyatspi).
        use_cgroups: limit memory and processes with cgroup v1 where available; False
            (or a host without them) falls back to RLIMIT_NPROC for processes.
        detached: the environment outlives the process that started it (``osguard env
            up``, ``build --keep``); by default it ends when that process ends, however.
        disk_mb: writable space in MiB (``osguard.server.limits.DISK_MB``): the home is a
            sparse ext4 image of that size loop-mounted (as root), else a tmpfs of that
            size; /tmp and /var/tmp are tmpfs of that size each (in memory).
    """

    name = "local"
    _probe_cache: dict[str, str | None] = {}

    def __init__(
        self,
        *,
        gui: bool | None = None,
        geometry: str = "1920x1080",
        memory_mb: int = 4096,
        pids: int = 1024,
        lifetime: float | None = 12 * 3600,
        keep_home: bool = False,
        python: str = "/usr/bin/python3",
        use_cgroups: bool = True,
        disk_mb: int = DISK_MB,
        detached: bool = False,
    ) -> None:
        if not isinstance(geometry, str) or "x" not in geometry or not all(
            part.isdigit() for part in geometry.split("x", 1)
        ):
            raise OsguardError(f"local provider: geometry must look like 1920x1080, got {geometry!r}")
        self.gui = gui
        self.geometry = geometry
        if isinstance(disk_mb, bool) or not isinstance(disk_mb, int) or disk_mb < 16:
            raise OsguardError(f"local provider: disk_mb must be a whole number of MiB, at least 16, got {disk_mb!r}")
        self.limits = _sandbox.Limits(memory_mb=memory_mb, pids=pids, lifetime=lifetime, disk_mb=disk_mb)
        self.keep_home = keep_home
        self.python = python
        self.use_cgroups = use_cgroups
        self.detached = detached

    def headless(self) -> "LocalProvider":
        """The same provider without a display (a fork of a variant that needs none starts
        faster without Xvfb and its window manager)."""
        import copy

        other = copy.copy(self)
        other.gui = False
        return other

    # -- availability -------------------------------------------------------------------
    def available(self) -> str | None:
        """None when bubblewrap sandboxes can run here, else why not."""
        key = f"{self.python}|{self.gui}"
        if key in self._probe_cache:
            return self._probe_cache[key]
        reason = self._probe()
        self._probe_cache[key] = reason
        return reason

    def _probe(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return "the local provider needs Linux namespaces (this is not Linux)"
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return "bubblewrap is not installed (apt install bubblewrap)"
        if not os.access(self.python, os.X_OK):
            return f"{self.python} is missing: the server inside runs on the system Python (apt install python3)"
        if self.gui and not shutil.which("Xvfb"):
            return "gui=True needs Xvfb (apt install xvfb openbox)"
        try:
            argv = _sandbox.drop_privileges_argv(
                [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--uid", "1000", "true"], _sandbox.host_uid())
            probe = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap cannot run: {exc}"
        if probe.returncode != 0:
            return f"bubblewrap cannot create namespaces here: {probe.stderr.strip() or probe.returncode}"
        return None

    def nature(self, image: str | None = None) -> Capabilities:
        """What this provider's sandboxes offer by nature here, without starting one: a
        display when gui is on and Xvfb is installed, the applications installed on the host
        (the sandbox runs the host's /usr), never root. See ``osguard.providers.nature``."""
        reason = self.available()
        if reason is not None:
            raise ProviderUnavailable(reason)
        gui = self.gui is not False and bool(shutil.which("Xvfb"))  # None: a display when Xvfb is there
        accessibility = False
        if gui and shutil.which("dbus-daemon"):
            try:
                accessibility = subprocess.run([self.python, "-c", "import pyatspi"], capture_output=True,
                                               timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                accessibility = False
        apps = frozenset(app for app, executables in APP_EXECUTABLES.items()
                         if gui and any(shutil.which(exe) for exe in executables))
        notes = [] if gui else ["no gui: " + ("headless provider" if self.gui is False else "Xvfb is not installed")]
        return Capabilities(gui=gui, accessibility=accessibility, root=False, apps=apps,
                            recording=bool(gui and shutil.which("ffmpeg")),
                            notes=tuple(notes + ["no root: actions run as uid 1000 without capabilities "
                                                 "(use --provider docker for root)"]))

    # -- start --------------------------------------------------------------------------
    def start(self, *, image: str | None = None, timeout: float = 60, template: Any = None) -> HttpEnvironment:
        """Start a fresh sandbox and return its client once the server answers.

        Args:
            template: a ``osguard.builder.template.Template`` made on this provider: its
                files are restored into the new sandbox's home, /tmp and /var/tmp before
                its session starts (the sandbox is as fresh as any other).

        Raises:
            ProviderUnavailable: bubblewrap (or the system Python) cannot run here.
            EnvironmentError_: the sandbox did not come up within ``timeout`` seconds
                (the message carries the end of its log).
        """
        if image is not None:
            raise ProviderUnavailable(
                f"the local provider has no images (got image={image!r}); use --provider docker for images"
            )
        reason = self.available()
        if reason is not None:
            raise ProviderUnavailable(f"provider 'local' cannot run here: {reason}")
        started = time.monotonic()
        env_id = "local-" + secrets.token_hex(4)
        _state.state_dir().mkdir(parents=True, exist_ok=True)
        env_dir = _sandbox.data_root(_state.state_dir()) / env_id
        home_dir, run_dir, etc_dir = env_dir / "home", env_dir / "run", env_dir / "etc"
        env_dir.mkdir(parents=True)
        # First of all, who owns this folder and which cgroups it will have: a start killed
        # at any later instant leaves leftovers that `env list` can prove dead and remove.
        owner = _state.owner()
        planned = {"id": env_id, "owner": owner, "env_dir": str(env_dir),
                   "cgroups": _sandbox.cgroup_plan(env_id, self.use_cgroups),
                   "record_path": str(_state.record_path(env_id)),
                   "log_path": str(_state.state_dir() / f"{env_id}.log")}
        (env_dir / OWNER_FILE).write_text(json.dumps(planned))
        try:
            return self._start(env_id, env_dir, home_dir, run_dir, etc_dir, owner, started, timeout, template)
        except BaseException:
            _cleanup(planned)  # idempotent: whatever the failure left (the steps below clean their own)
            raise

    def _start(self, env_id: str, env_dir: Path, home_dir: Path, run_dir: Path, etc_dir: Path,
               owner: dict[str, Any], started: float, timeout: float, template: Any = None) -> HttpEnvironment:
        home_dir.mkdir(parents=True, exist_ok=True)
        # The server's socket: ours alone, never bound into the sandbox (the supervisor
        # connects to it by path, so the sandbox must not be able to touch this folder).
        run_dir.mkdir(mode=0o700, exist_ok=True)
        # /tmp and /var/tmp are host folders too, so the judge reads them from outside.
        tmp_dirs = (env_dir / "tmp", env_dir / "vartmp")
        for folder in tmp_dirs:
            folder.mkdir(parents=True, exist_ok=True)
        # the terminal recorder's FIFO: bound read-only-for-the-sandbox (the folder is ours)
        term_dir = env_dir / "term"
        term_dir.mkdir(mode=0o755, exist_ok=True)
        for folder in (env_dir.parent, env_dir):
            os.chmod(folder, 0o755)  # whatever the umask: the sandbox's uid must traverse them
        sandbox_uid = _sandbox.host_uid()
        # The quota, on host mounts the judge reads in place: the home on a sparse ext4
        # image where we may make one, else a sized tmpfs; /tmp and /var/tmp sized tmpfs.
        # Unprivileged, nothing can be mounted here: the home, /tmp and /var/tmp are then
        # private sized tmpfs inside the sandbox (in memory; see docs/environments.md).
        limit = self.limits.disk_mb
        disk_note = _sandbox.make_home_image(env_dir / "home.img", home_dir, limit, sandbox_uid)
        if disk_note is not None and _sandbox.sized_tmpfs(home_dir, limit, sandbox_uid, mode="0755"):
            home_in_memory = None
        else:
            home_in_memory = None if disk_note is None else HOME_FOLDERS
        host_tmp = tmp_dirs if all(_sandbox.sized_tmpfs(f, limit, sandbox_uid) for f in tmp_dirs) else None
        if host_tmp is None:  # private tmpfs inside instead: the view reads them through the sandbox's root
            for folder in tmp_dirs:
                _sandbox.unmount_under(folder)
                os.rmdir(folder)
        if home_in_memory is None:
            for name in HOME_FOLDERS:
                (home_dir / name).mkdir(exist_ok=True)
        _sandbox.write_etc(etc_dir)
        if template is not None:
            if home_in_memory is not None or host_tmp is None:
                raise EnvironmentError_("local: templates need the home, /tmp and /var/tmp on the host "
                                        "(run as root); build each row fresh instead")
            _restore_template(template, env_dir)
        _sandbox.give_to(sandbox_uid, home_dir, *(host_tmp or ()))
        for folder in host_tmp or ():
            os.chmod(folder, 0o1777)
        headless = self.gui is False or not shutil.which("Xvfb")
        argv = _sandbox.bwrap_argv(
            env_id=env_id, bwrap=shutil.which("bwrap") or "bwrap", home_dir=home_dir,
            python_dir=_sandbox.python_tree(self.python), etc_dir=etc_dir, system_python=self.python,
            geometry=self.geometry, headless=headless,
            hide=_sandbox.private_folders(_state.state_dir(), env_dir.parent), tmp_dirs=host_tmp,
            term_dir=term_dir, disk_mb=limit, home_in_memory=home_in_memory,
        )
        cgroups = _sandbox.make_cgroups(env_id, self.limits, enabled=self.use_cgroups)
        config = {
            "id": env_id,
            "argv": argv,
            "socket_path": str(run_dir / _sandbox.SOCKET_NAME),
            "cgroups": cgroups.to_json(),
            "lifetime": self.limits.lifetime,
            "log_path": str(_state.state_dir() / f"{env_id}.log"),
            "log_limit": ENV_LOG_BYTES,
            "env_dir": str(env_dir),
            "record_path": str(_state.record_path(env_id)),
            "keep_home": self.keep_home,
            "host_uid": sandbox_uid,
            # Without a pids cgroup, RLIMIT_NPROC still stops a fork bomb (approximately).
            "nproc_fallback": None if "pids" in cgroups.paths else _sandbox.nproc_fallback(
                sandbox_uid, self.limits.pids),
        }
        config["owner"] = owner  # env down --all keeps it while this process runs
        # The lease: the supervisor holds the read end of a pipe whose only write end stays
        # in this process. However this process ends (even SIGKILL), the supervisor reads
        # EOF and ends the environment. Detached environments (`env up`) have none.
        lease_read, lease_write = (None, None) if self.detached else os.pipe()
        config["lease_fd"] = lease_read
        config_path = env_dir / "supervisor.json"
        config_path.write_text(json.dumps(config))
        try:
            supervisor = subprocess.Popen(
                [sys.executable, "-S", SUPERVISOR_SCRIPT, str(config_path)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True, pass_fds=() if lease_read is None else (lease_read,),
            )
        except BaseException:
            for fd in (lease_read, lease_write):
                if fd is not None:
                    os.close(fd)
            raise
        if lease_read is not None:
            os.close(lease_read)
        try:
            hello = _read_line(supervisor, timeout)
        except BaseException:
            _Stopper(config, supervisor.pid, supervisor, lease_write)()
            raise
        port = int(hello["port"])
        endpoint = f"http://127.0.0.1:{port}"
        info = EnvironmentInfo(
            id=env_id, provider=self.name, endpoint=endpoint,
            extra={"supervisor_pid": supervisor.pid, "home_dir": str(home_dir), "env_dir": str(env_dir),
                   "cgroups": cgroups.to_json(),
                   "files_on_host": home_in_memory is None and host_tmp is not None},
        )
        stopper = _Stopper(config, supervisor.pid, supervisor, lease_write)
        env = HttpEnvironment(endpoint, info, Capabilities(), stopper, view_factory=_host_view)
        # what GUI terminals show, recorded on the host (osguard.providers._terminal); the
        # FIFO sits in a folder the sandbox cannot write, and the host holds it open from
        # here on (never resolving the path again)
        env.terminal = stopper.terminal = _terminal.TerminalRecorder(
            term_dir / "terminal.fifo", f"{_sandbox.SANDBOX_RUN}/term/terminal.fifo", owner=sandbox_uid)
        remaining = max(1.0, timeout - (time.monotonic() - started))
        try:
            server = _wait_ready(env, supervisor, remaining)
        except EnvironmentError_ as exc:
            _kill_supervisor(supervisor.pid, supervisor)  # its log is complete once it is gone
            log_tail = _tail(Path(config["log_path"]))
            env.stop()
            Path(config["log_path"]).unlink(missing_ok=True)
            raise EnvironmentError_(f"local environment {env_id} did not start: {exc}{log_tail}") from None
        except BaseException:  # Ctrl-C while waiting: never leave a half-started sandbox behind
            env.stop()
            raise
        env.capabilities = self._capabilities(
            server, cgroups.notes + ([f"disk: {disk_note}"] if disk_note else []))
        _state.write_record({
            "id": env_id, "provider": self.name, "endpoint": endpoint, "created": time.time(),
            "capabilities": env.capabilities.to_json(), "info_extra": info.extra,
            "supervisor_pid": supervisor.pid, "cgroups": cgroups.to_json(), "env_dir": str(env_dir),
            "config_path": str(config_path), "owner": owner, "detached": self.detached,
        })
        return env

    def _capabilities(self, server: dict[str, Any], limit_notes: list[str]) -> Capabilities:
        gui = bool(server.get("gui"))
        apps = frozenset(
            app for app, executables in APP_EXECUTABLES.items()
            if gui and any(shutil.which(exe) for exe in executables)
        )
        return Capabilities(
            gui=gui,
            accessibility=bool(server.get("accessibility")),
            root=False,
            apps=apps,
            recording=bool(server.get("recording")),
            notes=tuple(list(server.get("notes", [])) + limit_notes
                        + ["no root: actions run as uid 1000 without capabilities (use --provider docker for root)"]),
        )

    def template_support(self, env: HttpEnvironment) -> str | None:
        """None when a template captured in ``env`` can be restored into new sandboxes like
        it, else why not (the home and /tmp are then private tmpfs inside the sandbox)."""
        if not env.info.extra.get("files_on_host"):
            return "the home, /tmp and /var/tmp are not on the host (not root)"
        return None

    def copy_files(self, source: HttpEnvironment, dest: HttpEnvironment, paths: list[str]) -> int | None:
        """Copy ``paths`` (absolute, as the sandboxes see them) of ``source`` into ``dest``
        on the host side, where both keep their home, /tmp and /var/tmp (as root): no
        archive goes through either sandbox's server. Modes, owners and nanosecond times
        are kept; sockets are left out. Paths outside those folders are the host's
        read-only files, the same in both sandboxes, and are not copied.

        Returns:
            The bytes of the tar moved, or None when the files are not on the host here
            (the caller then copies through the ``Environment`` API).

        Raises:
            EnvironmentError_: tar failed, or the state held an entry the host must not
                extract (a member below a symlink of the archive, a device).
        """
        dirs = []
        for env in (source, dest):
            if not env.info.extra.get("files_on_host") or not env.info.extra.get("env_dir"):
                return None
            dirs.append(Path(env.info.extra["env_dir"]))
        tar = shutil.which("tar")
        if tar is None:
            return None
        by_root: dict[str, list[str]] = {}
        for path in paths:
            for inside, host in _HOST_FOLDERS:
                if path == inside or path.startswith(inside + "/"):
                    by_root.setdefault(host, []).append(path[len(inside) + 1:] or ".")
                    break
        moved = 0
        for host, names in sorted(by_root.items()):
            src, dst = dirs[0] / host, dirs[1] / host
            made = subprocess.run([tar, "--format=posix", "-C", str(src), "-cf", "-", "--ignore-failed-read",
                                   "--warning=no-file-changed", "--warning=no-file-ignored", "--", *names],
                                  capture_output=True, timeout=120)
            if made.returncode not in (0, 1):  # 1: a file changed while read (still archived)
                raise EnvironmentError_(f"local: copying {host} of {source.info.id} failed: "
                                        f"{made.stderr.decode(errors='replace').strip()[-300:]}")
            _check_host_archive(made.stdout, source.info.id)
            done = subprocess.run([tar, "-C", str(dst), "-xpf", "-", "--same-owner", "--delay-directory-restore"],
                                  input=made.stdout, capture_output=True, timeout=120)
            if done.returncode != 0:
                raise EnvironmentError_(f"local: copying {host} into {dest.info.id} failed: "
                                        f"{done.stderr.decode(errors='replace').strip()[-300:]}")
            moved += len(made.stdout)
        return moved

    # -- records ------------------------------------------------------------------------
    def attach(self, record: dict[str, Any]) -> HttpEnvironment:
        """A client for an environment started by another process (from its state record)."""
        config_path = Path(record.get("config_path") or "/nonexistent")
        if config_path.is_file():
            config = json.loads(config_path.read_text())
        else:  # the environment's folder is gone already; clean up what the record names
            config = {"id": record["id"], "cgroups": record.get("cgroups", {}), "env_dir": record.get("env_dir", ""),
                      "record_path": str(_state.record_path(record["id"]))}
        info = EnvironmentInfo(id=record["id"], provider=self.name, endpoint=record["endpoint"],
                               extra=dict(record.get("info_extra", {})))
        return HttpEnvironment(record["endpoint"], info, capabilities_from_json(record.get("capabilities", {})),
                               _Stopper(config, int(record.get("supervisor_pid", 0)), None),
                               view_factory=_host_view)

    def teardown(self, record: dict[str, Any]) -> None:
        """End the environment of ``record`` (also strays whose supervisor died)."""
        self.attach(record).stop()


def _restore_template(template: Any, env_dir: Path) -> None:
    """Extract a template's archive (paths under /home/user, /tmp, /var/tmp) into a new
    environment's host folders, keeping modes and nanosecond times (GNU tar sets folders'
    times after their contents); owners are set by ``give_to`` right after."""
    if not template.archive:
        return
    tar = shutil.which("tar")
    if tar is None:
        raise EnvironmentError_("local: restoring a template needs GNU tar (apt install tar)")
    argv = [tar, "-C", str(env_dir), "-xpf", "-", "--no-same-owner", "--delay-directory-restore",
            r"--transform=s,^home/user\(/\|$\),home\1,S", r"--transform=s,^var/tmp\(/\|$\),vartmp\1,S"]
    result = subprocess.run(argv, input=template.archive, capture_output=True, timeout=120)
    if result.returncode != 0:
        raise EnvironmentError_(f"local: restoring the template of {template.variant_id} failed: "
                                f"{result.stderr.decode(errors='replace').strip()[-400:]}")


# Where a sandbox's writable folders live in its environment folder (longest first).
_HOST_FOLDERS = (("/home/user", "home"), ("/var/tmp", "vartmp"), ("/tmp", "tmp"))


def _check_host_archive(data: bytes, env_id: str) -> None:
    """Refuse, before extracting it on the host as root, an archive of a sandbox's files
    with a member that is not a file, folder, symlink or hard link, that names ``..``, or
    that lies below a symlink of the archive (extracting through it would write where it
    points). A real file system's listing has none; a sandbox racing the copy could."""
    import io
    import tarfile

    links: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive:
            name = member.name.strip("/").removeprefix("./")
            bad = ""
            if ".." in name.split("/") or member.name.startswith("/"):
                bad = "names .. or an absolute path"
            elif not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                bad = "not a file, folder or link"
            elif member.islnk() and (".." in member.linkname.split("/") or member.linkname.startswith("/")):
                bad = "a hard link out of the archive"
            elif any(name.startswith(link + "/") for link in links):
                bad = "below a symlink of the archive"
            if bad:
                raise EnvironmentError_(f"local: refusing to copy {member.name!r} of {env_id}: {bad}")
            if member.issym():
                links.add(name)


def _host_view(env: HttpEnvironment) -> Any:
    """The trusted view of a local environment: its host-side folders (providers/view.py)."""
    from osguard.providers.view import HostView

    return HostView(env) if env.info.extra.get("home_dir") else None


class _Stopper:
    """Ends one environment: supervisor first (it cleans up), then a forced cleanup."""

    def __init__(self, config: dict[str, Any], supervisor_pid: int, proc: subprocess.Popen | None,
                 lease: int | None = None) -> None:
        self.config = config
        self.supervisor_pid = supervisor_pid
        self.proc = proc
        self.terminal: Any = None
        self.lease = lease

    def __call__(self) -> None:
        if self.terminal is not None:
            self.terminal.close()
        if self.supervisor_pid:
            _kill_supervisor(self.supervisor_pid, self.proc)
        if self.lease is not None:
            os.close(self.lease)
            self.lease = None
        _cleanup(self.config)


def _is_supervisor(pid: int) -> bool:
    """True when ``pid`` is an osguard supervisor (a recorded pid may have been reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(cmdline) > 2 and cmdline[2] == SUPERVISOR_SCRIPT.encode()


def _kill_supervisor(pid: int, proc: subprocess.Popen | None) -> None:
    if proc is None and not _is_supervisor(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not _state.pid_alive(pid):
            return
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc is not None:
        proc.wait(timeout=5)


def _cleanup(config: dict[str, Any]) -> None:
    from osguard.providers._supervisor import cleanup_dirs

    if config.get("cgroups"):
        _sandbox.kill_environment_cgroups(config["cgroups"])
    if config.get("env_dir"):
        cleanup_dirs(config)
    else:
        _state.remove_record(config["id"])


def _read_line(proc: subprocess.Popen, timeout: float) -> dict[str, Any]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    ready, _, _ = select.select([fd], [], [], timeout)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if not line:
        raise EnvironmentError_(
            f"the local supervisor did not report its port within {timeout:g} s "
            f"(exit status {proc.poll()})"
        )
    return json.loads(line)


def _wait_ready(env: HttpEnvironment, supervisor: subprocess.Popen, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if supervisor.poll() is not None:
            raise EnvironmentError_(f"the sandbox exited during start-up{last}")
        try:
            return env.server_info(timeout=max(0.5, deadline - time.monotonic()))
        except EnvironmentError_ as exc:
            last = f" ({exc})"
            time.sleep(0.02)
    raise EnvironmentError_(f"the server did not answer within {timeout:g} s{last}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return ("\nlast lines of " + str(path) + ":\n" + "\n".join(text)) if text else ""


def _supervisors(state: Path) -> dict[str, int]:
    """Running supervisors of this state folder's environments: ``{env id: pid}``."""
    data = _sandbox.data_root(state).resolve() if state.is_dir() else None
    found: dict[str, int] = {}
    if data is None:
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) < 4 or argv[2] != SUPERVISOR_SCRIPT.encode():
            continue
        config_path = Path(argv[3].decode(errors="replace"))
        if config_path.parent.parent.resolve() == data:
            found[config_path.parent.name] = int(entry.name)
    return found


def _folder_config(folder: Path) -> dict[str, Any] | None:
    """What an environment folder says about itself (supervisor.json, else owner.json)."""
    for name in ("supervisor.json", OWNER_FILE):
        try:
            config = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            config.setdefault("id", folder.name)
            config.setdefault("env_dir", str(folder))
            config.setdefault("record_path", str(_state.record_path(folder.name)))
            return config
    return None


def _stray_state(folder: Path, config: dict[str, Any] | None, force: bool) -> str | None:
    """None when the unrecorded environment ``folder`` is provably dead (or ``force``),
    else why it is left alone."""
    if force:
        return None
    if config is None:
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            return None
        return "being created" if age < STRAY_GRACE_SECONDS else None
    owner = config.get("owner")
    if owner is not None and _state.owner_alive(owner):
        return f"starting in pid {owner.get('pid') if isinstance(owner, dict) else '?'}"
    return None


def clean_strays(force: bool = False) -> list[str]:
    """End environments of this state folder that have no record and whose owner is dead,
    and remove their leftovers.

    Covers a start killed at any instant: supervisors whose record was never written
    (or was deleted), and folders, home mounts and cgroups of environments whose
    supervisor died without cleaning up. An unrecorded environment whose owner still
    runs is being started and is left alone, unless ``force``. Environments recorded in
    another state folder are never touched.

    Returns:
        The ids cleaned.
    """
    state = _state.state_dir().resolve()
    recorded = {record["id"] for record in _state.read_records()}
    cleaned: list[str] = []
    supervisors = _supervisors(state)
    data = _sandbox.data_root(state) if state.is_dir() else state
    folders = sorted(p for p in data.iterdir() if p.is_dir() and p.name.startswith("local-")) \
        if data.is_dir() else []
    for folder in folders:
        if folder.name in recorded:
            continue
        config = _folder_config(folder)
        if _stray_state(folder, config, force) is not None:
            continue
        if folder.name in supervisors:
            _kill_supervisor(supervisors[folder.name], None)
        _cleanup(config or {"id": folder.name, "env_dir": str(folder),
                            "record_path": str(_state.record_path(folder.name))})
        cleaned.append(folder.name)
    if state.is_dir():
        for log in state.glob("local-*.log"):
            if log.stem not in recorded and not (data / log.stem).exists():
                log.unlink(missing_ok=True)
    return cleaned


def clean_dead_records() -> list[str]:
    """Remove records of local environments whose supervisor is gone (killed with
    SIGKILL, say), with their folders and cgroups; returns their ids."""
    cleaned = []
    for record in _state.read_records():
        if record.get("provider") != "local":
            continue
        pid = int(record.get("supervisor_pid") or 0)
        if pid and _is_supervisor(pid):
            continue
        LocalProvider().teardown(record)
        cleaned.append(record["id"])
    return cleaned


def leftovers() -> list[dict[str, Any]]:
    """Unrecorded environments of this state folder that could not be proved dead:
    ``{"id", "state"}`` (e.g. being started by a live process)."""
    state = _state.state_dir().resolve()
    data = _sandbox.data_root(state) if state.is_dir() else state
    recorded = {record["id"] for record in _state.read_records()}
    rows = []
    if data.is_dir():
        for folder in sorted(p for p in data.iterdir() if p.is_dir() and p.name.startswith("local-")):
            if folder.name in recorded:
                continue
            why = _stray_state(folder, _folder_config(folder), False)
            rows.append({"id": folder.name, "provider": "local",
                         "state": why or "dead, not cleaned (see `osguard env down --all`)"})
    return rows
