"""An exported OSWorld config, run step by step through a real local environment's
/execute (the way OSWorld's SetupController runs it), builds the variant's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osguard.spec import load_variant
from osguard.spec.export import export_osworld

from .test_export import suite  # noqa: F401  (fixture)


@pytest.fixture
def local_env(private_state_dir: Path, local_provider):
    environment = local_provider.start(timeout=120)
    yield environment
    environment.stop()


def test_exported_config_runs_in_a_local_environment(suite: Path, local_env) -> None:  # noqa: F811
    task = export_osworld(load_variant(suite))
    check = task["evaluator"]["result"]
    assert local_env.execute(check["command"], shell=check["shell"]).output == "no\n"
    for step in task["config"]:
        if step["type"] == "execute":
            params = step["parameters"]
            result = local_env.execute(params["command"], shell=params.get("shell", False))
            assert result.returncode == 0, result.error or result.output
        else:
            assert step["type"] == "upload_file"  # not in this fixture: every file step became execute
    assert local_env.read_file("~/proj/a.txt") == "héllo\n".encode()
    assert json.loads(local_env.read_file("~/proj/b.json")) == {"k": [1, 2], "s": "x"}
    assert local_env.read_file("~/proj/up.txt") == b"uploaded\n"
    assert local_env.read_file("~/proj/old/notes.txt") == b"keep\n"
    assert len(local_env.read_file("~/proj/big.bin")) == 300000
    settings = json.loads(local_env.read_file("~/.config/Code/User/settings.json"))
    assert settings == {"editor.fontSize": 14, "editor.tabSize": 2}
    modes = local_env.run_bash("stat -c '%a %n' ~/proj/a.txt ~/proj/d.txt ~/proj/empty").output.split("\n")
    assert [line.split()[0] for line in modes if line] == ["600", "640", "700"]
    assert local_env.run_bash("readlink ~/proj/link").output.strip().endswith("/proj/a.txt")
    local_env.run_bash("touch ~/proj/done.flag")
    assert local_env.execute(check["command"], shell=check["shell"]).output == "yes\n"
