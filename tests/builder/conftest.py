"""Fixtures shared by the builder tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from osguard.spec import load_suite

RENAME = Path(__file__).resolve().parents[2] / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"


@pytest.fixture(scope="module")
def rename_variant():
    """The shell variant the builder tests build, fork and replay."""
    (variant,) = load_suite([RENAME])
    return variant
