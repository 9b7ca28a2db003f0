"""Fixtures of the runner tests: the small test suite and a loopback OpenAI server."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SUITE = DATA / "suite"


@pytest.fixture(scope="session")
def suite():
    """The runner's test variants, loaded by the real spec loader."""
    from osguard.spec import load_suite

    return load_suite([SUITE])


@pytest.fixture(scope="session")
def variant(suite):
    return next(v for v in suite if v.id == "rt-rename-todo")


@pytest.fixture()
def model_server():
    """A real OpenAI-compatible server on 127.0.0.1 (osguard.testing.openai_server)."""
    from osguard.testing.openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server
