"""Building blocks of the local sandbox: the bubblewrap command line, the Python tree
bound into it, the generated user database, and cgroup limits.

Kept apart from ``local.py`` because the detached supervisor process imports it too and
must start fast (stdlib only).
"""

from __future__ import annotations

import hashlib
import importlib.util
import glob
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOME = "/home/user"
SANDBOX_RUN = "/run/osguard"  # runtime dir inside: the server's Python tree and `python`
SOCKET_NAME = "server.sock"  # on the host, in the environment's control folder (never bound inside)

# pyautogui and its pure-Python dependencies, copied from the host interpreter so that
# ``python -c "import pyautogui; ..."`` works with the environment's /usr/bin/python3.
PYAUTOGUI_MODULES = (
    "pyautogui", "pymsgbox", "pytweening", "pyscreeze", "pygetwindow", "pyrect",
    "mouseinfo", "pyperclip", "Xlib", "six",
)

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    f"user:x:{SANDBOX_UID}:{SANDBOX_GID}:user:{SANDBOX_HOME}:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\nuser:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"


def cache_root() -> Path:
    """osguard's cache folder on the host (``$XDG_CACHE_HOME/osguard``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "osguard"


def _server_source() -> Path:
    return Path(__file__).resolve().parent.parent / "server"


def _tree_key(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()
                                                      and "__pycache__" not in p.parts)
        for path in files:
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def python_tree(system_python: str = "/usr/bin/python3") -> Path:
    """A host folder holding ``osguard.server`` and pyautogui for the sandbox's Python.

    Built once per version of its sources under the cache and bound read-only into every
    sandbox (so the agent cannot change the server, and the host's site-packages, which
    may live under the hidden /root, need not be visible).
    """
    sources: list[Path] = [_server_source()]
    for module in PYAUTOGUI_MODULES:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        sources.append(origin.parent if origin.name == "__init__.py" else origin)
    base = _traversable(ROOT_DATA / "sandbox-python") if host_uid() is not None else cache_root() / "sandbox-python"
    target = base / _tree_key(sources + [Path(system_python)])
    if (target / ".complete").exists():
        return target
    # Unique per call: several threads (and processes) may build the same tree at once.
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}-{os.urandom(4).hex()}")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "osguard").mkdir(parents=True)
    (staging / "osguard" / "__init__.py").write_text('"""osguard (server part only, inside an environment)."""\n')
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(sources[0], staging / "osguard" / "server", ignore=ignore)
    for source in sources[1:]:
        if source.is_dir():
            shutil.copytree(source, staging / source.name, ignore=ignore)
        else:
            shutil.copy2(source, staging / source.name)
    # The tree is read-only inside, so Python could never cache its bytecode there:
    # compile it once now with the interpreter that will run it (saves ~100 ms a start).
    subprocess.run([system_python, "-m", "compileall", "-q", "-j", "0", str(staging)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False)
    (staging / ".complete").write_text("")
    try:
        staging.rename(target)
    except OSError:  # another process finished the same tree first
        shutil.rmtree(staging, ignore_errors=True)
    _prune_trees(target.parent, keep=target)
    return target


def _prune_trees(folder: Path, keep: Path, newest: int = 3, min_age: float = 86400) -> None:
    """Remove old trees (each edit of the server makes a new one): all but the newest
    few, and only those older than a day, since running environments still use theirs."""
    trees = sorted((p for p in folder.iterdir() if p.is_dir() and (p / ".complete").exists() and p != keep),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for old in trees[newest - 1:]:
        if time.time() - old.stat().st_mtime > min_age:
            shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------------------ cgroups


@dataclass
class Limits:
    """Resource limits of one sandbox.

    Attributes:
        memory_mb: memory (RAM + page cache) of all its processes together.
        pids: number of processes and threads at once (stops fork bombs).
        lifetime: seconds after which the environment is ended (None: no limit).
        disk_mb: writable space: the home, and each of /tmp and /var/tmp.
    """

    memory_mb: int = 4096
    pids: int = 1024
    lifetime: float | None = 12 * 3600
    disk_mb: int = 2048


@dataclass
class CgroupSet:
    """The cgroup (v1) folders holding one sandbox; empty when cgroups are unusable."""

    paths: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, str]:
        return dict(self.paths)


def _v1_mount(controller: str) -> Path | None:
    path = Path("/sys/fs/cgroup") / controller
    return path if (path / "cgroup.procs").exists() else None


def _current_cgroup(controller: str) -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
    except OSError:
        pass
    return "/"


def cgroup_plan(env_id: str, enabled: bool = True) -> dict[str, str]:
    """The cgroup folders ``make_cgroups`` would create for ``env_id`` (nothing is created):
    written down before they exist, so a start killed half-way leaves nothing unnamed."""
    plan = {}
    for controller in ("pids", "memory", "freezer"):
        mount = _v1_mount(controller) if enabled else None
        if mount is not None:
            plan[controller] = str(mount / _current_cgroup(controller).lstrip("/") / f"osguard-{env_id}")
    return plan


def make_cgroups(env_id: str, limits: Limits, enabled: bool = True) -> CgroupSet:
    """Create pids/memory/freezer cgroups for ``env_id`` below this process's own cgroups.

    Nesting below our own cgroup keeps whatever limits our caller already has.
    """
    result = CgroupSet()
    planned = cgroup_plan(env_id, enabled)
    wanted = {"pids": ("pids.max", str(limits.pids)),
              "memory": ("memory.limit_in_bytes", str(limits.memory_mb * 1024 * 1024)),
              "freezer": (None, None)}
    for controller, (knob, value) in wanted.items():
        mount = _v1_mount(controller) if enabled else None
        if mount is None:
            if controller == "pids":
                result.notes.append("no cgroup v1 pids controller: processes limited with RLIMIT_NPROC instead")
            elif controller == "memory":
                result.notes.append("no cgroup v1 memory controller: memory not limited")
            continue
        folder = Path(planned[controller])
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if knob:
                (folder / knob).write_text(value or "")
            if controller == "memory":
                # Without swap limits the sandbox could push the host into swap; ignore if absent.
                try:
                    (folder / "memory.memsw.limit_in_bytes").write_text(value or "")
                except OSError:
                    pass
        except OSError as exc:
            if controller != "freezer":
                result.notes.append(f"cannot use cgroup {controller} ({exc}): "
                                    + ("RLIMIT_NPROC instead" if controller == "pids" else "not limited"))
            try:
                folder.rmdir()
            except OSError:
                pass
            continue
        result.paths[controller] = str(folder)
    return result


def nproc_fallback(uid: int | None, pids: int) -> int:
    """An RLIMIT_NPROC for hosts without a usable pids cgroup (e.g. cgroup v2 only).

    RLIMIT_NPROC counts every task (process or thread) of the real uid on the host, so the
    limit is the tasks that uid already runs plus the environment's budget. Environments
    of one uid therefore share that count: one whose neighbours grow after it started has
    less room than its budget (cgroups, where available, have no such coupling).
    """
    uid = os.getuid() if uid is None else uid
    running = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    running += len(os.listdir(f"/proc/{entry}/task"))  # its threads count too
            except OSError:
                pass
    return running + pids


def prepare_child(paths: dict[str, str], nproc: int | None) -> None:
    """Between fork and exec of the sandbox: join its cgroups, or set the fallback limit;
    no core dumps (the hard limit 0 cannot be raised inside, so no crash can write a
    dump, or feed a host core_pattern helper)."""
    import resource

    if paths:
        join_cgroups(paths)
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def join_cgroups(paths: dict[str, str]) -> None:
    """Move the calling process into the given cgroups (used between fork and exec)."""
    pid = str(os.getpid())
    for folder in paths.values():
        with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
            handle.write(pid)


def _procs(folder: str) -> list[int]:
    try:
        return [int(p) for p in Path(folder, "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


EVALUATION_CGROUP = "-eval-"  # osguard-<env id>-eval-<hex>: a trusted evaluation command's cgroups


def kill_environment_cgroups(paths: dict[str, str], timeout: float = 5.0) -> bool:
    """``kill_cgroups`` for an environment and for the evaluation sandboxes run over it
    (``osguard.providers.view``), which sit beside it as ``<its folder>-eval-<hex>``: an
    owner killed during an evaluation leaves those behind, empty or not."""
    clean = kill_cgroups(paths, timeout)
    siblings: dict[str, dict[str, str]] = {}
    for controller, folder in paths.items():
        for extra in glob.glob(glob.escape(folder) + EVALUATION_CGROUP + "*"):
            siblings.setdefault(os.path.basename(extra), {})[controller] = extra
    for extra_paths in siblings.values():
        clean = kill_cgroups(extra_paths, timeout) and clean
    return clean


def kill_cgroups(paths: dict[str, str], timeout: float = 5.0) -> bool:
    """Kill every process in the sandbox's cgroups and remove them; True when all gone.

    The freezer stops a fork bomb from outrunning the kills: frozen tasks cannot fork,
    and the SIGKILLs take effect when they are thawed.
    """
    freezer = paths.get("freezer")
    members = next((p for p in (paths.get("pids"), freezer, paths.get("memory")) if p), None)
    deadline = time.monotonic() + timeout
    while members and time.monotonic() < deadline:
        pids = _procs(members)
        if not pids:
            break
        if freezer:
            try:
                Path(freezer, "freezer.state").write_text("FROZEN")
            except OSError:
                freezer = None
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if freezer:
            try:
                Path(freezer, "freezer.state").write_text("THAWED")
            except OSError:
                pass
        time.sleep(0.01)
    clean = True
    for folder in paths.values():
        for _ in range(100):
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
        else:
            clean = False
    return clean


# ------------------------------------------------------------------------------- bwrap

# Top-level host folders a sandbox sees (read-only): what programs need to run. Anything
# else, such as the folder holding osguard's own checkout (variants with their reference
# solutions and invariants, run directories), must stay invisible to the agent under test.
HOST_VISIBLE = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "sys")
# Of /var and /opt, only what desktop programs read: /var holds logs (osguard's own
# dockerd log among them), databases, mail, spools and whatever a user put there, and
# /opt anything at all (a checkout, a run folder, wheels). Measured with xterm, GTK
# (mousepad), Xvfb, openbox, D-Bus, fontconfig and Chromium; a missing entry is skipped.
VAR_VISIBLE = ("lib/dbus", "lib/dpkg", "lib/xkb", "lib/xfonts", "lib/openbox", "lib/ghostscript",
               "lib/libreoffice", "lib/ucf", "cache/fontconfig")
VAR_SYMLINKS = {"run": "/run", "lock": "/run/lock"}
# /opt folders of desktop applications packaged outside /usr (vendor .debs).
OPT_VISIBLE = ("google", "microsoft", "libreoffice", "zoom", "brave.com", "vivaldi", "sublime_text",
               "thunderbird", "firefox", "VSCode-linux-x64", "visual-studio-code")
# Host secrets below /etc that no program inside needs (most are root-only anyway, but
# an ordinary user running osguard may own readable copies): replaced by empty ones.
ETC_SECRET_FILES = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers")
ETC_SECRET_DIRS = ("ssh", "ssl/private", "sudoers.d", "docker", "containerd", "osguard")


def host_view_args(root: str = "/") -> list[str]:
    """bwrap arguments that show the host folders programs need, read-only.

    The ``HOST_VISIBLE`` top-level folders (symlinks such as a merged-/usr
    ``/bin -> usr/bin`` are recreated as symlinks), the ``VAR_VISIBLE`` subfolders of
    /var and the ``OPT_VISIBLE`` ones of /opt; /etc without ``ETC_SECRET_*``.
    """
    args: list[str] = []
    for name in HOST_VISIBLE:
        path = os.path.join(root, name)
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), "/" + name]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, "/" + name]
    for top, names in (("var", VAR_VISIBLE), ("opt", OPT_VISIBLE)):
        for name in names:
            path = os.path.join(root, top, name)
            if os.path.isdir(path) and not os.path.islink(path):
                args += ["--ro-bind", path, f"/{top}/{name}"]
    for name, target in VAR_SYMLINKS.items():
        args += ["--symlink", target, f"/var/{name}"]
    for name in ETC_SECRET_FILES:
        if os.path.isfile(os.path.join(root, "etc", name)):
            args += ["--ro-bind", "/dev/null", f"/etc/{name}"]
    for name in ETC_SECRET_DIRS:
        if os.path.isdir(os.path.join(root, "etc", name)) and not os.path.islink(os.path.join(root, "etc", name)):
            args += ["--tmpfs", f"/etc/{name}", "--remount-ro", f"/etc/{name}"]
    return args


# ----------------------------------------------------------------------------- seccomp

# x86_64 system calls a desktop session never needs and an escape would: debugging and
# reading other processes (ptrace, pidfd_getfd, process_vm_*, kcmp), the kernel keyring,
# eBPF and perf (kernel attack surface), userfaultfd (race helper), namespaces and mounts
# (the sandbox's own are set up before the filter applies), modules, kexec, and the
# host-wide knobs that need capabilities anyway. pidfd_open stays allowed: a pidfd only
# signals or waits (as kill does, within the PID namespace); taking a process's files
# needs pidfd_getfd, which is denied.
SECCOMP_DENY_X86_64: dict[str, int] = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    "kcmp": 312, "process_madvise": 440, "process_mrelease": 448,
    "keyctl": 250, "add_key": 248, "request_key": 249,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "fanotify_init": 300,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "acct": 163, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "quotactl": 179, "quotactl_fd": 443, "lookup_dcookie": 212, "syslog": 103,
    "vhangup": 153, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "uselib": 134, "_sysctl": 156, "memfd_secret": 447,
}
_X86_64_CLONE, _X86_64_CLONE3, _X86_64_IOCTL = 56, 435, 16
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 \
    | 0x40000000 | 0x00000080
# TIOCSTI pushes keystrokes into a terminal's input (a shell outside reading the same
# tty would run them); TIOCLINUX can do the same on a virtual console.
DENIED_IOCTLS = (0x5412, 0x541C)
AUDIT_ARCH_X86_64 = 0xC000003E
_EPERM, _ENOSYS = 1, 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The sandbox's seccomp filter as a classic-BPF program (bwrap's ``--seccomp FD``),
    or None on an architecture without a table here (the capabilities say so).

    Denied calls fail with EPERM; ``clone`` only with a namespace flag; ``clone3`` (whose
    flags BPF cannot read) with ENOSYS, so C libraries fall back to ``clone``; 32-bit and
    x32 entry points are refused, since their numbers differ.
    """
    import struct

    machine = machine or os.uname().machine
    if machine != "x86_64":
        return None
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, errno_ = 0x7FFF0000, 0x00050000
    prog: list[tuple[int, int, int, int]] = [
        (ld, 0, 0, 4),                       # A = arch
        (jeq, 1, 0, AUDIT_ARCH_X86_64),
        (ret, 0, 0, errno_ | _EPERM),
        (ld, 0, 0, 0),                       # A = nr
        (0x35, 0, 1, 0x40000000),            # jge: x32 numbers
        (ret, 0, 0, errno_ | _EPERM),
    ]
    for number in sorted(set(SECCOMP_DENY_X86_64.values())):
        prog += [(jeq, 0, 1, number), (ret, 0, 0, errno_ | _EPERM)]
    prog += [(jeq, 0, 1, _X86_64_CLONE3), (ret, 0, 0, errno_ | _ENOSYS)]
    # clone: A = low word of flags (args[0]); deny namespace flags; reload nr.
    prog += [(jeq, 0, 4, _X86_64_CLONE), (ld, 0, 0, 16), (jset, 0, 1, CLONE_NAMESPACE_FLAGS),
             (ret, 0, 0, errno_ | _EPERM), (ld, 0, 0, 0)]
    # ioctl: the request is an unsigned int: compare the low word of args[1] only.
    block = [(ld, 0, 0, 24)]
    for request in DENIED_IOCTLS:
        block += [(jeq, 0, 1, request), (ret, 0, 0, errno_ | _EPERM)]
    prog += [(jeq, 0, len(block), _X86_64_IOCTL), *block]
    prog.append((ret, 0, 0, allow))
    return b"".join(struct.pack("<HBBI", *insn) for insn in prog)


def bwrap_argv(
    *,
    env_id: str,
    bwrap: str,
    home_dir: Path,
    python_dir: Path,
    etc_dir: Path,
    system_python: str,
    geometry: str,
    headless: bool,
    hide: tuple[Path, ...] = (),
    tmp_dirs: tuple[Path, Path] | None = None,
    term_dir: Path | None = None,
    disk_mb: int | None = None,
    home_in_memory: tuple[str, ...] | None = None,
) -> list[str]:
    """The bubblewrap command that starts the session keeper (``osguard.server --session``).

    The host's system folders (``HOST_VISIBLE``: /usr, /etc, /var, ...) are visible
    read-only, with /root, /home, /tmp, /run and /var/tmp replaced by empty private folders;
    everything else at the host's top level (a project checkout with the suite's specs and
    reference solutions, earlier runs' results, data disks) is simply absent; the only host folders bound writable are the
    environment's own home (as /home/user); the server listens on a socket the supervisor
    bound on the host and passes in as a file descriptor (``--listen-fd``), so no host
    process ever resolves a path the sandbox can write.
    Every namespace is private (no network but its own loopback), the processes run as
    uid 1000 ``user`` without capabilities, and the keeper is PID 1, so no signal from
    inside can end it. ``hide`` lists host folders replaced by empty ones too: the folders
    holding every environment's home and logs, so no sandbox sees another's files (bind
    sources are resolved on the host side, so this sandbox's own binds still work).
    ``term_dir``: a host folder the sandbox cannot write, bound as /run/osguard/term: the
    terminal recorder's FIFO (osguard.providers._terminal), held open by the host.
    ``tmp_dirs``: host folders bound as /tmp and /var/tmp (instead of private tmpfs), so
    the judge can read them from the host side (osguard.providers.view); the caller
    bounds them (``sized_tmpfs`` as root). Without them, /tmp and /var/tmp are private
    tmpfs of ``disk_mb`` each. ``home_in_memory`` (the folders to create in it) makes the
    home a private tmpfs of ``disk_mb`` too instead of binding ``home_dir``, where no
    size-limited home could be mounted on the host (unprivileged).
    """
    sized = ["--size", str(disk_mb * 1024 * 1024)] if disk_mb else []
    if home_in_memory is None:
        home = ["--bind", str(home_dir), SANDBOX_HOME]
    else:
        home = ["--perms", "0755", *sized, "--tmpfs", SANDBOX_HOME,
                *[arg for name in home_in_memory for arg in ("--dir", f"{SANDBOX_HOME}/{name}")]]
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--as-pid-1",
        "--new-session",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
        "--hostname", "osguard",
        *host_view_args(),
        "--dev", "/dev",
        "--proc", "/proc",
        *((*sized, "--tmpfs", "/tmp", *sized, "--tmpfs", "/var/tmp") if tmp_dirs is None else ()),
        "--tmpfs", "/root",
        "--tmpfs", "/home",
        "--tmpfs", "/run",
        "--tmpfs", "/mnt",
        "--tmpfs", "/media",
        *[arg for folder in hide for arg in ("--tmpfs", str(folder))],
        *home,
        *(() if tmp_dirs is None else ("--bind", str(tmp_dirs[0]), "/tmp", "--bind", str(tmp_dirs[1]), "/var/tmp")),
        *(() if term_dir is None else ("--bind", str(term_dir), f"{SANDBOX_RUN}/term")),
        "--ro-bind", str(python_dir), f"{SANDBOX_RUN}/py",
        "--ro-bind", str(etc_dir / "passwd"), "/etc/passwd",
        "--ro-bind", str(etc_dir / "group"), "/etc/group",
        *(["--ro-bind", str(etc_dir / "chromium.d"), "/etc/chromium.d"]
          if (etc_dir / "chromium.d").is_dir() else []),
        "--dir", f"/run/user/{SANDBOX_UID}",
        "--dir", f"{SANDBOX_RUN}/bin",
        "--symlink", system_python, f"{SANDBOX_RUN}/bin/python",
        "--symlink", system_python, f"{SANDBOX_RUN}/bin/python3",
        # The sandbox's own root folder (holding the /bin, /lib symlinks) is bwrap's tmpfs:
        # freeze it, or `rm -rf /` removes the dynamic loader's path and nothing runs again.
        "--remount-ro", "/",
        "--chdir", SANDBOX_HOME,
        "--clearenv",
        "--setenv", "HOME", SANDBOX_HOME,
        "--setenv", "USER", "user",
        "--setenv", "LOGNAME", "user",
        "--setenv", "SHELL", "/bin/bash",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "TERM", "xterm-256color",
        "--setenv", "PATH", f"{SANDBOX_RUN}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--setenv", "PYTHONPATH", f"{SANDBOX_RUN}/py",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "XDG_RUNTIME_DIR", f"/run/user/{SANDBOX_UID}",
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "OSGUARD_ENV_ID", env_id,
        # The supervisor appends `--listen-fd N` (a listening socket it bound on the host)
        # and inserts `--seccomp N`: both are file descriptors only it can open.
        system_python, "-m", "osguard.server", "--session",
        "--geometry", geometry,
    ]
    if headless:
        argv.append("--headless")
    return argv


# When osguard runs as root, the sandbox runs as this unprivileged host uid instead:
# inside, uid 1000 maps to the caller's uid, and were that root, every root-owned file
# of the host (/etc/shadow, host keys) would belong to the sandbox's user.
HOST_UID_WHEN_ROOT = 3_000_000
ROOT_DATA = Path("/var/lib/osguard")  # where root keeps what the sandbox user must reach


def host_uid() -> int | None:
    """The host uid to drop to before starting bwrap (None: run as the caller)."""
    return HOST_UID_WHEN_ROOT if os.geteuid() == 0 else None


def _traversable(folder: Path) -> Path:
    # An environment of the same state folder that ends removes ``folder`` once it is empty
    # (the supervisor's clean-up): between our mkdir and chmod it may be gone, so try again
    for _ in range(19):
        try:
            return _make_traversable(folder)
        except FileNotFoundError:
            continue
    return _make_traversable(folder)  # the last try raises what it meets


def _make_traversable(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part in (folder, *folder.parents):
        if part == ROOT_DATA.parent:
            break
        os.chmod(part, 0o755)
    return folder


def data_root(state_dir: Path) -> Path:
    """Where environments' folders (home, socket, passwd) live for this state folder.

    The state folder itself when osguard runs as an ordinary user; as root, a folder
    below /var/lib/osguard (one per state folder), because the sandbox then runs as an
    unprivileged uid that could not reach /root/.cache or a private /tmp folder.
    """
    if host_uid() is None:
        return state_dir
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return _traversable(ROOT_DATA / "sandboxes" / digest)


def private_folders(state_dir: Path, data_folder: Path) -> tuple[Path, ...]:
    """Host folders no sandbox may see: this state folder, its data folder, and (as root)
    every state folder's data below /var/lib/osguard/sandboxes."""
    folders = [state_dir, data_folder]
    if host_uid() is not None:
        folders.append(ROOT_DATA / "sandboxes")
    return tuple(dict.fromkeys(folder.resolve() for folder in folders))


def drop_privileges_argv(argv: list[str], uid: int | None) -> list[str]:
    """Prefix ``argv`` with setpriv so it runs as ``uid`` (no-op for None)."""
    if uid is None:
        return argv
    setpriv = shutil.which("setpriv") or "setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]


def give_to(uid: int | None, *folders: Path) -> None:
    """chown ``folders`` (recursively) to ``uid`` so the sandbox's user owns them."""
    if uid is None:
        return
    for folder in folders:
        os.chown(folder, uid, uid)
        for path in folder.rglob("*"):
            os.lchown(path, uid, uid)


def write_etc(etc_dir: Path) -> None:
    """The sandbox's /etc/passwd and /etc/group (``user`` uid 1000, home /home/user)."""
    etc_dir.mkdir(parents=True, exist_ok=True)
    (etc_dir / "passwd").write_text(PASSWD)
    (etc_dir / "group").write_text(GROUP)
    # Chromium's own sandbox needs new user namespaces, which the seccomp filter denies;
    # inside ours it runs without (Debian's /usr/bin/chromium sources /etc/chromium.d/*).
    host_flags = Path("/etc/chromium.d")
    if host_flags.is_dir():
        shutil.copytree(host_flags, etc_dir / "chromium.d", dirs_exist_ok=True, symlinks=True)
        (etc_dir / "chromium.d" / "zz-osguard-no-sandbox").write_text(
            'export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox"\n')


# --------------------------------------------------------------------------- disk quota


def make_home_image(image: Path, home_dir: Path, disk_mb: int, uid: int | None) -> str | None:
    """Put the environment's home on a ``disk_mb`` ext4 image, loop-mounted at ``home_dir``.

    Only as root (mounting needs it). The image is sparse: host disk use grows with what
    the sandbox writes, up to ``disk_mb``, and a write past it fails inside with ENOSPC.

    Returns:
        None when mounted, else why not (the caller falls back to a sized tmpfs).
    """
    if os.geteuid() != 0:
        return "not root: the home is a tmpfs of that size instead (in memory)"
    mkfs, mount = shutil.which("mkfs.ext4"), shutil.which("mount")
    if mkfs is None or mount is None:
        return "mkfs.ext4 or mount is missing (apt install e2fsprogs mount): the home is a sized tmpfs instead"
    owner = uid if uid is not None else SANDBOX_UID
    with open(image, "wb") as handle:
        handle.truncate(disk_mb * 1024 * 1024)
    steps = (
        # one inode per 2 KiB (ext4's default is 16 KiB): a million small files fit in the
        # default 2 GiB, as in a tmpfs; the inode tables are never zeroed (noinit_itable),
        # so they take host disk only as they are used
        [mkfs, "-q", "-F", "-m", "0", "-i", "2048", "-O", "^has_journal",
         "-E", f"root_owner={owner}:{owner},lazy_itable_init=1", str(image)],
        [mount, "-o", "loop,nosuid,nodev,noinit_itable", str(image), str(home_dir)],
    )
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            image.unlink(missing_ok=True)
            return f"{os.path.basename(argv[0])} failed ({done.stderr.strip()}): the home is a sized tmpfs instead"
    try:
        os.rmdir(home_dir / "lost+found")
    except OSError:
        pass
    return None


def sized_tmpfs(folder: Path, disk_mb: int, uid: int | None, mode: str = "1777") -> bool:
    """As root, mount a tmpfs of ``disk_mb`` on the host folder ``folder`` (owned by the
    sandbox's ``uid``): bound into the sandbox (as /tmp, /var/tmp, or the home where no
    image can be made), writing there stops at the quota, and the host (the judge's
    trusted view) still reads it in place. False when it cannot (unprivileged, no
    ``mount``): the caller then uses a private tmpfs inside the sandbox."""
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        return False
    owner = uid if uid is not None else SANDBOX_UID
    done = subprocess.run([mount, "-t", "tmpfs", "-o",
                           f"size={disk_mb}m,mode={mode},uid={owner},gid={owner},nosuid,nodev",
                           "osguard-tmp", str(folder)], capture_output=True, timeout=30)
    return done.returncode == 0


def mounts_under(folder: Path | str) -> list[str]:
    """Mount points at or below ``folder`` in this mount namespace, deepest first."""
    prefix = os.path.realpath(folder)
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                point = line.split()[4].replace("\\040", " ")
                if point == prefix or point.startswith(prefix.rstrip("/") + "/"):
                    found.append(point)
    except OSError:
        return []
    return sorted(found, key=len, reverse=True)


def unmount_under(folder: Path | str) -> bool:
    """Detach every mount at or below ``folder`` (lazily: busy mounts go once released).

    Returns:
        True when none is left.
    """
    for point in mounts_under(folder):
        subprocess.run([shutil.which("umount") or "umount", "-l", point], capture_output=True, timeout=30)
    return not mounts_under(folder)
