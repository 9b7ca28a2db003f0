"""Fixtures shared by every test package.

``private_state_dir``: a fresh ``$OSGUARD_STATE_DIR`` for one test module (opt in with
``pytestmark = pytest.mark.usefixtures("private_state_dir")`` or by asking for the folder).
``local_provider``: the ``local`` provider, the module skipped with its reason where it
cannot run. The plain helpers behind them are in ``tests/_support.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _support import available_provider, state_dir


@pytest.fixture(scope="module")
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh state folder, set as ``$OSGUARD_STATE_DIR`` for the module's tests."""
    with state_dir(tmp_path_factory.mktemp("osguard-envs")) as folder:
        yield folder


@pytest.fixture(scope="module")
def local_provider() -> object:
    """The ``local`` provider (bubblewrap sandbox), or a skip saying why it cannot run."""
    return available_provider("local")
