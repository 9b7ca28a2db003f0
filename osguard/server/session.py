"""The desktop session inside an environment, and its keeper.

``python3 -m osguard.server --session --unix PATH`` runs this module's ``run_session``:
it starts a private X display (Xvfb), a D-Bus session bus with the AT-SPI bus (so GTK
and Qt applications publish accessibility trees), a window manager, and the HTTP server
as a child process. It stays in the foreground as the environment's init:

- it reaps every orphaned process (in a PID namespace it is PID 1, and unreaped zombies
  of a fork bomb would otherwise hold the process limit forever);
- it restarts the HTTP server and the display when an agent kills them
  (``kill -9 -1`` reaches every process but PID 1);
- it ignores SIGTERM/SIGINT/SIGHUP: the environment is ended from outside (the
  sandbox is killed as a whole), never by a signal an agent can send.

Start-up is parallel because environments are started by the dozen: the server process
starts (and imports) while Xvfb and the bus come up, and waits at a gate (a pipe) that
the keeper opens once the display answers, writing the session notes through it. The
session bus has OSWorld's fixed address, ``unix:path=$XDG_RUNTIME_DIR/bus``.

Without Xvfb (or with ``--headless``) it runs the server alone and says so in the
notes, which ``/osguard/info`` reports.
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
DISPLAY_NUMBER = 0
STARTUP_SECONDS = 15.0


def _log(message: str) -> None:
    sys.stderr.write(f"osguard-session: {message}\n")
    sys.stderr.flush()


# Popen objects must stay referenced: a dropped one lands in subprocess's private list of
# "active" children and is reaped behind our back by the next Popen, so the keeper's own
# waitpid(-1) would never learn that it died.
_children: dict[int, subprocess.Popen] = {}


def _spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    kwargs.setdefault("stderr", subprocess.DEVNULL)
    proc = subprocess.Popen(argv, **kwargs)
    _children[proc.pid] = proc
    return proc


def _runtime_dir() -> str:
    path = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.environ.get("TMPDIR", "/tmp"), "runtime")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


# Session services an environment never activates: the Tracker file indexer (pulled in with
# GNOME Files) would crawl the home folder in the background, read the very files a variant's
# not_accessed invariants watch, and write its index under ~/.cache while the probe diffs.
MASKED_SERVICES = ("org.freedesktop.Tracker3.", "org.gnome.Nautilus.Tracker3.", "org.freedesktop.portal.Tracker")


def _bus_config() -> str:
    """A session bus configuration like the system's session.conf, whose service directory
    holds every installed session service except :data:`MASKED_SERVICES` (links, so the
    services themselves are the installed ones)."""
    runtime = _runtime_dir()
    services = os.path.join(runtime, "dbus-services")
    os.makedirs(services, exist_ok=True)
    data_dirs = (os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    for data_dir in reversed([d for d in data_dirs if d]):  # the first directory wins, as in dbus
        folder = os.path.join(data_dir, "dbus-1", "services")
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if not name.endswith(".service") or name.startswith(MASKED_SERVICES):
                continue
            link = os.path.join(services, name)
            try:
                os.unlink(link)
            except OSError:
                pass
            os.symlink(os.path.join(folder, name), link)
    config = os.path.join(runtime, "session-bus.conf")
    with open(config, "w", encoding="utf-8") as out:
        out.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{services}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="service_start_timeout">120000</limit>
  <limit name="auth_timeout">240000</limit>
</busconfig>
""")
    return config


def _wait_readable(fd: int, deadline: float) -> bytes:
    data = b""
    while b"\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
    return data


class Session:
    """The processes this init keeps alive."""

    def __init__(self, *, unix: str | None, host: str, port: int, geometry: str,
                 headless: bool, verbose: bool, listen_fd: int | None = None) -> None:
        self.unix = unix
        self.listen_fd = listen_fd
        self.host = host
        self.port = port
        self.geometry = geometry
        self.headless = headless
        self.verbose = verbose
        self.notes: list[str] = []
        self.server_pid: int | None = None
        self.xvfb_pid: int | None = None
        self.helper_pids: set[int] = set()
        self._xvfb_ready_fd: int | None = None
        self._bus_socket: str | None = None

    # -- desktop ----------------------------------------------------------------------
    def begin_desktop(self) -> None:
        """Start Xvfb and the session bus without waiting for them."""
        self.notes = []
        if self.headless:
            self.notes.append("headless: started without a display (--headless)")
            return
        if not shutil.which("Xvfb"):
            self.notes.append("headless: Xvfb is not installed, so there is no display; "
                              "shell actions only (apt install xvfb openbox)")
            return
        # A display killed with SIGKILL leaves its lock and socket behind; Xvfb would
        # refuse to start again if the lock's pid now belongs to another process.
        for stale in (f"/tmp/.X{DISPLAY_NUMBER}-lock", f"/tmp/.X11-unix/X{DISPLAY_NUMBER}"):
            try:
                os.unlink(stale)
            except OSError:
                pass
        read_end, write_end = os.pipe()
        log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "xvfb.log"), "ab")
        try:
            proc = _spawn(["Xvfb", f":{DISPLAY_NUMBER}", "-screen", "0", f"{self.geometry}x24",
                           "-nolisten", "tcp", "-ac", "-displayfd", str(write_end)],
                          pass_fds=(write_end,), stderr=log)
        except OSError as exc:
            os.close(read_end)
            self.notes.append(f"headless: Xvfb could not start: {exc}")
            return
        finally:
            os.close(write_end)
            log.close()
        self.xvfb_pid = proc.pid
        self._xvfb_ready_fd = read_end
        os.environ["DISPLAY"] = f":{DISPLAY_NUMBER}"
        # No GPU behind Xvfb: GTK 4 (GNOME Files) would draw with OpenGL on Mesa's llvmpipe,
        # on the CPU, frame by frame (measured: 35 CPU s before the first folder showed, its
        # accessibility tree answering one query in 36-56 s, at load average 9 on 2 cores;
        # with cairo 0.9 s and 0.5 s). Its cairo renderer draws the same widgets in software.
        os.environ.setdefault("GSK_RENDERER", "cairo")
        self._begin_bus()

    def _begin_bus(self) -> None:
        if not shutil.which("dbus-daemon"):
            self.notes.append("no D-Bus (apt install dbus-x11): no accessibility tree")
            return
        self._bus_socket = os.path.join(_runtime_dir(), "bus")
        try:
            os.unlink(self._bus_socket)
        except OSError:
            pass
        try:
            proc = _spawn(["dbus-daemon", f"--config-file={_bus_config()}", "--nofork", "--nopidfile",
                           f"--address=unix:path={self._bus_socket}"])
        except OSError as exc:
            self.notes.append(f"no D-Bus session bus ({exc}): no accessibility tree")
            self._bus_socket = None
            return
        self.helper_pids.add(proc.pid)
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={self._bus_socket}"
        # Before the server starts: applications inherit its environment.
        for key, value in accessibility_environment().items():
            os.environ.setdefault(key, value)

    def finish_desktop(self) -> None:
        """Wait for the display and the bus, then start AT-SPI and the window manager."""
        if self._xvfb_ready_fd is None:
            return
        deadline = time.monotonic() + STARTUP_SECONDS
        try:
            ready = _wait_readable(self._xvfb_ready_fd, deadline)
        finally:
            os.close(self._xvfb_ready_fd)
            self._xvfb_ready_fd = None
        if b"\n" not in ready:
            if self.xvfb_pid is not None:
                _kill(self.xvfb_pid)
            self.xvfb_pid = None
            os.environ.pop("DISPLAY", None)
            self.notes.append("headless: Xvfb did not start (see /tmp/xvfb.log inside the environment)")
            return
        if self._bus_socket:
            while not os.path.exists(self._bus_socket) and time.monotonic() < deadline:
                time.sleep(0.005)
            launcher = "/usr/libexec/at-spi-bus-launcher"
            if not os.path.exists(self._bus_socket):
                self.notes.append("the D-Bus session bus did not start: no accessibility tree")
                os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
            elif os.path.exists(launcher):
                self._helper([launcher, "--launch-immediately"])
            else:
                self.notes.append("no AT-SPI bus launcher (apt install at-spi2-core)")
        self._start_window_manager()

    def _helper(self, argv: list[str]) -> None:
        try:
            self.helper_pids.add(_spawn(argv).pid)
        except OSError as exc:
            self.notes.append(f"could not start {argv[0]}: {exc}")

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

    # -- server -----------------------------------------------------------------------
    def start_server(self) -> int:
        """Start the server behind a closed gate; return the gate's write end."""
        env = dict(os.environ)
        env["OSGUARD_PROTECT_SOCKET_DIR"] = "1"
        gate_read, gate_write = os.pipe()
        argv = [sys.executable, "-m", "osguard.server", "--gate-fd", str(gate_read)]
        fds = [gate_read]
        if self.listen_fd is not None:  # the keeper keeps it, so a restarted server gets it too
            argv += ["--listen-fd", str(self.listen_fd)]
            fds.append(self.listen_fd)
        else:
            argv += ["--unix", self.unix] if self.unix else ["--host", self.host, "--port", str(self.port)]
        if self.verbose:
            argv.append("--verbose")
        home = os.path.expanduser("~")
        try:
            proc = _spawn(argv, env=env, pass_fds=tuple(fds), stdout=None, stderr=None,
                          cwd=home if os.path.isdir(home) else "/")
        finally:
            os.close(gate_read)
        self.server_pid = proc.pid
        return gate_write

    def open_gate(self, gate_write: int) -> None:
        """Let the server bind, handing it the session notes."""
        try:
            os.write(gate_write, "\n".join(self.notes).encode() or b"\n")
        except OSError:
            pass  # the server died meanwhile; the keeper restarts it
        finally:
            os.close(gate_write)

    def start(self) -> None:
        """Desktop and server side by side; the server answers once the desktop is up."""
        self.begin_desktop()
        gate = self.start_server()
        self.finish_desktop()
        self.open_gate(gate)

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
                if not server_died and self.server_pid is not None:
                    # The server must learn the new bus and notes: restart it too.
                    _kill(self.server_pid)
                    try:
                        os.waitpid(self.server_pid, 0)
                    except ChildProcessError:
                        pass
                _children.pop(self.server_pid or -1, None)
                self.server_pid = None
                self.start()
            elif server_died:
                _log("the server died; restarting it")
                self.server_pid = None
                self.open_gate(self.start_server())
            elif self.helper_pids & dead:
                self.helper_pids -= dead
                _log("a desktop helper died; restarting the window manager if it was one")
                self._restart_window_manager()


LIBREOFFICE_GTK3_PLUGIN = "/usr/lib/libreoffice/program/libvclplug_gtk3lo.so"


def accessibility_environment() -> dict[str, str]:
    """What applications need in their environment to publish an accessibility tree.

    Every toolkit asks differently: GTK 2 loads the bridge as a module (GTK 3 and 4 have
    it built in), Qt and Chromium wait for a switch, Gecko (Thunderbird, Firefox) for
    ``GNOME_ACCESSIBILITY``, and LibreOffice has a tree only with its GTK 3 plugin
    (its default X11 plugin publishes an empty frame). Chromium's web content needs
    ``--force-renderer-accessibility`` on its command line as well (Debian's launcher
    resets ``$CHROMIUM_FLAGS``; the docker image adds the flag in /etc/chromium.d).
    """
    env = {
        "GTK_MODULES": "gail:atk-bridge",
        "QT_ACCESSIBILITY": "1",
        "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        "GNOME_ACCESSIBILITY": "1",
        "ACCESSIBILITY_ENABLED": "1",
    }
    if os.path.exists(LIBREOFFICE_GTK3_PLUGIN):
        env["SAL_USE_VCLPLUGIN"] = "gtk3"
    return env


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



def not_dumpable() -> None:
    """Make this process non-dumpable: no process of the same uid may then open its
    /proc/PID/fd links (the keeper's and the server's stderr is the host-side log) or
    read its memory; exec resets it, so commands are unaffected."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def run_session(*, unix: str | None, host: str, port: int, geometry: str = "1920x1080",
                headless: bool = False, verbose: bool = False, listen_fd: int | None = None) -> None:
    """Start the desktop and the server, then act as the environment's init (never returns)."""
    not_dumpable()
    if listen_fd is not None:
        os.set_inheritable(listen_fd, False)  # only the server gets it (pass_fds)
    session = Session(unix=unix, host=host, port=port, geometry=geometry,
                      headless=headless, verbose=verbose, listen_fd=listen_fd)
    session.start()
    session.keep()
