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

import array
import json
import os
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
import array, json, os, select, signal, socket, sys
_sock = socket.socket(fileno=int(sys.argv[1]))
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
    import builtins, types
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    status_fd, go_fd = fds[3], fds[4]
    for fd in (*fds[:3], _sock.fileno(), _wake_r, _wake_w):
        try:
            os.close(fd)
        except OSError:
            pass
    os.set_inheritable(status_fd, False)
    # Run only once the server has the pid: a server that gave up on this zygote runs the
    # command cold instead, and closes this pipe unwritten.
    try:
        go = os.read(go_fd, 1)
    except OSError:
        go = b""
    os.close(go_fd)
    if go != b"g":
        os._exit(0)
    status = 0
    try:
        _fresh_paths()
        if request.get("cwd"):
            os.chdir(request["cwd"])
        sys.argv = ["-c", *request["args"]]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
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
            tb = exc.__traceback__  # from the command's own frames on, as `python -c` shows it
            exc = exc.with_traceback(tb.tb_next if tb is not None else None)
            sys.excepthook(type(exc), exc, exc.__traceback__)
            status = 1
        threading = sys.modules.get("threading")
        if threading is not None:
            try:
                threading._shutdown()
            except BaseException:
                pass
        import atexit
        atexit._run_exitfuncs()
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:
        try:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        except BaseException:
            pass
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = status or 120
    try:
        os.write(status_fd, str(status).encode())
    except OSError:
        pass
    os._exit(status & 0xFF)


def _fresh_paths():
    # What a cold start would find that did not exist when the zygote started: the user's
    # site-packages (pip --user, .pth files, usercustomize) and folders now on sys.path.
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


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
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
            data, ancdata, _, _ = socket.recv_fds(_sock, 1 << 20, 8)
        except InterruptedError:
            continue
        if not data:
            os._exit(0)  # the server closed its end
        request = json.loads(data)
        if len(ancdata) != 5:
            for fd in ancdata:
                os.close(fd)
            _send({"seq": request.get("seq"), "error": "expected 5 descriptors"})
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


def qualifies(command: "list[str] | str", shell: bool) -> str | None:
    """The interpreter's path when ``command`` is ``python[3] -c CODE ...``, else None."""
    if shell or not isinstance(command, list) or len(command) < 3 or command[1] != "-c":
        return None
    name = os.path.basename(command[0])
    if name not in ("python", "python3") and not (name.startswith("python3.") and name[8:].isdigit()):
        return None
    return shutil.which(command[0])


class ZygoteChild:
    """What the server holds of one forked command: ``pid``, ``wait``, ``returncode``."""

    def __init__(self, zygote: "Zygote", pid: int, status_fd: int) -> None:
        self.zygote, self.pid, self._status_fd = zygote, pid, status_fd
        self.returncode: int | None = None
        self._done = threading.Event()

    def _finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._done.set()
        try:
            os.close(self._status_fd)
        except OSError:
            pass
        self._status_fd = -1

    def _from_status_pipe(self) -> None:
        """The zygote died: learn the end from the child's own status pipe instead."""
        fd = self._status_fd
        if fd < 0:
            return
        chunks = b""
        try:
            while True:
                chunk = os.read(fd, 64)
                if not chunk:
                    break
                chunks += chunk
        except OSError:
            pass
        # No status written: the child died by a signal (its number is lost with the zygote).
        self._finish(int(chunks) if chunks.strip().lstrip(b"-").isdigit() else -9)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(["python", "-c", "..."], timeout or 0)
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
        for child in orphans:
            threading.Thread(target=child._from_status_pipe, daemon=True).start()

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
        status_r, status_w = os.pipe()
        go_r, go_w = os.pipe()
        request = {"code": command[2], "args": command[3:], "cwd": cwd}
        try:
            with self._lock:
                if not self.alive:
                    return None
                self._seq += 1
                seq = request["seq"] = self._seq
                try:
                    socket.send_fds(self.sock, [json.dumps(request).encode()], [*fds, status_w, go_r])
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
                    child = ZygoteChild(self, reply["pid"], status_r)
                    status_r = -1
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
            for fd in (status_w, go_r, go_w):
                os.close(fd)
            if status_r >= 0:
                os.close(status_r)

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
