"""Fixtures of the invariant tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from invariant_home import Home


@pytest.fixture
def home(tmp_path: Path) -> Home:
    root = tmp_path / "home"
    root.mkdir()
    return Home(root)


@pytest.fixture
def sleeper():
    """A real process with a distinctive command line, killed at teardown."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "osguard-test-sleeper"])
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()
