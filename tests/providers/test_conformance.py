"""The conformance suite every provider passes (parametrized over ``PROVIDERS``).

Each test talks to a real environment through ``HttpEnvironment`` only. Providers that
cannot run here are skipped with their own ``available()`` reason.
"""

from __future__ import annotations

import io
import re
import time
import uuid

import httpx
import pytest

from osguard.actions import Action
from osguard.errors import EnvironmentDead
from osguard.providers import Environment, ExecResult

UBUNTU_NS = (
    'xmlns:st="https://accessibility.ubuntu.example.org/ns/state"',
    'xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes"',
    'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"',
    'xmlns:doc="https://accessibility.ubuntu.example.org/ns/document"',
    'xmlns:docattr="https://accessibility.ubuntu.example.org/ns/document/attributes"',
    'xmlns:txt="https://accessibility.ubuntu.example.org/ns/text"',
    'xmlns:val="https://accessibility.ubuntu.example.org/ns/value"',
    'xmlns:act="https://accessibility.ubuntu.example.org/ns/action"',
)

GTK_PROBE = """
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
window = Gtk.Window(title="osguard-a11y-probe")
window.add(Gtk.Button(label="Probe Button"))
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
"""


def _needs_gui(env) -> None:
    if not env.capabilities.gui:
        pytest.skip(f"environment has no display: {'; '.join(env.capabilities.notes)}")


def _has(env, program: str) -> bool:
    return env.run_bash(f"command -v {program}").ok


# ------------------------------------------------------------------------------ lifecycle


def test_start_returns_a_live_environment_and_stop_ends_it(fresh_env) -> None:
    assert isinstance(fresh_env, Environment)
    assert fresh_env.is_alive()
    assert fresh_env.info.endpoint.startswith("http://127.0.0.1:")
    fresh_env.stop()
    assert not fresh_env.is_alive()
    fresh_env.stop()  # idempotent


def test_calls_after_stop_raise_environment_dead(fresh_env) -> None:
    endpoint = fresh_env.info.endpoint
    fresh_env.stop()
    with pytest.raises(EnvironmentDead) as caught:
        fresh_env.run_bash("echo hi")
    assert str(caught.value) == f"environment {fresh_env.info.id} was stopped; start a new one"
    # The server itself is gone too, not only our client.
    with pytest.raises(httpx.TransportError):
        httpx.get(endpoint + "/platform", timeout=2)


# ------------------------------------------------------------------------------- commands


def test_execute_argv_and_shell(env) -> None:
    result = env.execute(["echo", "hello", "world"])
    assert result == ExecResult(0, "hello world\n", "")
    result = env.execute("echo out; echo err >&2; exit 3", shell=True)
    assert (result.returncode, result.output, result.error) == (3, "out\n", "err\n")


def test_execute_missing_program_is_a_failed_result(env) -> None:
    result = env.execute(["osguard-no-such-program"])
    assert result.returncode != 0
    assert "osguard-no-such-program" in result.error


def test_execute_timeout_is_reported(env) -> None:
    started = time.monotonic()
    result = env.execute(["sleep", "30"], timeout=1)
    assert result.timed_out and not result.ok
    assert time.monotonic() - started < 10


def test_run_bash_script_answers_200_with_merged_output(env) -> None:
    response = httpx.post(env.info.endpoint + "/run_bash_script",
                          json={"script": "echo one; echo two >&2", "timeout": 10}, timeout=30)
    assert response.status_code == 200
    body = response.json()
    assert body == {"status": "success", "output": "one\ntwo\n", "error": "", "returncode": 0}


def test_run_bash_in_workdir(env) -> None:
    result = env.run_bash("pwd; exit 4", workdir="~/Desktop")
    assert result == ExecResult(4, "/home/user/Desktop\n", "")


def test_run_python(env) -> None:
    result = env.run_python("import sys\nprint(sum(range(10)))\nprint('e', file=sys.stderr)")
    assert (result.returncode, result.output, result.error) == (0, "45\n", "e\n")
    assert env.run_python("raise SystemExit(3)").returncode == 3


def test_run_action_specials(env) -> None:
    started = time.monotonic()
    assert env.run_action(Action.parse("WAIT")).ok
    assert 0.8 <= time.monotonic() - started < 3
    started = time.monotonic()
    assert env.run_action(Action.parse("DONE")) == ExecResult(0, "")
    assert env.run_action(Action.parse("FAIL")) == ExecResult(0, "")
    assert time.monotonic() - started < 0.5


def test_run_action_shell_runs_in_workdir(env) -> None:
    result = env.run_action(Action.parse("pwd && echo $HOME"), workdir="~/Documents")
    assert result.output == "/home/user/Documents\n/home/user\n"


# ---------------------------------------------------------------------------------- files


def test_write_and_read_file_roundtrip_binary(env) -> None:
    payload = bytes(range(256)) * 64 + b"\r\n\x00end"
    env.write_file("~/Documents/deep/new/blob.bin", payload)
    assert env.read_file("/home/user/Documents/deep/new/blob.bin") == payload
    assert env.execute(["stat", "-c", "%s", "/home/user/Documents/deep/new/blob.bin"]).output == f"{len(payload)}\n"


def test_read_missing_file_raises_file_not_found(env) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        env.read_file("~/nope.txt")
    assert str(caught.value) == f"~/nope.txt does not exist in environment {env.info.id}"


def test_list_directory_tree(env) -> None:
    env.run_bash("rm -rf ~/tree && mkdir -p ~/tree/a/b && touch ~/tree/a/x.txt ~/tree/top.txt")
    tree = env.list_directory("~/tree")
    assert tree == {"type": "directory", "name": "tree", "children": [
        {"type": "directory", "name": "a", "children": [
            {"type": "directory", "name": "b", "children": []},
            {"type": "file", "name": "x.txt"}]},
        {"type": "file", "name": "top.txt"}]}
    with pytest.raises(NotADirectoryError):
        env.list_directory("~/tree/top.txt")


def test_tilde_is_home_user_and_writable(env) -> None:
    assert env.run_bash("echo ~; echo $HOME; whoami").output == "/home/user\n/home/user\nuser\n"
    token = uuid.uuid4().hex
    assert env.run_bash(f"echo {token} > ~/written.txt").ok
    assert env.read_file("/home/user/written.txt") == f"{token}\n".encode()
    # Argument lists expand a leading ~/ like OSWorld's server does.
    assert env.execute(["cat", "~/written.txt"]).output == f"{token}\n"


def test_host_file_system_is_read_only(env) -> None:
    result = env.run_bash("touch /usr/osguard-probe; echo > /etc/osguard-probe; mkdir /opt/osguard-probe")
    assert result.returncode != 0
    assert "Read-only file system" in result.output or "Permission denied" in result.output
    assert not env.run_bash("test -e /usr/osguard-probe || test -e /etc/osguard-probe").ok


# ------------------------------------------------------------------------------------ GUI


def test_screenshot_is_a_png_of_the_screen(env) -> None:
    _needs_gui(env)
    from PIL import Image

    png = env.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(png)).size == env.screen_size()


def test_pyautogui_moves_the_pointer(env) -> None:
    _needs_gui(env)
    result = env.run_action(Action("pyautogui", "pyautogui.moveTo(321, 234)"))
    assert result.ok, result.error
    assert env.cursor_position() == (321, 234)
    if _has(env, "xdotool"):
        assert env.execute(["xdotool", "getmouselocation", "--shell"]).output.startswith("X=321\nY=234\n")


def test_pyautogui_typing_lands_in_a_terminal(env, wait_until) -> None:
    _needs_gui(env)
    if not _has(env, "xterm"):
        pytest.skip("xterm is not installed in this environment")
    env.run_bash("rm -f ~/typed.txt")
    env.launch(["xterm", "-title", "osguard-typing", "-e", "bash", "-c",
                'read line; printf "%s" "$line" > ~/typed.txt'])
    assert wait_until(lambda: "osguard-typing" in env.execute(["wmctrl", "-l"]).output), "xterm did not map"
    env.activate_window("osguard-typing")
    time.sleep(0.3)  # let the window manager hand over the focus
    result = env.run_action(Action("pyautogui", "pyautogui.write('hello osguard', interval=0.01); pyautogui.press('enter')"))
    assert result.ok, result.error
    typed = wait_until(lambda: env.run_bash("cat ~/typed.txt 2>/dev/null").output)
    assert typed == "hello osguard"


def test_accessibility_tree_has_ubuntu_namespaces_and_apps(env, wait_until) -> None:
    _needs_gui(env)
    if not env.capabilities.accessibility:
        pytest.skip(f"no accessibility tree here: {'; '.join(env.capabilities.notes)}")
    tree = env.accessibility_tree()
    assert tree is not None and tree.startswith("<desktop-frame ")
    for declaration in UBUNTU_NS:
        assert declaration in tree
    if not env.execute(["python3", "-c", "import gi; gi.require_version('Gtk', '3.0')"]).ok:
        pytest.skip("GTK 3 for Python is not installed in this environment")
    env.write_file("~/probe.py", GTK_PROBE.encode())
    env.launch(["python3", "~/probe.py"])
    tree = wait_until(lambda: (lambda t: t if t and "Probe Button" in t else None)(env.accessibility_tree()),
                      timeout=15, interval=0.3)
    assert tree, "the GTK window never showed up in the accessibility tree"
    from xml.etree import ElementTree

    root = ElementTree.fromstring(tree)
    buttons = [e for e in root.iter("push-button") if e.get("name") == "Probe Button"]
    assert buttons, "no push-button named 'Probe Button'"
    state_ns = "{https://accessibility.ubuntu.example.org/ns/state}"
    assert buttons[0].get(state_ns + "enabled") == "true"
    assert re.fullmatch(r"\(\d+, \d+\)", buttons[0].get("{https://accessibility.ubuntu.example.org/ns/component}size"))
    env.close_window("osguard-a11y-probe")


def test_recording_returns_an_mp4(env) -> None:
    if not env.capabilities.recording:
        pytest.skip(f"no recording here: {'; '.join(env.capabilities.notes)}")
    response = httpx.post(env.info.endpoint + "/start_recording", timeout=30)
    assert (response.status_code, response.json()) == (200, {"status": "success", "message": "Started recording."})
    again = httpx.post(env.info.endpoint + "/start_recording", timeout=30)
    assert (again.status_code, again.json()) == (400, {"status": "error", "message": "Recording is already in progress."})
    env.run_action(Action("pyautogui", "pyautogui.moveTo(100, 100); pyautogui.moveTo(900, 700, duration=0.5)"))
    time.sleep(0.5)
    response = httpx.post(env.info.endpoint + "/end_recording", timeout=60)
    assert response.status_code == 200
    assert response.content[4:8] == b"ftyp" and len(response.content) > 1000
    response = httpx.post(env.info.endpoint + "/end_recording", timeout=30)
    assert (response.status_code, response.json()) == (400, {"status": "error", "message": "No recording in progress to stop."})


def test_a_recording_stopped_at_once_still_holds_a_frame(env) -> None:
    """Never again: under load ffmpeg grabbed its first frame seconds after /start_recording
    answered, and a recording stopped before that was a 262-byte mp4 with no video in it."""
    if not env.capabilities.recording:
        pytest.skip(f"no recording here: {'; '.join(env.capabilities.notes)}")
    assert httpx.post(env.info.endpoint + "/start_recording", timeout=60).status_code == 200
    response = httpx.post(env.info.endpoint + "/end_recording", timeout=60)
    assert response.status_code == 200
    assert response.content[4:8] == b"ftyp" and b"avc1" in response.content and len(response.content) > 1000


def test_open_missing_file_and_missing_window(env) -> None:
    from osguard.errors import EnvironmentError_

    with pytest.raises(FileNotFoundError) as caught:
        env.open_file("~/Desktop/osguard-missing.txt", timeout=5)
    assert str(caught.value) == f"~/Desktop/osguard-missing.txt does not exist in environment {env.info.id}"
    if not env.capabilities.gui:
        return
    with pytest.raises(EnvironmentError_) as caught:
        env.activate_window("osguard-no-such-window", strict=True)
    assert str(caught.value) == (
        f"environment {env.info.id}: /setup/activate_window 'osguard-no-such-window' failed with HTTP 404: "
        "Window osguard-no-such-window not found"
    )
