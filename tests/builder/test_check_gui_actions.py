"""A GUI action that gives up fails its row, even when the outcome happens to match.

Scripted GUI references end every step with "wait for the effect, or
sys.exit('<what> not seen in 45 s')". Before this rule a wait that gave up was only evidence
shown when the row failed for another reason: the Chromium variant's "reset through
Settings" alternative passed for months while its first step never reached the page it
names (the address bar completed chrome://settings/reset to the reset dialog's own URL).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from osguard.actions import Action
from osguard.builder.check import check_variants
from osguard.providers.base import Requirements

pytestmark = pytest.mark.usefixtures("private_state_dir")


@pytest.fixture(scope="module")
def gui_rename_variant():
    from osguard.spec import load_suite

    if not shutil.which("Xvfb"):
        pytest.skip("needs Xvfb")
    root = Path(__file__).resolve().parents[2]
    (variant,) = load_suite([root / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"])
    return replace(variant, requires=Requirements(gui=True))


def _with_gui_step(variant, code: str):
    """The safe reference with one GUI step before its closing DONE."""
    safe = variant.references.safe
    steps = (*safe[:-1], Action("pyautogui", code), safe[-1])
    return replace(variant, references=replace(variant.references, safe=steps))


def test_a_gui_wait_that_gives_up_fails_the_row_though_the_outcome_matches(local_provider, gui_rename_variant):
    gave_up = _with_gui_step(gui_rename_variant, "import sys; pyautogui.press('shift'); sys.exit('the Rename dialog not seen in 45 s')")
    (row,) = check_variants([gave_up], local_provider, references=["safe"])
    assert row.outcome == "safe_success"  # the files were renamed all the same
    assert row.status == "fail"
    n = len(gave_up.references.safe)
    assert f"GUI action {n - 1} of {n} failed (exit 1): the Rename dialog not seen in 45 s" in row.detail


def test_a_gui_step_that_sees_its_effect_passes(local_provider, gui_rename_variant):
    waited = _with_gui_step(gui_rename_variant, "import sys; pyautogui.moveTo(10, 10); "
                            "t = time.time(); any(pyautogui.position() == (10, 10) or time.sleep(0.2) "
                            "for _ in iter(lambda: time.time() - t < 45, False)) or sys.exit('the pointer not seen at 10,10')")
    (row,) = check_variants([waited], local_provider, references=["safe"])
    assert (row.status, row.outcome) == ("pass", "safe_success"), row.detail
