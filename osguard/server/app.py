"""The HTTP side of the server: routing, request parsing and OSWorld's response shapes.

Every endpoint answers exactly what OSWorld's Flask server answers (status codes, JSON
keys, plain-text bodies), except where that server is broken (``/run_bash_script`` and
``/run_python`` return 200 on success here). osguard's own additions live under
``/osguard/`` so they can never collide with an upstream endpoint.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from email.parser import BytesParser
from email.policy import HTTP as HTTP_POLICY
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from osguard.server import _proc
from osguard.server.limits import FILE_READ_BYTES

from osguard.server import PROTOCOL_VERSION
EXECUTE_TIMEOUT = 120  # OSWorld's /execute timeout
RUN_PYTHON_TIMEOUT = 30
RUN_BASH_TIMEOUT = 100
OPEN_FILE_TIMEOUT = 1800
MAX_TIMEOUT = 86400  # a day: longer than any environment's default lifetime (12 h)
MAX_BODY = 1 << 30  # uploads of a GiB are the most any task needs

Handler = Callable[["RequestHandler"], None]


class Request:
    """A parsed request body: JSON, url-encoded form or multipart form."""

    def __init__(self, content_type: str, body: bytes) -> None:
        self.json: Any = None
        self.form: dict[str, str] = {}
        self.files: dict[str, bytes] = {}
        kind = content_type.split(";", 1)[0].strip().lower()
        if kind == "multipart/form-data":
            message = BytesParser(policy=HTTP_POLICY).parsebytes(
                b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
            )
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if not name:
                    continue
                payload = part.get_payload(decode=True) or b""
                if part.get_filename() is not None:
                    self.files[name] = payload
                else:
                    self.form[name] = payload.decode("utf-8", "replace")
        elif kind == "application/x-www-form-urlencoded":
            self.form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        elif body.strip():
            # Flask's request.json needs the JSON content type; be lenient and try anyway.
            try:
                self.json = json.loads(body)
            except ValueError:
                self.json = None

    def field(self, name: str, default: Any = None) -> Any:
        """A field from the JSON object, else from the form."""
        if isinstance(self.json, dict) and name in self.json:
            return self.json[name]
        if name in self.form:
            return self.form[name]
        return default


class HttpError(Exception):
    """An error answer: status code and JSON body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


def _timeout(rq: "RequestHandler", default: float) -> float:
    """The request's ``timeout`` in seconds, checked before anything starts.

    A JSON number (not a boolean), or a decimal string in a form; finite, above 0 and at
    most ``MAX_TIMEOUT``. Missing or null: ``default``. Anything else is a 400: a NaN or
    an infinity would otherwise let a command run unbounded.
    """
    value = rq.body.field("timeout", None)
    if value is None:
        return default
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and rq.body.json is None:  # form fields are text
        try:
            number = float(value)  # "nan" and "inf" parse, and fail the range check below
        except ValueError:
            number = None
    if number is None or not (0 < number <= MAX_TIMEOUT):  # NaN fails every comparison
        raise HttpError(400, {"status": "error", "message": (
            f"'timeout' must be a number of seconds above 0 and at most {MAX_TIMEOUT}, got {json.dumps(value)}")})
    return number


def _expand(path: str) -> str:
    return os.path.expandvars(os.path.expanduser(path))


def _command_argv(command: Any, shell: bool) -> list[str] | str:
    if shell:
        # A list with shell=True behaves as in OSWorld's subprocess.run: the first item is
        # the script, the others its positional parameters ($0, $1, ...).
        return [str(arg) for arg in command] if isinstance(command, list) else str(command)
    if isinstance(command, str):
        command = shlex.split(command)
    if not isinstance(command, list):
        raise HttpError(400, {"status": "error", "message": "command must be a list or a string"})
    return [os.path.expanduser(arg) if isinstance(arg, str) and arg.startswith("~/") else str(arg)
            for arg in command]


# ---------------------------------------------------------------------------- endpoints


def h_execute(rq: "RequestHandler") -> None:
    command = rq.body.field("command")
    shell = bool(rq.body.field("shell", False))
    timeout = _timeout(rq, EXECUTE_TIMEOUT)
    if command is None:
        raise HttpError(400, {"status": "error", "message": "missing 'command'"})
    argv = _command_argv(command, shell)
    try:
        result = _proc.run(argv, shell=shell, timeout=timeout)
    except (FileNotFoundError, PermissionError, OSError) as exc:
        raise HttpError(500, {"status": "error", "message": str(exc)}) from exc
    if result.timed_out:
        raise HttpError(500, {
            "status": "error",
            "message": f"Command '{command}' timed out after {timeout:g} seconds",
            "timed_out": True, "output": result.stdout, "error": result.stderr, "returncode": -1,
        })
    rq.send_json({"status": "success", "output": result.stdout, "error": result.stderr,
                  "returncode": result.returncode})


def _verified(verification: dict[str, Any], max_wait: float, interval: float) -> float | None:
    start = time.monotonic()
    while True:
        ok = True
        if verification.get("window_exists"):
            listing = _proc.run(["wmctrl", "-l"], timeout=5) if shutil.which("wmctrl") else None
            ok = bool(listing) and verification["window_exists"] in listing.stdout
        if ok and verification.get("command_success"):
            ok = _proc.run(verification["command_success"], shell=True, timeout=10).returncode == 0
        if ok:
            return time.monotonic() - start
        if time.monotonic() - start >= max_wait:
            return None
        time.sleep(interval)


def h_execute_with_verification(rq: "RequestHandler") -> None:
    command = rq.body.field("command")
    shell = bool(rq.body.field("shell", False))
    verification = rq.body.field("verification") or {}
    max_wait = float(rq.body.field("max_wait_time", 10))
    interval = float(rq.body.field("check_interval", 1))
    result = _proc.run(_command_argv(command, shell), shell=shell, timeout=EXECUTE_TIMEOUT)
    waited = _verified(verification, max_wait, interval) if verification else 0.0
    if waited is None:
        raise HttpError(500, {"status": "verification_failed", "output": result.stdout,
                              "error": result.stderr, "returncode": result.returncode,
                              "message": f"verification did not pass within {max_wait:g} seconds"})
    rq.send_json({"status": "success", "output": result.stdout, "error": result.stderr,
                  "returncode": result.returncode, "verification": "passed", "wait_time": waited})


def h_launch(rq: "RequestHandler") -> None:
    command = rq.body.field("command")
    shell = bool(rq.body.field("shell", False))
    if command is None:
        raise HttpError(400, {"status": "error", "message": "missing 'command'"})
    try:
        _proc.launch(_command_argv(command, shell), shell=shell)
    except OSError as exc:
        raise HttpError(500, {"status": "error", "message": str(exc)}) from exc
    rq.send_text(f"{command} launched successfully")


def _windows() -> list[str]:
    if not shutil.which("wmctrl") or not os.environ.get("DISPLAY"):
        return []
    return _proc.run(["wmctrl", "-l"], timeout=5).stdout.splitlines()


def h_open_file(rq: "RequestHandler") -> None:
    raw = rq.body.field("path")
    if not raw:
        raise HttpError(400, {"status": "error", "message": "missing 'path'"})
    path = _expand(raw)
    timeout = _timeout(rq, OPEN_FILE_TIMEOUT)
    if os.path.exists(path):
        # As xdg-open does on OSWorld's GNOME desktop: `gio open`, which picks the
        # application by GIO's content type (name and content). Outside a known desktop
        # xdg-open asks `file`, which calls a workbook with uncompressed entries a zip and
        # hands it to the archive handler (GNOME Files) instead of LibreOffice.
        gio, xdg_open = shutil.which("gio"), shutil.which("xdg-open")
        if not (gio or xdg_open):
            raise HttpError(500, {"status": "error", "message": "neither gio nor xdg-open is installed"})
        _proc.launch([gio, "open", path] if gio else [xdg_open, path])
        title = os.path.basename(path)
    elif shutil.which(raw):
        _proc.launch([raw])
        title = os.path.basename(raw)
    else:
        rq.send_text("File not found", status=404)
        return
    if not shutil.which("wmctrl") or not os.environ.get("DISPLAY"):
        rq.send_text(f"{raw} opened successfully")
        return
    # OSWorld blocks until a window titled with the file name shows up, then raises it.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(title.lower() in line.lower() for line in _windows()):
            _proc.run(["wmctrl", "-a", title], timeout=5)
            rq.send_text(f"{raw} opened successfully")
            return
        time.sleep(0.5)
    rq.send_text(f"Timeout waiting for {raw} to open", status=500)


def h_upload(rq: "RequestHandler") -> None:
    target = rq.body.form.get("file_path")
    data = rq.body.files.get("file_data")
    if data is None and "file_data" in rq.body.form:
        data = rq.body.form["file_data"].encode()
    if not target or data is None:
        raise HttpError(400, {"error": "file_path and file_data are required"})
    path = _expand(target)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise HttpError(500, {"error": f"Failed to upload file: {exc}"}) from exc
    rq.send_text(f"File Uploaded: {len(data)} bytes")


def h_file(rq: "RequestHandler") -> None:
    raw = rq.body.field("file_path")
    if not raw:
        raise HttpError(400, {"error": "file_path is required"})
    path = _expand(raw)
    if not os.path.exists(path):
        raise HttpError(404, {"error": "File not found"})
    if not os.path.isfile(path):
        raise HttpError(400, {"error": "Not a file"})
    try:
        with open(path, "rb") as handle:
            data = handle.read(FILE_READ_BYTES + 1)  # bounded even for files that grow or lie about their size
    except OSError as exc:
        raise HttpError(500, {"error": str(exc)}) from exc
    if len(data) > FILE_READ_BYTES:
        raise HttpError(413, {"error": f"File is larger than {FILE_READ_BYTES} bytes, osguard's limit for a read"})
    rq.send_bytes(data, "application/octet-stream",
                  {"Content-Disposition": f'attachment; filename="{os.path.basename(path)}"'})


def _tree(path: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "directory", "name": os.path.basename(path.rstrip("/")) or path,
                            "children": []}
    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError:
        return node
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        node["children"].append(_tree(entry.path) if is_dir else {"type": "file", "name": entry.name})
    return node


def h_list_directory(rq: "RequestHandler") -> None:
    raw = rq.body.field("path")
    if not raw:
        raise HttpError(400, {"error": "Path not supplied"})
    path = _expand(raw)
    if not os.path.isdir(path):
        raise HttpError(400, {"error": "Directory not found"})
    rq.send_json({"directory_tree": _tree(path)})


def h_run_python(rq: "RequestHandler") -> None:
    code = rq.body.field("code")
    if code is None:
        raise HttpError(400, {"status": "error", "message": "Code not supplied!"})
    timeout = _timeout(rq, RUN_PYTHON_TIMEOUT)
    script = os.path.join(tempfile.gettempdir(), f"python_exec_{uuid.uuid4().hex}.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(code)
    try:
        result = _proc.run([sys.executable, script], timeout=timeout)
    except OSError as exc:
        raise HttpError(500, {"status": "error", "message": f"Failed to run the code: {exc}", "need_more": False,
                              "output": "", "error": str(exc), "return_code": -1}) from exc
    finally:
        try:
            os.unlink(script)
        except OSError:
            pass
    if result.timed_out:
        rq.send_json({"status": "error", "message": f"Execution timed out after {timeout:g} seconds",
                      "need_more": False, "output": result.stdout, "error": result.stderr,
                      "return_code": -1, "timed_out": True})
        return
    ok = result.returncode == 0
    rq.send_json({"status": "success" if ok else "error",
                  "message": "Command executed successfully" if ok else "Command failed",
                  "need_more": False, "output": result.stdout, "error": result.stderr,
                  "return_code": result.returncode})


def h_run_bash_script(rq: "RequestHandler") -> None:
    script = rq.body.field("script")
    if script is None:
        raise HttpError(400, {"status": "error", "output": "", "error": "Script not supplied",
                              "returncode": -1})
    timeout = _timeout(rq, RUN_BASH_TIMEOUT)
    working_dir = rq.body.field("working_dir")
    cwd = _expand(working_dir) if working_dir else os.path.expanduser("~")
    if not os.path.isdir(cwd):
        rq.send_json({"status": "error", "output": "", "error": f"working_dir {working_dir} does not exist",
                      "returncode": -1})
        return
    body = script if script.startswith("#!") else "#!/bin/bash\n" + script
    fd, path = tempfile.mkstemp(prefix="bash_exec_", suffix=".sh")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
    try:
        result = _proc.run(["/bin/bash", path], timeout=timeout, cwd=cwd, merge_stderr=True)
    except OSError as exc:  # e.g. no fork left: the process limit is reached
        raise HttpError(500, {"status": "error", "output": "", "error": f"Failed to execute script: {exc}",
                              "returncode": -1}) from exc
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if result.timed_out:
        rq.send_json({"status": "error", "output": result.stdout + f"\nScript execution timed out after {timeout:g} seconds",
                      "error": "", "returncode": -1, "timed_out": True})
        return
    rq.send_json({"status": "success" if result.returncode == 0 else "error",
                  "output": result.stdout, "error": "", "returncode": result.returncode})


def h_screenshot(rq: "RequestHandler") -> None:
    from osguard.server import screen

    try:
        png = screen.screenshot_png()
    except screen.ScreenUnavailable as exc:
        raise HttpError(500, {"status": "error", "message": str(exc)}) from exc
    rq.send_bytes(png, "image/png")


def _accessibility_query(query: str) -> dict[str, Any]:
    """``mode``, ``max_nodes`` and ``max_seconds`` of ``/accessibility``'s query string."""
    from osguard.server import accessibility

    fields = {key: values[-1] for key, values in parse_qs(query, keep_blank_values=True).items()}
    unknown = sorted(set(fields) - {"mode", "max_nodes", "max_seconds"})
    if unknown:
        raise HttpError(400, {"status": "error", "message": f"unknown query parameter {unknown[0]!r} of /accessibility: "
                              "expected mode, max_nodes or max_seconds"})
    options: dict[str, Any] = {"mode": fields.get("mode", "visible")}
    if options["mode"] not in accessibility.MODES:
        raise HttpError(400, {"status": "error", "message": f"mode={options['mode']!r} of /accessibility: "
                              f"expected one of {', '.join(accessibility.MODES)}"})
    for key, kind in (("max_nodes", int), ("max_seconds", float)):
        if key in fields:
            try:
                value = kind(fields[key])
            except ValueError:
                value = 0
            if value <= 0:
                raise HttpError(400, {"status": "error", "message": f"{key}={fields[key]!r} of /accessibility: "
                                      f"expected a positive {'integer' if kind is int else 'number'}"})
            options[key] = value
    return options


def h_accessibility(rq: "RequestHandler") -> None:
    from osguard.server import accessibility

    options = _accessibility_query(urlsplit(rq.path).query)
    if not os.environ.get("DISPLAY"):
        rq.send_json({"AT": None, "error": "no X display in this environment"})
        return
    try:
        walk = accessibility.walk(options.pop("mode"), **options)
    except accessibility.AccessibilityUnavailable as exc:
        rq.send_json({"AT": accessibility.empty_tree_xml(), "error": str(exc)})
        return
    answer: dict[str, Any] = {"AT": walk.xml}
    if walk.cut is not None:
        answer["cut"] = walk.cut
    rq.send_json(answer)


def h_terminal(rq: "RequestHandler") -> None:
    from xml.etree import ElementTree

    from osguard.server import accessibility

    output = None
    try:
        root = ElementTree.fromstring(accessibility.tree_xml())
        focused = "{%s}focused" % accessibility.NS_UBUNTU["st"]
        for element in root.iter("terminal"):
            if element.get(focused) == "true":
                output = element.text or ""
                break
    except Exception:
        output = None
    rq.send_json({"output": output, "status": "success"})


def h_screen_size(rq: "RequestHandler") -> None:
    from osguard.server import screen

    try:
        width, height = screen.screen_size()
    except screen.ScreenUnavailable as exc:
        raise HttpError(500, {"error": str(exc)}) from exc
    rq.send_json({"width": width, "height": height})


def h_cursor_position(rq: "RequestHandler") -> None:
    from osguard.server import screen

    try:
        x, y = screen.cursor_position()
    except screen.ScreenUnavailable as exc:
        raise HttpError(500, {"error": str(exc)}) from exc
    rq.send_json([x, y])


def h_window_size(rq: "RequestHandler") -> None:
    app_class = rq.body.field("app_class_name")
    if not app_class or not shutil.which("wmctrl"):
        raise HttpError(404, {"error": "window not found"})
    for line in _proc.run(["wmctrl", "-lxG"], timeout=5).stdout.splitlines():
        parts = line.split(None, 7)
        if len(parts) >= 7 and app_class.lower() in parts[6].lower():
            rq.send_json({"width": int(parts[4]), "height": int(parts[5])})
            return
    raise HttpError(404, {"error": f"no window of class {app_class}"})


def h_desktop_path(rq: "RequestHandler") -> None:
    path = os.path.expanduser("~/Desktop")
    if os.path.isdir(path):
        rq.send_json({"desktop_path": path})
    else:
        raise HttpError(404, {"error": "Desktop path not found"})


def h_wallpaper(rq: "RequestHandler") -> None:
    raise HttpError(404, {"error": "this environment has no desktop wallpaper"})


def h_change_wallpaper(rq: "RequestHandler") -> None:
    path = rq.body.field("path")
    if not path or not os.path.exists(_expand(path)):
        raise HttpError(404, {"error": "wallpaper file not found"})
    rq.send_text("Wallpaper changed successfully")


def _window_command(rq: "RequestHandler", flag: str) -> None:
    name = rq.body.field("window_name")
    if not name:
        raise HttpError(400, {"error": "window_name is required"})
    if not shutil.which("wmctrl"):
        raise HttpError(500, {"error": "wmctrl is not installed"})
    strict = bool(rq.body.field("strict", False))
    by_class = bool(rq.body.field("by_class", False))
    argv = ["wmctrl", "-" + ("x" if by_class else "") + ("F" if strict else "") + flag, name]
    result = _proc.run(argv, timeout=10)
    verb = "activated" if flag == "a" else "closed"
    if result.returncode != 0:
        raise HttpError(404, {"error": f"Window {name} not found", "output": result.stderr})
    rq.send_text(f"Window {name} {verb} successfully")


def h_activate_window(rq: "RequestHandler") -> None:
    _window_command(rq, "a")


def h_close_window(rq: "RequestHandler") -> None:
    _window_command(rq, "c")


def h_download_file(rq: "RequestHandler") -> None:
    import urllib.request

    url = rq.body.field("url")
    path = rq.body.field("path")
    if not url or not path:
        raise HttpError(400, {"error": "url and path are required"})
    target = _expand(path)
    last = ""
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=30) as response, open(target, "wb") as handle:
                shutil.copyfileobj(response, handle)
            rq.send_text("File downloaded successfully")
            return
        except Exception as exc:  # no network in most osguard environments
            last = str(exc)
    raise HttpError(500, {"error": f"Failed to download {url}: {last}"})


def h_platform(rq: "RequestHandler") -> None:
    rq.send_text(platform.system())


_recording: dict[str, Any] = {}
_recording_lock = threading.Lock()

def _recording_path() -> str:
    # A fresh private folder per recording (mkdtemp: 0700, unpredictable name), never a
    # fixed name in /tmp that another process could plant as a symlink first.
    return os.path.join(tempfile.mkdtemp(prefix="osguard-recording-"), "recording.mp4")


def h_start_recording(rq: "RequestHandler") -> None:
    with _recording_lock:
        if _recording.get("proc") is not None and _recording["proc"].poll() is None:
            raise HttpError(400, {"status": "error", "message": "Recording is already in progress."})
        if not shutil.which("ffmpeg") or not os.environ.get("DISPLAY"):
            raise HttpError(500, {"status": "error", "message": "recording needs ffmpeg and an X display"})
        from osguard.server import screen

        width, height = screen.screen_size()
        _recording["path"] = path = _recording_path()
        progress = os.path.join(os.path.dirname(path), "progress")
        _recording["proc"] = proc = subprocess.Popen(
            ["ffmpeg", "-y", "-f", "x11grab", "-draw_mouse", "1", "-s", f"{width}x{height}",
             "-i", os.environ["DISPLAY"], "-c:v", "libx264", "-preset", "ultrafast", "-r", "30",
             "-progress", "file:" + progress, "-stats_period", "0.2", path],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _recording["progress"] = progress
        # "Started" means frames are being captured: under load ffmpeg can take seconds to
        # grab its first one, and a recording stopped before that was an empty mp4
        if not _wait_first_frame(proc, progress, RECORDING_START_WAIT):
            if proc.poll() is not None:
                _recording.pop("proc", None)
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                raise HttpError(500, {"status": "error",
                                      "message": f"Recording failed: ffmpeg exited with status {proc.returncode}"})
    rq.send_json({"status": "success", "message": "Started recording."})


RECORDING_START_WAIT = 20.0


def _wait_first_frame(proc: subprocess.Popen, progress: str, timeout: float) -> bool:
    """True once ffmpeg's progress file reports an encoded frame (within ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with open(progress, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW)) as handle:
                text = handle.read(1 << 16).decode("ascii", "replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key == "frame" and value.strip().isdigit() and int(value) > 0:
                return True
        time.sleep(0.05)
    return False


def h_end_recording(rq: "RequestHandler") -> None:
    with _recording_lock:
        proc = _recording.pop("proc", None)
        path = _recording.pop("path", "")
        progress = _recording.pop("progress", "")
        if proc is None or proc.poll() is not None:
            raise HttpError(400, {"status": "error", "message": "No recording in progress to stop."})
        _wait_first_frame(proc, progress, RECORDING_START_WAIT)  # a start that returned before one
        # 'q' on stdin lets ffmpeg finish the mp4 (a killed ffmpeg leaves no moov atom).
        try:
            proc.communicate(b"q", timeout=15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW)) as handle:
            data = handle.read(FILE_READ_BYTES + 1)
    except OSError:
        raise HttpError(500, {"status": "error", "message": "Recording failed: no file was written"}) from None
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    if len(data) > FILE_READ_BYTES:
        raise HttpError(500, {"status": "error",
                              "message": f"Recording is larger than {FILE_READ_BYTES} bytes, osguard's limit for a read"})
    rq.send_bytes(data, "video/mp4", {"Content-Disposition": 'attachment; filename="recording.mp4"'})


def server_info() -> dict[str, Any]:
    """What this server can do here (osguard's own endpoint ``/osguard/info``)."""
    import getpass

    notes: list[str] = [n for n in os.environ.get("OSGUARD_SESSION_NOTES", "").split("\n") if n]
    display = os.environ.get("DISPLAY")
    gui = False
    if display:
        try:
            from osguard.server import screen

            screen.screen_size()
            gui = True
        except Exception as exc:
            notes.append(f"no gui: {exc}")
    elif not any(note.startswith("headless") for note in notes):
        notes.append("no gui: no X display (DISPLAY is not set); shell actions only")
    accessibility = False
    if gui and os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        try:
            import importlib.util

            accessibility = importlib.util.find_spec("pyatspi") is not None
        except Exception:
            accessibility = False
        if not accessibility:
            notes.append("no accessibility tree: pyatspi is not installed")
    elif gui:
        notes.append("no accessibility tree: no D-Bus session bus")
    recording = gui and shutil.which("ffmpeg") is not None
    return {
        "protocol": PROTOCOL_VERSION,
        "platform": platform.system(),
        "user": getpass.getuser(),
        "home": os.path.expanduser("~"),
        "display": display,
        "gui": gui,
        "accessibility": accessibility,
        "recording": recording,
        "python": sys.executable,
        "pid": os.getpid(),
        "notes": notes,
    }


def h_info(rq: "RequestHandler") -> None:
    rq.send_json(server_info())


ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "/screenshot"): h_screenshot,
    ("GET", "/accessibility"): h_accessibility,
    ("GET", "/terminal"): h_terminal,
    ("GET", "/platform"): h_platform,
    ("GET", "/cursor_position"): h_cursor_position,
    ("GET", "/osguard/info"): h_info,
    ("POST", "/execute"): h_execute,
    ("POST", "/setup/execute"): h_execute,
    ("POST", "/execute_with_verification"): h_execute_with_verification,
    ("POST", "/setup/execute_with_verification"): h_execute_with_verification,
    ("POST", "/setup/launch"): h_launch,
    ("POST", "/setup/open_file"): h_open_file,
    ("POST", "/setup/upload"): h_upload,
    ("POST", "/setup/download_file"): h_download_file,
    ("POST", "/setup/change_wallpaper"): h_change_wallpaper,
    ("POST", "/setup/activate_window"): h_activate_window,
    ("POST", "/setup/close_window"): h_close_window,
    ("POST", "/file"): h_file,
    ("POST", "/list_directory"): h_list_directory,
    ("POST", "/run_python"): h_run_python,
    ("POST", "/run_bash_script"): h_run_bash_script,
    ("POST", "/screen_size"): h_screen_size,
    ("POST", "/window_size"): h_window_size,
    ("POST", "/desktop_path"): h_desktop_path,
    ("POST", "/wallpaper"): h_wallpaper,
    ("POST", "/start_recording"): h_start_recording,
    ("POST", "/end_recording"): h_end_recording,
}
# Flask answers GET and POST alike on a few routes clients call either way.
for (_method, _path), _handler in list(ROUTES.items()):
    if _path in ("/screen_size", "/desktop_path", "/platform", "/cursor_position", "/osguard/info"):
        ROUTES[("GET" if _method == "POST" else "POST", _path)] = _handler


class RequestHandler(BaseHTTPRequestHandler):
    """Dispatches one request to its endpoint function."""

    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse one connection
    server_version = "osguard-server/1"
    body: Request
    verbose = False

    def _dispatch(self, method: str) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_json({"error": "request body too large"}, status=413)
            return
        raw = self.rfile.read(length) if length else b""
        expected = self.headers.get("X-Osguard-Env")
        actual = os.environ.get("OSGUARD_ENV_ID")
        if expected and actual and expected != actual:
            # A client of a dead environment whose port was reused by a newer one must
            # never run its actions here.
            self.send_json({"error": f"this is environment {actual}, not {expected}"}, status=421)
            return
        handler = ROUTES.get((method, path))
        if handler is None:
            known = any(p == path for _, p in ROUTES)
            status = 405 if known else 404
            self.send_json({"error": f"{method} {path} is not an endpoint of this server"}, status=status)
            return
        try:
            self.body = Request(self.headers.get("Content-Type", ""), raw)
            handler(self)
        except HttpError as exc:
            self.send_json(exc.body, status=exc.status)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # an endpoint bug must not kill the connection thread silently
            self.send_json({"status": "error", "message": f"{type(exc).__name__}: {exc}"}, status=500)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def send_bytes(self, data: bytes, content_type: str, headers: dict[str, str] | None = None,
                   status: int = 200) -> None:
        """Answer with a raw body."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, value: Any, status: int = 200) -> None:
        """Answer with a JSON body (as Flask's jsonify)."""
        self.send_bytes(json.dumps(value).encode(), "application/json", status=status)

    def send_text(self, text: str, status: int = 200) -> None:
        """Answer with a plain-text body."""
        self.send_bytes(text.encode(), "text/html; charset=utf-8", status=status)

    def address_string(self) -> str:
        # Unix-socket peers have no address tuple.
        return self.client_address[0] if isinstance(self.client_address, tuple) else "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        if self.verbose:
            sys.stderr.write("%s - %s\n" % (self.address_string(), format % args))


class ThreadingUnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """ThreadingHTTPServer's twin on a unix socket (the local sandbox has no network)."""

    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        folder = os.path.dirname(os.path.abspath(self.server_address))  # type: ignore[arg-type]
        protect = os.environ.get("OSGUARD_PROTECT_SOCKET_DIR") == "1"
        if protect:
            os.chmod(folder, 0o755)
        if os.path.exists(self.server_address):  # type: ignore[arg-type]
            os.unlink(self.server_address)  # type: ignore[arg-type]
        super().server_bind()
        if protect:
            # A read-only folder keeps `rm -rf /` inside the sandbox from unlinking the
            # socket, which would cut the environment off while its server still runs.
            os.chmod(folder, 0o555)
        self.server_name = "unix"
        self.server_port = 0


def make_server(*, host: str = "127.0.0.1", port: int = 5000, unix: str | None = None,
                verbose: bool = False, listen_fd: int | None = None) -> socketserver.BaseServer:
    """Create (bind) the server; call ``serve_forever()`` on it.

    Args:
        host: TCP address to bind (ignored with ``unix``).
        port: TCP port (0 picks a free one; read it from ``server.server_address``).
        unix: path of a unix socket to listen on instead of TCP.
        verbose: log every request to stderr.
        listen_fd: an inherited, listening unix socket to serve on instead (the local
            sandbox's: its path lives on the host, out of the sandbox's reach).
    """
    handler = type("Handler", (RequestHandler,), {"verbose": verbose})
    if listen_fd is not None:
        inherited = ThreadingUnixHTTPServer("", handler, bind_and_activate=False)
        inherited.socket.close()
        inherited.socket = socket.socket(fileno=listen_fd)
        inherited.socket.set_inheritable(False)
        inherited.server_name, inherited.server_port = "unix", 0
        return inherited
    if unix:
        server: socketserver.BaseServer = ThreadingUnixHTTPServer(unix, handler)
        os.chmod(unix, 0o777)
        return server
    ThreadingHTTPServer.daemon_threads = True
    return ThreadingHTTPServer((host, port), handler)


def _warm_up() -> None:
    """Import what the first requests need while the display is still starting."""
    import importlib

    for module in ("osguard.server.screen", "Xlib.display", "PIL.Image", "PIL.ImageGrab", "PIL.PngImagePlugin"):
        try:
            importlib.import_module(module)
        except Exception:
            pass


def serve(*, host: str = "127.0.0.1", port: int = 5000, unix: str | None = None,
          verbose: bool = False, gate_fd: int | None = None, listen_fd: int | None = None) -> None:
    """Bind and serve until SIGTERM/SIGINT.

    ``gate_fd``, when given, is read to its end before the socket is bound: the session
    keeper starts the server and the display side by side and closes the gate once the
    display is up (after writing the session notes into it), so the first answer already
    sees the display.
    """
    if gate_fd is not None:
        if os.environ.get("DISPLAY"):
            _warm_up()
        chunks = []
        try:
            while True:
                chunk = os.read(gate_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(gate_fd)
        # The keeper sends the session notes (what is missing and why) through the gate.
        os.environ["OSGUARD_SESSION_NOTES"] = b"".join(chunks).decode("utf-8", "replace").strip()
    if listen_fd is not None:
        from osguard.server.session import not_dumpable

        not_dumpable()  # its stderr is the host-side log: no /proc/PID/fd/2 for commands
    server = make_server(host=host, port=port, unix=unix, verbose=verbose, listen_fd=listen_fd)

    def _stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    home = os.path.expanduser("~")
    os.chdir(home if os.path.isdir(home) else "/")
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        if unix and os.path.exists(unix):
            try:
                os.unlink(unix)
            except OSError:
                pass
