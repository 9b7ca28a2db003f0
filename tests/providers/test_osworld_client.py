"""OSWorld's own client drives an osguard local environment unchanged.

``desktop_env.controllers.python.PythonController`` and ``...setup.SetupController`` from
the desktop-env wheel (installed with ``pip install desktop-env --no-deps`` plus what the
controllers import) talk to our server exactly as they talk to OSWorld's VM. The setup
config of a real OSWorld task runs offline: its download step is served from a
pre-seeded cache (``cache_dir/<uuid5(NAMESPACE_URL, url)>_<basename(path)>``).
"""

from __future__ import annotations

import json
import sys
import types
import uuid
from pathlib import Path

import pytest

from osguard.providers import get_provider

TASK = Path("/work/shared/osworld/evaluation_examples/examples/os/4d117223-a354-47fb-8b45-62ab1390a95f.json")
# What the task's setup.sh builds (the real file lives on a hub we cannot reach): a
# directory tree whose regular files have assorted permissions.
SETUP_SH = """#!/bin/bash
mkdir -p testDir/sub/deeper
for f in a.txt sub/b.txt sub/deeper/c.sh; do echo "$f" > "testDir/$f"; done
chmod 600 testDir/a.txt; chmod 755 testDir/sub/deeper/c.sh; chmod 640 testDir/sub/b.txt
"""


def _controllers():
    try:
        from desktop_env.controllers.python import PythonController
    except ImportError as exc:
        pytest.skip(f"desktop-env is not installed (pip install desktop-env --no-deps): {exc}")
    try:
        from desktop_env.controllers.setup import SetupController
    except ImportError:
        # setup.py imports desktop_env.evaluators.metrics.utils only for compare_urls (chrome
        # tabs); its package __init__ pulls in every metric (torch, easyocr...). Give it
        # just that module so the controller itself is the real one.
        for name in ("desktop_env.evaluators", "desktop_env.evaluators.metrics"):
            module = types.ModuleType(name)
            module.__path__ = []  # type: ignore[attr-defined]
            sys.modules.setdefault(name, module)
        utils = types.ModuleType("desktop_env.evaluators.metrics.utils")

        def compare_urls(url1, url2, full=True):  # pragma: no cover - chrome steps only
            raise NotImplementedError("chrome tab steps are not part of this test")

        utils.compare_urls = compare_urls  # type: ignore[attr-defined]
        sys.modules["desktop_env.evaluators.metrics.utils"] = utils
        try:
            from desktop_env.controllers.setup import SetupController
        except ImportError as exc:
            pytest.skip(f"desktop-env's SetupController cannot be imported: {exc}")
    return PythonController, SetupController


@pytest.fixture(scope="module")
def local_env():
    provider = get_provider("local")
    reason = provider.available()
    if reason:
        pytest.skip(f"provider local is not available here: {reason}")
    env = provider.start(timeout=60)
    yield env
    env.stop()


def _port(env) -> int:
    return int(env.info.endpoint.rsplit(":", 1)[1])


def test_python_controller_observations_and_files(local_env) -> None:
    PythonController, _ = _controllers()
    controller = PythonController("127.0.0.1", _port(local_env))
    controller.retry_interval = 0.1  # its retries on a missing file would sleep 3 x 5 s
    if local_env.capabilities.gui:
        png = controller.get_screenshot()
        assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n"
        assert controller.get_vm_screen_size() == {"width": 1920, "height": 1080}
        controller.execute_python_command("pyautogui.moveTo(77, 88)")
        assert local_env.cursor_position() == (77, 88)
    if local_env.capabilities.accessibility:
        tree = controller.get_accessibility_tree()
        assert tree.startswith("<desktop-frame ") and "accessibility.ubuntu.example.org/ns/state" in tree
    assert controller.get_vm_platform() == "Linux"
    result = controller.run_bash_script("echo from-bash; echo oops >&2; exit 2", timeout=20)
    assert result["returncode"] == 2 and result["output"] == "from-bash\noops\n"
    result = controller.run_python_script("print(6 * 7)")
    assert result["status"] == "success" and result["output"] == "42\n"
    local_env.write_file("~/Desktop/notes.txt", b"hello from osguard\n")
    assert controller.get_file("/home/user/Desktop/notes.txt") == b"hello from osguard\n"
    assert controller.get_file("/home/user/Desktop/absent.txt") is None
    assert controller.get_vm_desktop_path() == "/home/user/Desktop"
    tree = controller.get_vm_directory_tree("/home/user/Desktop")
    assert tree == {"type": "directory", "name": "Desktop", "children": [{"type": "file", "name": "notes.txt"}]}


def test_python_controller_records_the_screen(local_env, tmp_path: Path) -> None:
    PythonController, _ = _controllers()
    if not local_env.capabilities.recording:
        pytest.skip("no recording here: " + "; ".join(local_env.capabilities.notes))
    controller = PythonController("127.0.0.1", _port(local_env))
    controller.retry_interval = 0.1
    controller.start_recording()
    controller.execute_python_command("pyautogui.moveTo(10, 10); pyautogui.moveTo(800, 600, duration=0.5)")
    target = tmp_path / "recording.mp4"
    controller.end_recording(str(target))
    assert target.read_bytes()[4:8] == b"ftyp"


def test_setup_controller_runs_a_real_task_config_offline(local_env, tmp_path: Path) -> None:
    _, SetupController = _controllers()
    task = json.loads(TASK.read_text())
    cache_dir = tmp_path / "cache" / task["id"]
    cache_dir.mkdir(parents=True)
    for step in task["config"]:
        if step["type"] == "download":
            for spec in step["parameters"]["files"]:
                cached = cache_dir / f"{uuid.uuid5(uuid.NAMESPACE_URL, spec['url'])}_{Path(spec['path']).name}"
                cached.write_text(SETUP_SH)
    upload = tmp_path / "extra.bin"
    upload.write_bytes(bytes(range(256)))
    config = task["config"] + [
        {"type": "upload_file", "parameters": {"files": [{"local_path": str(upload), "path": "/home/user/extra.bin"}]}},
    ]
    controller = SetupController("127.0.0.1", _port(local_env), cache_dir=str(cache_dir))
    assert controller.setup(config) is not False
    # The download step was served from the cache and uploaded; the execute steps ran it.
    listing = local_env.run_bash("cd ~/testDir && find . -type f -printf '%p %m\\n' | sort").output
    assert listing == "./a.txt 600\n./sub/b.txt 640\n./sub/deeper/c.sh 755\n"
    assert local_env.read_file("~/setup.sh").decode() == SETUP_SH
    assert local_env.read_file("/home/user/extra.bin") == bytes(range(256))
    if local_env.capabilities.gui:
        # pyautogui.hotkey('ctrl', 'alt', 't') opened a terminal, and activate_window found it.
        assert "Terminal" in local_env.execute(["wmctrl", "-l"]).output
