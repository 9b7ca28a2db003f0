"""Fixtures shared by every test package.

``private_state_dir``: a fresh ``$OSGUARD_STATE_DIR`` for one test module (opt in with
``pytestmark = pytest.mark.usefixtures("private_state_dir")`` or by asking for the folder).
``local_provider``: the ``local`` provider, the module skipped with its reason where it
cannot run. The plain helpers behind them are in ``tests/_support.py``.

Run in parallel with ``-n 2`` (pytest-xdist; the README's and CI's command): every test file
is one unit of work on one worker (module fixtures start their environments once), the two
whole-suite checks (local and docker) are handed out first, one to each worker, and run at
the same time (each a few rows at once; the rest of the files follow as workers free up),
and each worker has its own default
``$OSGUARD_STATE_DIR`` so that no test's environments are seen (or cleaned up) by the other.
"""

from __future__ import annotations

import os
import tempfile
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


# Each of these replays the whole suite with several rows at once and is the longest unit of
# work by far: they start first, one on each worker, so neither waits behind the other.
SUITE_CHECKS = ("tests/variants/test_check.py", "tests/variants/test_check_docker.py")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        base = os.environ.get("OSGUARD_STATE_DIR") or tempfile.mkdtemp(prefix="osguard-tests-")
        os.environ["OSGUARD_STATE_DIR"] = str(Path(base, worker))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Units of work: a test file each (xdist's own ``loadfile`` scheduling), handed out in
    collection order (the two suite checks first, see below, so xdist gives one to each
    worker) rather than largest first."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False
    return LoadFileScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.nodeid.split("::")[0] not in SUITE_CHECKS)  # stable: checks first
