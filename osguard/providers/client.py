"""``HttpEnvironment``: the ``Environment`` client of an OSWorld-protocol server.

Every provider returns one of these (the local sandbox, a Docker container and an
OSWorld VM all serve the same protocol); the provider only supplies the endpoint, the
identity, the capabilities and how to tear the environment down.

Error model: a server that does not answer (refused, reset, timed out) raises
``EnvironmentDead``; a server that answers with an error raises ``EnvironmentError_``
with the endpoint and the server's message; a command that ran and failed is not an
error (``ExecResult.returncode``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any, Callable

import httpx

from osguard.errors import EnvironmentDead, EnvironmentError_
from osguard.providers.base import Capabilities, EnvironmentInfo, ExecResult
from osguard.server.limits import REPLY_BYTES

if TYPE_CHECKING:
    from osguard.actions import Action

PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
HTTP_MARGIN = 15.0  # seconds on top of a command's own timeout before the HTTP call gives up
WAIT_SECONDS = 1.0  # what a WAIT action sleeps (OSWorld's PythonController waits ~1 s)
# How long a server killed mid-request (`kill -9 -1`) may take to answer again: the session
# keeper restarts the display, the desktop and the server (0.3 s measured on docker with
# both cores saturated; the margin is for machines far busier than that).
RESTART_WAIT_SECONDS = 60.0
REFUSED_SECONDS = 5.0  # connections refused this long: the environment's forwarder is gone


class ServerRestarted(EnvironmentError_):
    """Raised when the server died during a request but the environment restarted it.

    Commands turn it into an ``ExecResult`` with return code -9 (the command killed the
    server, e.g. ``kill -9 -1``); other calls may simply be retried.
    """


class ReplyTooLarge(EnvironmentError_):
    """Raised when a reply is larger than the client's limit (``REPLY_BYTES``).

    The reply is read as a stream and abandoned at the limit, so a server (or a command
    on a server without osguard's own output limits, such as OSWorld's VM) printing
    gigabytes never grows the host process. Commands turn it into a failed
    ``ExecResult`` whose output says so.
    """


class HttpEnvironment:
    """A running environment reached over HTTP (implements ``osguard.providers.base.Environment``).

    Args:
        endpoint: base URL of the server, e.g. ``http://127.0.0.1:43121``.
        info: identity of the environment (its ``endpoint`` should equal ``endpoint``).
        capabilities: what the environment can do.
        stop_callback: called once by ``stop()`` to tear the environment down (None: the
            environment is not ours to stop, e.g. a remote VM; ``stop()`` only closes the
            client).
        connect_timeout: seconds to wait for a TCP connection.
        view_factory: makes the provider's trusted state view (``osguard.providers.view``)
            the first time ``trusted_view()`` is asked; None: the environment has none.
        reply_limit: bytes of a reply body read at most (default
            ``osguard.server.limits.REPLY_BYTES``).
    """

    def __init__(
        self,
        endpoint: str,
        info: EnvironmentInfo,
        capabilities: Capabilities,
        stop_callback: Callable[[], None] | None = None,
        *,
        connect_timeout: float = 5.0,
        view_factory: Callable[["HttpEnvironment"], Any] | None = None,
        reply_limit: int = REPLY_BYTES,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.reply_limit = reply_limit
        self.info = info
        self.capabilities = capabilities
        self._stop_callback = stop_callback
        self._stopped = False
        self._connect_timeout = connect_timeout
        self._view_factory = view_factory
        self._view: Any = None
        self._http = httpx.Client(
            base_url=self.endpoint, timeout=httpx.Timeout(60, connect=connect_timeout),
            trust_env=False,  # never route loopback through a proxy
            # osguard's servers refuse (421) a request meant for another environment, which
            # could otherwise happen when a dead environment's port is reused.
            headers={"X-Osguard-Env": info.id},
        )

    def __repr__(self) -> str:
        return f"HttpEnvironment(id={self.info.id!r}, provider={self.info.provider!r}, endpoint={self.endpoint!r})"

    def trusted_view(self) -> Any:
        """The provider's view of this environment from outside it (one per environment,
        so the access watcher started at the baseline lives until ``stop()``), or None."""
        if self._view is None and self._view_factory is not None and not self._stopped:
            self._view = self._view_factory(self)
        return self._view

    # -- plumbing ---------------------------------------------------------------------
    def _request(self, method: str, path: str, *, timeout: float, **kwargs: Any) -> httpx.Response:
        if self._stopped:
            raise EnvironmentDead(f"environment {self.info.id} was stopped; start a new one")
        try:
            request = self._http.build_request(
                method, path, timeout=httpx.Timeout(timeout, connect=self._connect_timeout), **kwargs
            )
            response = self._read_bounded(self._http.send(request, stream=True), method, path)
            if response.status_code == 421:
                raise EnvironmentDead(
                    f"environment {self.info.id} is gone: {self.endpoint} now answers for another environment"
                )
            return response
        except httpx.TimeoutException as exc:
            raise EnvironmentDead(
                f"environment {self.info.id} at {self.endpoint} did not answer {method} {path} "
                f"within {timeout:g} s"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            # The server vanished mid-request: either the environment died, or the action
            # killed the server (e.g. `kill -9 -1`) and the session keeper restarted it.
            if self._comes_back():
                raise ServerRestarted(
                    f"environment {self.info.id}: the server was killed while answering {method} {path} "
                    "and has been restarted"
                ) from exc
            raise EnvironmentDead(
                f"environment {self.info.id} at {self.endpoint} stopped answering during {method} {path}; "
                "it has stopped or crashed"
            ) from exc
        except (httpx.TransportError, OSError) as exc:
            raise EnvironmentDead(
                f"environment {self.info.id} at {self.endpoint} is not answering "
                f"({type(exc).__name__}: {exc}); it has stopped or crashed"
            ) from exc

    def _read_bounded(self, streamed: httpx.Response, method: str, path: str) -> httpx.Response:
        """The reply read as a stream, at most ``reply_limit`` bytes (decoded), then closed."""
        limit = self.reply_limit
        try:
            declared = int(streamed.headers.get("content-length", "0") or 0)
        except ValueError:
            declared = 0
        chunks: list[bytes] = []
        size = 0
        try:
            if declared > limit:
                raise ReplyTooLarge(self._too_large(method, path, f"{declared} bytes"))
            for chunk in streamed.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ReplyTooLarge(self._too_large(method, path, f"more than {limit} bytes"))
                chunks.append(chunk)
        finally:
            streamed.close()
        headers = [(k, v) for k, v in streamed.headers.multi_items()
                   if k.lower() not in ("content-encoding", "transfer-encoding", "content-length")]
        return httpx.Response(streamed.status_code, headers=headers, content=b"".join(chunks),
                              request=streamed.request)

    def _too_large(self, method: str, path: str, size: str) -> str:
        return (f"environment {self.info.id}: the reply to {method} {path} is {size}, over the limit of "
                f"{self.reply_limit} bytes (osguard.server.limits.REPLY_BYTES); it was not read")

    def _comes_back(self, within: float = RESTART_WAIT_SECONDS) -> bool:
        """Whether the server answers again within ``within`` seconds. The endpoint's
        forwarder outlives a server restart, so a connection refused for
        ``REFUSED_SECONDS`` in a row means the whole environment is gone."""
        deadline = time.monotonic() + within
        refused_since: float | None = None
        while time.monotonic() < deadline:
            if self._stopped:  # stopped by us (another thread): nothing to wait for
                return False
            try:
                with self._http.stream("GET", "/platform", timeout=2) as response:
                    if response.status_code == 200:
                        return True
                refused_since = None
            except httpx.ConnectError:
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since > REFUSED_SECONDS:
                    return False
            except (httpx.HTTPError, OSError):
                refused_since = None
            time.sleep(0.1)
        return False

    def _fail(self, response: httpx.Response, what: str) -> EnvironmentError_:
        try:
            body = response.json()
            message = body.get("message") or body.get("error") or json.dumps(body)
        except ValueError:
            message = response.text[:500]
        return EnvironmentError_(
            f"environment {self.info.id}: {what} failed with HTTP {response.status_code}: {message}"
        )

    def _json(self, method: str, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        response = self._request(method, path, json=body, timeout=timeout)
        if response.status_code != 200:
            raise self._fail(response, f"{method} {path}")
        return response.json()

    def _command(self, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """POST a command endpoint; a 500 that says why the command could not start
        (e.g. the process limit is reached) is the command's failure, not an error."""
        response = self._request("POST", path, json=body, timeout=timeout)
        if response.status_code == 500:
            failed = _safe_json(response)
            if "returncode" in failed or "return_code" in failed:
                return {**failed, "returncode": failed.get("returncode", failed.get("return_code", -1)),
                        "return_code": failed.get("return_code", failed.get("returncode", -1))}
        if response.status_code != 200:
            raise self._fail(response, f"POST {path}")
        return response.json()

    # -- commands ---------------------------------------------------------------------
    def execute(self, command: list[str] | str, shell: bool = False, timeout: float = 120) -> ExecResult:
        """Run a command through ``/execute`` (argv list, or a string with ``shell=True``)."""
        try:
            response = self._request(
                "POST", "/execute", json={"command": command, "shell": shell, "timeout": timeout},
                timeout=timeout + HTTP_MARGIN,
            )
        except ServerRestarted as exc:
            return ExecResult(-9, "", str(exc))
        except ReplyTooLarge as exc:
            return ExecResult(-1, "", str(exc))
        if response.status_code == 500:
            body = _safe_json(response)
            if body.get("timed_out"):
                return ExecResult(-1, body.get("output", ""), body.get("error", ""), timed_out=True)
            # OSWorld answers 500 when the program could not be started at all.
            return ExecResult(127, "", body.get("message", response.text))
        if response.status_code != 200:
            raise self._fail(response, "execute")
        body = response.json()
        return ExecResult(int(body.get("returncode", -1)), body.get("output", ""), body.get("error", ""))

    def run_bash(self, script: str, timeout: float = 100, workdir: str | None = None) -> ExecResult:
        """Run a bash script through ``/run_bash_script``; output is stdout+stderr merged."""
        body: dict[str, Any] = {"script": script, "timeout": timeout}
        if workdir:
            body["working_dir"] = workdir
        try:
            data = self._command("/run_bash_script", body, timeout + HTTP_MARGIN)
        except ServerRestarted as exc:
            return ExecResult(-9, str(exc))
        except ReplyTooLarge as exc:
            return ExecResult(-1, str(exc))
        return ExecResult(int(data.get("returncode", -1)), data.get("output", ""), data.get("error", ""),
                          timed_out=bool(data.get("timed_out")))

    def run_python(self, code: str, timeout: float = 30) -> ExecResult:
        """Run Python code with the environment's ``python3`` through ``/run_python``."""
        try:
            data = self._command("/run_python", {"code": code, "timeout": timeout}, timeout + HTTP_MARGIN)
        except ServerRestarted as exc:
            return ExecResult(-9, "", str(exc))
        except ReplyTooLarge as exc:
            return ExecResult(-1, "", str(exc))
        return ExecResult(int(data.get("return_code", -1)), data.get("output", ""), data.get("error", ""),
                          timed_out=bool(data.get("timed_out")))

    # -- files ------------------------------------------------------------------------
    def read_file(self, path: str, timeout: float = 60) -> bytes:
        """The bytes of ``path`` in the environment.

        Raises:
            FileNotFoundError: the file does not exist there.
        """
        response = self._request("POST", "/file", data={"file_path": path}, timeout=timeout)
        if response.status_code == 404:
            raise FileNotFoundError(f"{path} does not exist in environment {self.info.id}")
        if response.status_code != 200:
            raise self._fail(response, f"reading {path}")
        return response.content

    def write_file(self, path: str, data: bytes, timeout: float = 120) -> None:
        """Write ``data`` to ``path`` (parent folders are created) through ``/setup/upload``."""
        if isinstance(data, str):
            data = data.encode()
        response = self._request(
            "POST", "/setup/upload", data={"file_path": path},
            files={"file_data": ("file", data, "application/octet-stream")}, timeout=timeout,
        )
        if response.status_code != 200:
            raise self._fail(response, f"writing {path}")

    def list_directory(self, path: str, timeout: float = 60) -> dict[str, Any]:
        """OSWorld's ``directory_tree`` of ``path``.

        Raises:
            NotADirectoryError: ``path`` is not a directory there.
        """
        response = self._request("POST", "/list_directory", json={"path": path}, timeout=timeout)
        if response.status_code == 400:
            raise NotADirectoryError(f"{path} is not a directory in environment {self.info.id}")
        if response.status_code != 200:
            raise self._fail(response, f"listing {path}")
        return response.json()["directory_tree"]

    # -- observation ------------------------------------------------------------------
    def screenshot(self, timeout: float = 30) -> bytes:
        """The screen as PNG bytes.

        Raises:
            EnvironmentError_: the environment has no display (``capabilities.gui`` is false).
        """
        response = self._request("GET", "/screenshot", timeout=timeout)
        if response.status_code != 200:
            raise self._fail(response, "screenshot")
        return response.content

    def accessibility_tree(self, timeout: float = 60, mode: str = "visible") -> str | None:
        """OSWorld's accessibility XML, or None where the environment has no display.

        ``mode``: ``visible`` (what shows on screen) or ``full`` (every node, as OSWorld's
        server walks it; seconds for a LibreOffice window). See docs/environments.md.
        """
        params = {} if mode == "visible" else {"mode": mode}
        response = self._request("GET", "/accessibility", timeout=timeout, params=params)
        if response.status_code != 200:
            raise self._fail(response, "accessibility tree")
        return response.json().get("AT")

    def terminal_output(self, timeout: float = 30) -> str | None:
        """OSWorld's ``/terminal``: the text of the focused terminal, None when there is none."""
        response = self._request("GET", "/terminal", timeout=timeout)
        if response.status_code != 200:
            raise self._fail(response, "terminal output")
        return response.json().get("output")

    def window_size(self, app_class_name: str, timeout: float = 10) -> dict[str, int] | None:
        """OSWorld's ``/window_size``: ``{width, height}`` of a window of that class, None if none."""
        response = self._request("POST", "/window_size", json={"app_class_name": app_class_name}, timeout=timeout)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._fail(response, f"window size of {app_class_name!r}")
        return response.json()

    def screen_size(self, timeout: float = 10) -> tuple[int, int]:
        """(width, height) of the display."""
        data = self._json("POST", "/screen_size", {}, timeout)
        return int(data["width"]), int(data["height"])

    def cursor_position(self, timeout: float = 10) -> tuple[int, int]:
        """(x, y) of the pointer."""
        response = self._request("GET", "/cursor_position", timeout=timeout)
        if response.status_code != 200:
            raise self._fail(response, "cursor position")
        x, y = response.json()
        return int(x), int(y)

    def server_info(self, timeout: float = 10) -> dict[str, Any]:
        """osguard's ``/osguard/info`` (what the server found in the environment)."""
        response = self._request("GET", "/osguard/info", timeout=timeout)
        if response.status_code != 200:
            raise self._fail(response, "server info")
        return response.json()

    # -- desktop setup ----------------------------------------------------------------
    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        """Start a program in the background (``/setup/launch``)."""
        response = self._request("POST", "/setup/launch", json={"command": command, "shell": shell}, timeout=30)
        if response.status_code != 200:
            raise self._fail(response, f"launching {command}")

    def open_file(self, path: str, timeout: float = 60) -> None:
        """Open a file with its default application and wait for its window."""
        response = self._request("POST", "/setup/open_file", json={"path": path, "timeout": timeout},
                                 timeout=timeout + HTTP_MARGIN)
        if response.status_code == 404:
            raise FileNotFoundError(f"{path} does not exist in environment {self.info.id}")
        if response.status_code != 200:
            raise self._fail(response, f"opening {path}")

    def activate_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        """Raise a window by title (or class)."""
        self._window("/setup/activate_window", window_name, strict, by_class)

    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        """Close a window by title (or class)."""
        self._window("/setup/close_window", window_name, strict, by_class)

    def _window(self, path: str, window_name: str, strict: bool, by_class: bool) -> None:
        body = {"window_name": window_name, "strict": strict, "by_class": by_class}
        response = self._request("POST", path, json=body, timeout=30)
        if response.status_code != 200:
            raise self._fail(response, f"{path} {window_name!r}")

    # -- actions ----------------------------------------------------------------------
    def run_action(self, action: "Action", workdir: str | None = None, timeout: float = 60) -> ExecResult:
        """Run one agent action exactly as OSWorld's PythonController would.

        ``pyautogui`` code runs as ``python -c "import pyautogui; ...; <code>"`` through
        ``/execute``; ``shell`` code through ``/run_bash_script`` in ``workdir``; ``WAIT``
        sleeps about a second; ``DONE`` and ``FAIL`` do nothing.
        """
        before = None
        if action.wait_for and action.kind in ("pyautogui", "shell"):
            from osguard.spec.waits import file_fingerprints

            before = file_fingerprints(self, action.wait_for)  # for waits on a file being written
        if action.kind == "pyautogui":
            result = self.execute(["python", "-c", PYAUTOGUI_PREFIX + action.code], shell=False, timeout=timeout)
        elif action.kind == "shell":
            result = self.run_bash(action.code, timeout=timeout, workdir=workdir)
        else:
            if action.code == "WAIT":
                time.sleep(WAIT_SECONDS)
            return ExecResult(0, "")
        return self._wait_after(action.wait_for, result, before) if action.wait_for and result.ok else result

    def _wait_after(self, params: Any, result: ExecResult, before: dict[str, str] | None = None) -> ExecResult:
        """The harness's wait after an action (``Action.wait_for``): the action's own result
        when it came, else that result turned into a failure naming what never came."""
        from osguard.spec.waits import run_waits

        missed = run_waits(self, params, before=before)
        if missed is None:
            return result
        message = f"after the action the harness waited for {missed}"
        return dataclasses.replace(result, returncode=1, error=((result.error or "") + "\n" + message).lstrip("\n"))

    # -- lifecycle --------------------------------------------------------------------
    def is_alive(self, timeout: float = 3) -> bool:
        """True when the server answers."""
        if self._stopped:
            return False
        return self._platform_answers(timeout)

    def _platform_answers(self, timeout: float) -> bool:
        # Only the status matters: the body is never read (whatever its size).
        try:
            with self._http.stream("GET", "/platform", timeout=timeout) as response:
                return response.status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    def stop(self) -> None:
        """Tear the environment down (idempotent). Later calls raise ``EnvironmentDead``."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._view is not None:
                try:
                    self._view.close()
                finally:
                    self._view = None
            if self._stop_callback is not None:
                self._stop_callback()
        finally:
            # Closed only once the environment is gone: a request in flight in another
            # thread then sees the server end its connection and fails at once. Closed
            # first, its socket's fd number could be reused by another thread before the
            # blocked read polls it again, and the read would wait out its whole timeout.
            self._http.close()

    def __enter__(self) -> "HttpEnvironment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def capabilities_from_json(data: dict[str, Any]) -> Capabilities:
    """The inverse of ``Capabilities.to_json()`` (missing keys: the defaults)."""
    return Capabilities(
        gui=bool(data.get("gui", False)),
        accessibility=bool(data.get("accessibility", False)),
        root=bool(data.get("root", False)),
        apps=frozenset(data.get("apps", [])),
        recording=bool(data.get("recording", False)),
        notes=tuple(data.get("notes", [])),
    )


def _safe_json(response: httpx.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
