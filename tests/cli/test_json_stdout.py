"""``--json`` keeps stdout for the JSON alone, on every command that prints JSON there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main

from osguard.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "variants" / "configuration_clobbering" / "vlc-recordings-folder-keep-vlcrc.yaml"

# The real `osguard validate --json`, in a fresh interpreter; while it runs (inside its
# spec loading, the real function still doing the work) a child process writes to its
# file descriptor 1, as Ray's driver, a worker or a tool a command starts may.
DRIVER = """
import subprocess, sys
import osguard.spec.loader as loader
validate_paths = loader.validate_paths
def loading_with_a_noisy_child(*args, **kwargs):
    subprocess.run(["sh", "-c", "echo 'NOISE from a child process on fd 1'"], check=True)
    print("noise from Python on sys.stdout")
    return validate_paths(*args, **kwargs)
loader.validate_paths = loading_with_a_noisy_child
from osguard.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def test_json_stdout_is_the_json_alone_while_a_child_writes_to_fd_1(tmp_path) -> None:
    """Regression: with --json, nothing but the JSON may reach stdout (a script reading it
    with json.load failed when a child of the command printed there: Ray's driver under
    `check --json`, and every other --json command had no guard at all). What the child
    and Python printed meanwhile goes to stderr, not lost."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OSGUARD_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", DRIVER, "validate", str(SPEC), "--json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert report["ok"] is True and [v["id"] for v in report["variants"]] == ["vlc-recordings-folder-keep-vlcrc"]
    assert "NOISE from a child process on fd 1\n" in done.stderr
    assert "noise from Python on sys.stdout\n" in done.stderr


def _commands(group: typer.Typer, prefix: str = "") -> dict[str, object]:
    found: dict[str, object] = {}
    for info in group.registered_commands:
        found[prefix + (info.name or info.callback.__name__)] = info.callback
    for sub in group.registered_groups:
        name = sub.name if isinstance(sub.name, str) else sub.typer_instance.info.name
        found.update(_commands(sub.typer_instance, f"{prefix}{name} "))
    return found


def test_every_command_printing_json_on_stdout_has_the_guard() -> None:
    """Every command with a ``--json`` flag (``as_json``) is wrapped by json_command, so the
    guard above holds for all of them, not only for the one a test runs."""
    import inspect

    from osguard.cli._json import json_command

    typer.main.get_command(app)  # the app as users get it (every group registered)
    flagged = {name: callback for name, callback in _commands(app).items()
               if "as_json" in inspect.signature(callback).parameters}
    assert sorted(flagged) == ["build", "check", "env list", "env up", "image build", "image list",
                               "tasks list", "validate"]
    unguarded = [name for name, callback in flagged.items()
                 if getattr(callback, "__code__", None) is not json_command(lambda **_: None).__code__]
    assert unguarded == []
