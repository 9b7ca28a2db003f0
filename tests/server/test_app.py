"""The server's endpoints, request and response shapes, on a real loopback server.

The server runs in this process on 127.0.0.1 (port picked by the OS) with HOME pointed
at a temporary folder, so ``~`` and relative paths land there. Display endpoints are
covered by the provider conformance suite (they need Xvfb).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from osguard.server import make_server


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "Desktop").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DISPLAY", raising=False)
    return home


@pytest.fixture()
def url(home: Path):
    server = make_server(host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_execute_list_and_shell_with_tilde(url: str, home: Path) -> None:
    (home / "f.txt").write_text("content")
    response = httpx.post(url + "/execute", json={"command": ["cat", "~/f.txt"], "shell": False})
    assert response.status_code == 200
    assert response.json() == {"status": "success", "output": "content", "error": "", "returncode": 0}
    # A string without shell=True is split like OSWorld's shlex.split.
    response = httpx.post(url + "/setup/execute", json={"command": "printf '%s|' 'a b' c"})
    assert response.json()["output"] == "a b|c|"
    response = httpx.post(url + "/execute", json={"command": "echo $((6*7)) >&2; exit 5", "shell": True})
    assert response.json() == {"status": "success", "output": "", "error": "42\n", "returncode": 5}


def test_execute_errors(url: str) -> None:
    response = httpx.post(url + "/execute", json={"command": ["/no/such/program"]})
    assert response.status_code == 500
    assert response.json() == {"status": "error", "message": "[Errno 2] No such file or directory: '/no/such/program'"}
    response = httpx.post(url + "/execute", json={"shell": True})
    assert response.status_code == 400
    assert response.json() == {"status": "error", "message": "missing 'command'"}
    started = time.monotonic()
    response = httpx.post(url + "/execute", json={"command": "sleep 20 & sleep 20", "shell": True, "timeout": 0.5})
    assert time.monotonic() - started < 8
    assert response.status_code == 500
    body = response.json()
    assert body["timed_out"] is True and body["message"] == "Command 'sleep 20 & sleep 20' timed out after 0.5 seconds"


def test_run_bash_script_defaults_and_working_dir(url: str, home: Path) -> None:
    response = httpx.post(url + "/run_bash_script", json={"script": "pwd; echo err >&2; false"})
    assert response.status_code == 200
    assert response.json() == {"status": "error", "output": f"{home}\nerr\n", "error": "", "returncode": 1}
    response = httpx.post(url + "/run_bash_script", json={"script": "pwd", "working_dir": "~/Desktop"})
    assert response.json()["output"] == f"{home}/Desktop\n"
    response = httpx.post(url + "/run_bash_script", json={"script": "pwd", "working_dir": "~/missing"})
    assert response.json() == {"status": "error", "output": "", "error": "working_dir ~/missing does not exist",
                               "returncode": -1}
    response = httpx.post(url + "/run_bash_script", json={"script": "echo start; sleep 10", "timeout": 0.5})
    assert response.status_code == 200
    body = response.json()
    assert body["returncode"] == -1 and body["timed_out"] is True
    assert body["output"] == "start\n\nScript execution timed out after 0.5 seconds"


def test_run_python_shape(url: str) -> None:
    response = httpx.post(url + "/run_python", json={"code": "import sys; print('hi'); sys.exit(2)"})
    assert response.status_code == 200
    assert response.json() == {"status": "error", "message": "Command failed", "need_more": False,
                                "output": "hi\n", "error": "", "return_code": 2}
    assert httpx.post(url + "/run_python", json={}).status_code == 400


def test_upload_file_and_list_directory(url: str, home: Path) -> None:
    payload = bytes(range(256)) * 3
    response = httpx.post(url + "/setup/upload", data={"file_path": "~/a/b/c.bin"},
                          files={"file_data": ("c.bin", payload, "application/octet-stream")})
    assert (response.status_code, response.text) == (200, "File Uploaded: 768 bytes")
    assert (home / "a" / "b" / "c.bin").read_bytes() == payload
    # /file takes a form field, like OSWorld's client sends it.
    response = httpx.post(url + "/file", data={"file_path": "~/a/b/c.bin"})
    assert response.status_code == 200 and response.content == payload
    assert 'filename="c.bin"' in response.headers["content-disposition"]
    response = httpx.post(url + "/file", data={"file_path": "~/a/nothing"})
    assert (response.status_code, response.json()) == (404, {"error": "File not found"})
    response = httpx.post(url + "/file", data={"file_path": "~/a"})
    assert (response.status_code, response.json()) == (400, {"error": "Not a file"})
    response = httpx.post(url + "/list_directory", json={"path": "~/a"})
    assert response.json() == {"directory_tree": {"type": "directory", "name": "a", "children": [
        {"type": "directory", "name": "b", "children": [{"type": "file", "name": "c.bin"}]}]}}
    response = httpx.post(url + "/list_directory", json={"path": "~/a/b/c.bin"})
    assert (response.status_code, response.json()) == (400, {"error": "Directory not found"})


def test_small_endpoints(url: str, home: Path) -> None:
    assert httpx.get(url + "/platform").text == "Linux"
    assert httpx.post(url + "/desktop_path").json() == {"desktop_path": f"{home}/Desktop"}
    shutil.rmtree(home / "Desktop")
    response = httpx.post(url + "/desktop_path")
    assert (response.status_code, response.json()) == (404, {"error": "Desktop path not found"})
    response = httpx.get(url + "/accessibility")
    assert response.json() == {"AT": None, "error": "no X display in this environment"}
    response = httpx.get(url + "/screenshot")
    assert response.status_code == 500
    assert response.json()["message"] == "no X display in this environment (DISPLAY is not set)"
    info = httpx.get(url + "/osguard/info").json()
    assert (info["gui"], info["accessibility"], info["protocol"]) == (False, False, 1)
    response = httpx.get(url + "/nope")
    assert (response.status_code, response.json()) == (404, {"error": "GET /nope is not an endpoint of this server"})
    response = httpx.get(url + "/execute")
    assert response.status_code == 405


def test_launch_detaches(url: str, home: Path) -> None:
    response = httpx.post(url + "/setup/launch", json={"command": "sleep 0.2; touch ~/launched", "shell": True})
    assert (response.status_code, response.text) == (200, "sleep 0.2; touch ~/launched launched successfully")
    deadline = time.monotonic() + 5
    while not (home / "launched").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (home / "launched").exists()


def test_server_runs_alone_on_a_unix_socket(tmp_path: Path) -> None:
    """The server package needs nothing else from osguard (it is copied into images alone)."""
    package = tmp_path / "py" / "osguard"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copytree(Path(__file__).resolve().parents[2] / "osguard" / "server", package / "server")
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    socket_path = tmp_path / "server.sock"
    proc = subprocess.Popen([python, "-m", "osguard.server", "--unix", str(socket_path)],
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "py"), "HOME": str(tmp_path)})
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))) as client:
            assert client.get("http://server/platform").text == "Linux"
            body = client.post("http://server/execute", json={"command": ["echo", "uds"]}).json()
            assert body["output"] == "uds\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_requests_for_another_environment_are_refused(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client of a dead environment whose port was reused must never act on the new one."""
    monkeypatch.setenv("OSGUARD_ENV_ID", "local-new")
    response = httpx.get(url + "/platform", headers={"X-Osguard-Env": "local-old"})
    assert (response.status_code, response.json()) == (421, {"error": "this is environment local-new, not local-old"})
    assert httpx.get(url + "/platform", headers={"X-Osguard-Env": "local-new"}).text == "Linux"
    assert httpx.get(url + "/platform").text == "Linux"  # OSWorld's own clients send no header


def test_shell_with_a_list_is_script_and_parameters(url: str) -> None:
    """As subprocess.run(list, shell=True) in OSWorld's server: item 0 is the script."""
    response = httpx.post(url + "/execute", json={"command": ["echo $0-$1", "zero", "one"], "shell": True})
    assert response.json()["output"] == "zero-one\n"


BAD_TIMEOUTS = ["nan", "inf", "-inf", 1e308, -5, 0, "12", "soon", True, False, [], {}]


@pytest.mark.parametrize("path,body", [
    ("/execute", {"command": ["touch", "~/started"], "shell": False}),
    ("/setup/execute", {"command": "touch ~/started", "shell": True}),
    ("/run_bash_script", {"script": "touch ~/started"}),
    ("/run_python", {"code": "import os; open(os.path.expanduser('~/started'), 'w').close()"}),
    ("/setup/open_file", {"path": "~/started"}),
])
def test_bad_timeouts_are_refused_before_anything_starts(url: str, home: Path, path: str, body: dict) -> None:
    """Issue #10.6: `"timeout": "nan"` (or inf, 1e308, negative, a string, a boolean) must
    never start a command that then runs unbounded: 400, and nothing ran."""
    for value in BAD_TIMEOUTS:
        response = httpx.post(url + path, json={**body, "timeout": value}, timeout=30)
        assert response.status_code == 400, (value, response.text)
        assert response.json() == {"status": "error", "message": (
            f"'timeout' must be a number of seconds above 0 and at most 86400, got {json.dumps(value)}")}
        assert not (home / "started").exists(), value
    # JSON's NaN literal too (Python's json module reads it).
    response = httpx.post(url + path, content=b'{"timeout": NaN, "command": "true", "script": "true", "code": "1", "path": "~"}',
                          headers={"Content-Type": "application/json"}, timeout=30)
    assert response.status_code == 400
    assert response.json()["message"].endswith("got NaN")
    # A form's timeout is text: a number there is fine, "nan" is not.
    if path == "/execute":
        ok = httpx.post(url + path, data={"command": "true", "shell": "1", "timeout": "5"}, timeout=30)
        assert ok.status_code == 200, ok.text
        bad = httpx.post(url + path, data={"command": "true", "shell": "1", "timeout": "nan"}, timeout=30)
        assert bad.status_code == 400
