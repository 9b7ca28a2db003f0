"""Shared fixtures of the spec tests: fixture folders and the OSWorld task data."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
VALID = HERE / "valid"
MALFORMED = HERE / "malformed"
# OSWorld's task data, read in place (never copied into the project)
OSWORLD_EXAMPLES = REPO.parent / "shared" / "osworld" / "evaluation_examples"


@pytest.fixture
def osworld_examples() -> Path:
    if not (OSWORLD_EXAMPLES / "examples").is_dir():
        pytest.skip(f"OSWorld task data not found at {OSWORLD_EXAMPLES}")
    return OSWORLD_EXAMPLES


@pytest.fixture(autouse=True)
def _no_env_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests say explicitly whether the upstream data is used
    monkeypatch.delenv("OSGUARD_OSWORLD_EXAMPLES", raising=False)
