"""The desktop session inside an environment, and its keeper.

``python3 -m osguard.server --session --unix PATH`` runs this module's ``run_session``:
it starts a private X display (Xvfb), a D-Bus session bus with the AT-SPI bus (so GTK
and Qt applications publish accessibility trees), a window manager, and then the HTTP
server as a child process. It stays in the foreground as the environment's init:

- it reaps every orphaned process (in a PID namespace it is PID 1, and unreaped zombies
  of a fork bomb would otherwise hold the process limit forever);
- it restarts the HTTP server and the display when an agent kills them
  (``kill -9 -1`` reaches every process but PID 1);
- it ignores SIGTERM/SIGINT/SIGHUP: the environment is ended from outside (the
  sandbox is killed as a whole), never by a signal an agent can send.

Without Xvfb (or with ``--headless``) it runs the server alone and says so through
``OSGUARD_SESSION_NOTES``, which ``/osguard/info`` reports.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time

WINDOW_MANAGERS = ("openbox", "xfwm4", "metacity", "fluxbox", "icewm")


def _log(message: str) -> None:
    sys.stderr.write(f"osguard-session: {message}\n")
    sys.stderr.flush()


# Popen objects must stay referenced: a dropped one lands in subprocess's private list of
# "active" children and is reaped behind our back by the next Popen, so the keeper's own
# waitpid(-1) would never learn that it died.
_children: dict[int, subprocess.Popen] = {}


def _start_xvfb(display: int, geometry: str) -> tuple[int, int]:
    """Start Xvfb on ``:display``; return (pid, display number) once it accepts clients."""
    # A display killed with SIGKILL leaves its lock and socket behind; Xvfb would refuse
    # to start again if the lock's pid now belongs to another process.
    for stale in (f"/tmp/.X{display}-lock", f"/tmp/.X11-unix/X{display}"):
        try:
            os.unlink(stale)
        except OSError:
            pass
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", f":{display}", "-screen", "0", f"{geometry}x24", "-nolisten", "tcp",
         "-ac", "-displayfd", str(write_end)],
        pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "xvfb.log"), "ab"),
    )
    os.close(write_end)
    _children[proc.pid] = proc
    deadline = time.monotonic() + 15
    data = b""
    try:
        while b"\n" not in data and time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 0.5)
            if ready:
                chunk = os.read(read_end, 64)
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(read_end)
    if b"\n" not in data:
        proc.kill()
        raise RuntimeError("Xvfb did not start (see /tmp/xvfb.log inside the environment)")
    return proc.pid, int(data.strip() or display)


def _start_dbus() -> dict[str, str]:
    if not shutil.which("dbus-launch"):
        return {}
    out = subprocess.run(["dbus-launch", "--sh-syntax"], capture_output=True, text=True, timeout=10)
    found: dict[str, str] = {}
    for line in out.stdout.splitlines():
        if "=" in line and line.split("=", 1)[0].isupper():
            key, value = line.rstrip(";").split("=", 1)
            found[key] = value.strip("'\"")
    return {k: v for k, v in found.items() if k == "DBUS_SESSION_BUS_ADDRESS"}


class Session:
    """The processes this init keeps alive."""

    def __init__(self, *, unix: str | None, host: str, port: int, geometry: str,
                 headless: bool, verbose: bool) -> None:
        self.unix = unix
        self.host = host
        self.port = port
        self.geometry = geometry
        self.headless = headless
        self.verbose = verbose
        self.notes: list[str] = []
        self.server_pid: int | None = None
        self.xvfb_pid: int | None = None
        self.helper_pids: set[int] = set()

    # -- desktop ----------------------------------------------------------------------
    def start_desktop(self) -> None:
        if self.headless:
            self.notes.append("headless: started without a display (--headless)")
            return
        if not shutil.which("Xvfb"):
            self.notes.append("headless: Xvfb is not installed, so there is no display; "
                              "shell actions only (apt install xvfb openbox)")
            return
        try:
            self.xvfb_pid, number = _start_xvfb(0, self.geometry)
        except Exception as exc:
            self.notes.append(f"headless: {exc}")
            return
        os.environ["DISPLAY"] = f":{number}"
        os.environ.update(_start_dbus())
        if os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            launcher = "/usr/libexec/at-spi-bus-launcher"
            if os.path.exists(launcher):
                self._helper([launcher, "--launch-immediately"])
            else:
                self.notes.append("no AT-SPI bus launcher (apt install at-spi2-core)")
            os.environ.setdefault("GTK_MODULES", "gail:atk-bridge")
            os.environ.setdefault("QT_ACCESSIBILITY", "1")
        else:
            self.notes.append("no D-Bus session bus (apt install dbus-x11): no accessibility tree")
        self._start_window_manager()

    def _helper(self, argv: list[str]) -> None:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            _children[proc.pid] = proc
            self.helper_pids.add(proc.pid)
        except OSError as exc:
            self.notes.append(f"could not start {argv[0]}: {exc}")

    # -- server -----------------------------------------------------------------------
    def start_server(self) -> None:
        env = dict(os.environ)
        env["OSGUARD_SESSION_NOTES"] = "\n".join(self.notes)
        env["OSGUARD_PROTECT_SOCKET_DIR"] = "1"
        argv = [sys.executable, "-m", "osguard.server"]
        argv += ["--unix", self.unix] if self.unix else ["--host", self.host, "--port", str(self.port)]
        if self.verbose:
            argv.append("--verbose")
        home = os.path.expanduser("~")
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                cwd=home if os.path.isdir(home) else "/")
        _children[proc.pid] = proc
        self.server_pid = proc.pid

    # -- init loop --------------------------------------------------------------------
    def keep(self) -> None:
        """Reap children forever; restart what an agent killed."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        while True:
            try:
                dead = {os.waitpid(-1, 0)[0]}
            except ChildProcessError:
                time.sleep(0.2)
                continue
            except InterruptedError:
                continue
            # `kill -9 -1` ends many children at once: collect them all before acting, so
            # the desktop comes back before the server that depends on it.
            time.sleep(0.05)
            dead |= _reap_pending()
            for pid in dead:
                _children.pop(pid, None)
            server_died = self.server_pid in dead
            if self.xvfb_pid in dead:
                _log("the display died; restarting the desktop and the server")
                self.xvfb_pid = None
                for helper in self.helper_pids - dead:
                    _kill(helper)
                self.helper_pids.clear()
                self.notes = []
                self.start_desktop()
                if not server_died and self.server_pid is not None:
                    # The server must learn the new session bus address: restart it too.
                    _kill(self.server_pid)
                    try:
                        os.waitpid(self.server_pid, 0)
                    except ChildProcessError:
                        pass
                    server_died = True
            elif self.helper_pids & dead:
                self.helper_pids -= dead
                _log("a desktop helper died; restarting the window manager if it was one")
                self._restart_window_manager()
            if server_died:
                _log("the server died; restarting it")
                self.server_pid = None
                self.start_server()

    def _start_window_manager(self) -> None:
        manager = next((wm for wm in WINDOW_MANAGERS if shutil.which(wm)), None)
        if manager is None:
            self.notes.append("no window manager installed (apt install openbox)")
            return
        argv = [manager]
        if manager == "openbox":
            config = _openbox_config()
            if config:
                argv += ["--config-file", config]
        self._helper(argv)

    def _restart_window_manager(self) -> None:
        for proc in _children.values():
            if proc.args and proc.args[0] in WINDOW_MANAGERS and proc.poll() is None:
                return
        self._start_window_manager()


def _terminal_command() -> str | None:
    for candidate, command in (("gnome-terminal", "gnome-terminal"), ("xterm", "xterm -title Terminal"),
                               ("x-terminal-emulator", "x-terminal-emulator")):
        if shutil.which(candidate):
            return command
    return None


def _openbox_config() -> str | None:
    """Openbox's stock configuration plus Ubuntu's Ctrl+Alt+T terminal shortcut.

    OSWorld's setup steps open a terminal with ``pyautogui.hotkey('ctrl', 'alt', 't')``
    and then activate the window titled "Terminal"; the binding makes that work here.
    Written to the environment's private /tmp, not to the user's home (the home is the
    task's state and must stay as the task made it).
    """
    terminal = _terminal_command()
    try:
        with open("/etc/xdg/openbox/rc.xml", encoding="utf-8") as handle:
            stock = handle.read()
    except OSError:
        return None
    if terminal is None or "<keyboard>" not in stock:
        return None
    binding = (f'<keyboard>\n  <keybind key="C-A-t"><action name="Execute">'
               f"<command>{terminal}</command></action></keybind>")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "osguard-openbox-rc.xml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(stock.replace("<keyboard>", binding, 1))
    return path


def _reap_pending() -> set[int]:
    reaped: set[int] = set()
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.add(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass



def run_session(*, unix: str | None, host: str, port: int, geometry: str = "1920x1080",
                headless: bool = False, verbose: bool = False) -> None:
    """Start the desktop and the server, then act as the environment's init (never returns)."""
    session = Session(unix=unix, host=host, port=port, geometry=geometry,
                      headless=headless, verbose=verbose)
    session.start_desktop()
    session.start_server()
    session.keep()
