"""``python -c CODE`` without a cold interpreter each time: a warm parent that forks.

Every pyautogui action is ``python -c "import pyautogui; ..."`` (OSWorld's action space), and
a cold interpreter that imports pyautogui costs ~0.15 CPU s, most of a GUI reference's own
CPU. The server therefore keeps, per interpreter, one *zygote*: that interpreter started
with ``-c`` (so ``sys.executable``, ``sys.path``, flags and environment are the command's),
which imports pyautogui's display-free dependencies once and then forks one child per
command. The child is what ``python -c CODE ARGS`` would be:

- its own session (``setsid``: the server's timeout kills its group and session, as for any
  command), stdin/stdout/stderr the server's pipes (passed over a Unix socket), the working
  directory of the request, default signal handling;
- ``sys.argv == ["-c", *ARGS]``, a fresh ``__main__``, the code compiled as ``<string>``; a
  traceback shows the command's frames only; ``SystemExit`` and uncaught exceptions exit
  as CPython does (0 / the code / 1 with the message or traceback on stderr), after
  non-daemon threads, ``atexit`` handlers and a flush;
- nothing that holds a display connection is preloaded: ``pyautogui`` and ``mouseinfo``
  open theirs, and read the keyboard mapping, in the child, as a fresh interpreter would.

What differs from a cold start: modules the zygote preloaded are already in
``sys.modules``, and ``ps`` shows the zygote's command line for the child. The zygote is
started on the first qualifying command, which itself runs cold; a zygote that died (an
agent may ``pkill python``) is replaced, at most ``MAX_STARTS`` times per server, after which
every command runs cold. ``OSGUARD_PYTHON_ZYGOTE=0`` in the server's environment turns it off.

Stdlib only (the server is copied into images and sandboxes).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import threading
import time

MAX_STARTS = 5
REPLY_SECONDS = 10.0  # a fork answers in milliseconds; a zygote silent this long is killed
PRELOAD = (
    # stdlib the references' and osguard's in-environment scripts import
    "json", "re", "subprocess", "base64", "shutil", "tempfile", "hashlib", "traceback",
    # pyautogui's dependencies that open no display connection at import
    "pyscreeze", "pymsgbox", "pytweening", "pyperclip", "pyrect", "Xlib.display", "Xlib.ext.xtest",
    "Xlib.XK", "PIL.Image", "PIL.ImageGrab",
)

# Runs as ``<python> -c SOURCE FD PRELOAD...``: FD is its end of a SOCK_SEQPACKET pair.
SOURCE = r'''# osguard python zygote (osguard/server/zygote.py)
import sys
_startup = set(sys.modules)  # what a cold `python -c` has loaded before the command runs
import ctypes, json, os, select, signal, socket
# Not dumpable (inherited by the forked children, reset by exec): no other process of the
# environment can open /proc/PID/mem or /proc/PID/fd of the zygote or of a command it forked.
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    os._exit(3)
_sock = socket.socket(fileno=int(sys.argv[1]))
os.chdir("/")  # preload where nothing of the user's can shadow a module
for _name in sys.argv[2:]:
    try:
        __import__(_name)
    except BaseException:
        pass
_wake_r, _wake_w = os.pipe()
os.set_blocking(_wake_w, False)
signal.set_wakeup_fd(_wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)


def _child(request, fds):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    go_fd = fds[3]
    # Nothing of the zygote's stays open but stdin, stdout and stderr (and the go pipe, read next).
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != go_fd:
            try:
                os.close(fd)
            except OSError:
                pass
    # Run only once the server has the pid: a server that gave up on this zygote runs the
    # command cold instead and closes this pipe unwritten.
    try:
        go = os.read(go_fd, 1)
    except OSError:
        go = b""
    os.close(go_fd)
    if go != b"g":
        os._exit(0)
    try:
        os.chdir(request["cwd"])
    except OSError as exc:
        sys.stderr.write("osguard zygote: cannot enter %r: %s\n" % (request["cwd"], exc))
        os._exit(1)
    _fresh_paths()
    import builtins, importlib.machinery, types
    sys.argv = ["-c", *request["args"]]
    sys.orig_argv = [request["argv0"], "-c", request["code"], *request["args"]]
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "__annotations__": {}, "__doc__": None, "__package__": None,
                          "__spec__": None, "__loader__": importlib.machinery.BuiltinImporter})
    sys.modules["__main__"] = main
    status, interrupted = 0, False
    try:
        code = compile(request["code"], "<string>", "exec")
    except (SyntaxError, ValueError) as exc:  # as CPython shows it: no frame of ours
        code = None
        sys.excepthook(type(exc), exc.with_traceback(None), None)
        status = 1
    try:
        if code is not None:
            exec(code, main.__dict__)
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        tb = exc.__traceback__  # from the command's own frames on, as `python -c` shows it
        exc = exc.with_traceback(tb.tb_next if tb is not None else None)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        status = 1
    os._exit(_finalize(status, interrupted))


def _finalize(status, interrupted):
    # What CPython does after the main code (Py_RunMain, Py_FinalizeEx): non-daemon threads,
    # atexit, __main__'s objects finalized (an unclosed file is flushed), stdout flushed.
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        import atexit, gc
        atexit._run_exitfuncs()
        main = sys.modules.get("__main__")
        if main is not None:
            main.__dict__.clear()
        del main
        gc.collect()
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException:
        pass
    failed = False
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except BaseException as exc:
            if stream is sys.stdout:
                failed = True
                try:  # as CPython reports it (PyErr_WriteUnraisable, no traceback)
                    import traceback
                    sys.stderr.write("Exception ignored in: %r\n" % (stream,))
                    sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
                    sys.stderr.flush()
                except BaseException:
                    pass
    if failed:
        status = 120
    if interrupted:  # an uncaught KeyboardInterrupt ends by SIGINT, as CPython does
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status & 0xFF


def _fresh_paths():
    # What a cold start would find that was not there (or not where) the zygote looked: the
    # user's site-packages (pip --user, .pth files, usercustomize) made since, folders now on
    # sys.path, and modules of the working directory that shadow one the zygote preloaded.
    import importlib, site
    if site.ENABLE_USER_SITE:
        user_site = site.getusersitepackages()
        if os.path.isdir(user_site) and user_site not in sys.path:
            site.addsitedir(user_site)
            if "usercustomize" not in sys.modules:
                try:
                    import usercustomize
                except ImportError:
                    pass
    for key in [k for k, v in sys.path_importer_cache.items() if v is None]:
        del sys.path_importer_cache[key]
    importlib.invalidate_caches()
    preloaded = {name.partition(".")[0] for name in sys.modules if name not in _startup}
    for top in preloaded:
        if top in _startup:
            continue
        if any(os.path.exists(top + ending) for ending in (".py", ".pyc", "/__init__.py")) or any(
                entry.startswith(top + ".") and entry.endswith(".so") for entry in _listing()):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]


_listed = None


def _listing():
    global _listed
    if _listed is None:
        try:
            _listed = os.listdir(".")
        except OSError:
            _listed = []
    return _listed


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code if -2 ** 63 <= code < 2 ** 63 else -1  # as CPython: a C long, else -1
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:
        pass
    return 1


def _send(message):
    try:
        _sock.send(json.dumps(message).encode())
    except OSError:
        os._exit(0)  # the server is gone


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exit": pid, "status": os.waitstatus_to_exitcode(status)})


while True:
    try:
        ready, _, _ = select.select([_sock, _wake_r], [], [])
    except InterruptedError:
        continue
    if _wake_r in ready:
        try:
            os.read(_wake_r, 4096)
        except BlockingIOError:
            pass
        _reap()
    if _sock in ready:
        try:
            data, ancdata, _, _ = socket.recv_fds(_sock, 1 << 21, 8)
        except InterruptedError:
            continue
        if not data:
            os._exit(0)  # the server closed its end
        request = json.loads(data)
        if len(ancdata) != 4:
            for fd in ancdata:
                os.close(fd)
            _send({"seq": request.get("seq"), "error": "expected 4 descriptors"})
            continue
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, ancdata)
        for fd in ancdata:
            os.close(fd)
        _send({"seq": request["seq"], "pid": pid})
'''


def enabled() -> bool:
    return os.environ.get("OSGUARD_PYTHON_ZYGOTE", "1") != "0"


ARG_BYTES = 128 * 1024  # Linux's limit on one argument (MAX_ARG_STRLEN), NUL included
REQUEST_BYTES = 1 << 20  # a larger command runs cold (execve's own limit is ~2 MiB in all)
EXIT_REPORT_SECONDS = 2.0  # after the child is gone, how long its exit report may take


def qualifies(command: "list[str] | str", shell: bool) -> str | None:
    """The interpreter's path when ``command`` is ``python[3] -c CODE ...`` that a cold start
    would run (no NUL, no argument over Linux's limits: those fail cold, and must), else None."""
    if shell or not isinstance(command, list) or len(command) < 3 or command[1] != "-c":
        return None
    if not all(isinstance(arg, str) for arg in command):
        return None
    name = os.path.basename(command[0])
    if name not in ("python", "python3") and not (name.startswith("python3.") and name[8:].isdigit()):
        return None
    sizes = [len(arg.encode("utf-8", "surrogateescape")) + 1 for arg in command]
    if max(sizes) > ARG_BYTES or sum(sizes) > REQUEST_BYTES or any("\0" in arg for arg in command):
        return None
    return shutil.which(command[0])


class ZygoteChild:
    """What the server holds of one forked command: ``pid``, ``wait``, ``returncode``.

    The zygote reports the exit status. That the child has ended the server learns on its
    own, from a pidfd: a zygote that is stopped or gone cannot hold a request past its
    timeout. A child that ended without a report within ``EXIT_REPORT_SECONDS`` gets -9 (its
    status died with the zygote), and that zygote is killed.
    """

    def __init__(self, zygote: "Zygote", pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None
        self._done = threading.Event()
        try:
            self._pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # already gone (and reaped), or no pidfd here
            self._pidfd = -1

    def _finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._done.set()
        fd, self._pidfd = self._pidfd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _ended(self, timeout: float | None) -> bool:
        """The process is gone (a zombie counts), waiting at most ``timeout``."""
        fd = self._pidfd
        if fd < 0:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except OSError:
                return False
            if timeout:
                time.sleep(min(timeout, 0.2))
            return False
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
        except (OSError, ValueError):  # closed by _finish meanwhile
            return True
        return bool(ready)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["python", "-c", "..."], timeout or 0)
            if self._done.wait(0.05):
                break
            if self._ended(0.5 if left is None else min(0.5, max(left, 0))):
                if not self._done.wait(EXIT_REPORT_SECONDS):
                    self.zygote._kill()
                    self._finish(-9)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """One warm interpreter and the thread that reads its replies."""

    def __init__(self, executable: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.executable = executable
        self.proc = subprocess.Popen([executable, "-c", SOURCE, str(theirs.fileno()), *PRELOAD],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        theirs.close()
        self.alive = True
        self._lock = threading.Lock()  # one request on the socket at a time
        self._seq = 0
        self._replies: dict[int, dict] = {}
        self._reply_ready = threading.Condition()
        self._children: dict[int, ZygoteChild] = {}
        self._early_exits: dict[int, int] = {}
        threading.Thread(target=self._read, name="zygote-reader", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                message = json.loads(data)
                if not isinstance(message, dict):
                    raise ValueError(message)
                if "exit" in message:
                    message = {"exit": int(message["exit"]), "status": int(message["status"])}
                else:
                    message["seq"] = int(message["seq"])
                    if "pid" in message and not self._is_child(int(message["pid"])):
                        raise ValueError(message)
            except (ValueError, TypeError, KeyError):
                # Not what our zygote sends (something in the environment tampered with it):
                # stop using it; its commands in flight end through their status pipes.
                self._kill()
                break
            if "exit" in message:
                with self._reply_ready:
                    child = self._children.pop(message["exit"], None)
                    if child is None:
                        self._early_exits[message["exit"]] = message["status"]
                if child is not None:
                    child._finish(message["status"])
            else:
                with self._reply_ready:
                    self._replies[message["seq"]] = message
                    self._reply_ready.notify_all()
        with self._reply_ready:
            self.alive = False
            orphans = list(self._children.values())
            self._children.clear()
            self._reply_ready.notify_all()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for child in orphans:  # their status died with the zygote
            threading.Thread(target=child.wait, daemon=True).start()

    def _is_child(self, pid: int) -> bool:
        """``pid`` is not another process than a child of the zygote (a reply's pid is
        what a timeout kills). Gone already counts: a quick child may be reaped by now."""
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                return int(handle.read().rsplit(b")", 1)[1].split()[1]) == self.proc.pid
        except OSError:
            return True
        except (ValueError, IndexError):
            return False

    def _kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.close()

    def spawn(self, command: list[str], cwd: str | None, fds: tuple[int, int, int]) -> ZygoteChild | None:
        """Fork ``command`` (``python -c CODE ARGS``) with stdin/stdout/stderr ``fds``; None
        when the zygote cannot (the caller then starts it cold)."""
        go_r, go_w = os.pipe()
        request = {"argv0": command[0], "code": command[2], "args": command[3:], "cwd": cwd or os.getcwd()}
        try:
            with self._lock:
                if not self.alive:
                    return None
                self._seq += 1
                seq = request["seq"] = self._seq
                try:
                    socket.send_fds(self.sock, [json.dumps(request).encode()], [*fds, go_r])
                except OSError:
                    return None
                deadline = time.monotonic() + REPLY_SECONDS
                with self._reply_ready:
                    while seq not in self._replies and self.alive and time.monotonic() < deadline:
                        self._reply_ready.wait(0.5)
                    reply = self._replies.pop(seq, None)
                if reply is None and self.alive:
                    # A stopped (SIGSTOP) or stuck zygote must never run this command later,
                    # after it has run cold: it goes.
                    self._kill()
                    return None
                if reply is None or "pid" not in reply:
                    return None
                with self._reply_ready:
                    child = ZygoteChild(self, reply["pid"])
                    if reply["pid"] in self._early_exits:
                        code = self._early_exits.pop(reply["pid"])
                    else:
                        self._children[reply["pid"]] = child
                        code = None
                try:
                    os.write(go_w, b"g")
                except OSError:
                    pass  # it died already: its exit (or its status pipe) says so
                if code is not None:
                    child._finish(code)
                return child
        finally:
            for fd in (go_r, go_w):
                os.close(fd)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


_zygotes: dict[str, Zygote] = {}
_starts = 0
_guard = threading.Lock()


def zygote_for(executable: str) -> Zygote | None:
    """The running zygote for ``executable``; starts one (for the *next* command) if none."""
    global _starts
    with _guard:
        zygote = _zygotes.get(executable)
        if zygote is not None and zygote.alive and zygote.proc.poll() is None:
            return zygote
        if zygote is not None:
            zygote.close()
            del _zygotes[executable]
        if _starts < MAX_STARTS:
            _starts += 1
            try:
                _zygotes[executable] = Zygote(executable)
            except OSError:
                pass
        return None
