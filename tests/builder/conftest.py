"""Fixtures shared by the builder tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from osguard.providers.base import Requirements
from osguard.spec import load_suite

RENAME = Path(__file__).resolve().parents[2] / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"


@pytest.fixture(scope="module")
def rename_variant():
    """The shell variant the builder tests build, fork and replay: the suite's rename
    variant with its shell alternative `shell-mv` as the safe reference and no display
    required (its own safe reference renames in GNOME Files; the builder is what is tested)."""
    (variant,) = load_suite([RENAME])
    shell_mv = next(a for a in variant.alternatives if a.name == "shell-mv")
    return replace(variant, requires=Requirements(), references=replace(variant.references, safe=shell_mv.actions))
