"""The suite's coverage table (`osguard validate --coverage`) and docs/suite.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osguard.actions import Action
from osguard.cli.app import main
from osguard.spec.coverage import REGENERATE, coverage, reference_length, suite_markdown
from osguard.spec.loader import validate_paths

from .conftest import REPO, VALID


def test_reference_length_drops_only_a_closing_done_or_fail() -> None:
    parse = Action.parse
    assert reference_length([parse("ls"), parse("WAIT"), parse("DONE")]) == 2
    assert reference_length([parse({"pyautogui": "pyautogui.press('a')"}), parse("FAIL")]) == 1
    assert reference_length([parse("DONE")]) == 0
    assert reference_length([parse("ls"), parse("WAIT")]) == 2
    assert reference_length([]) == 0


def test_fixture_suite_coverage() -> None:
    """The five fixture specs: counted by hand from tests/spec/valid/."""
    variants, problems = validate_paths([VALID])
    assert problems == []
    cov = coverage(variants)
    rows = {r.id: r for r in cov.rows}
    assert [r.id for r in cov.rows] == ["every-step", "requires-list", "minimal-rename", "targets-alternatives",
                                        "window-timeout"]  # by family, then id
    assert (rows["every-step"].gui, rows["every-step"].safe_length) == (True, 3)  # pyautogui, shell, WAIT
    assert not rows["every-step"].long_gui
    assert (rows["minimal-rename"].gui, rows["minimal-rename"].safe_length) == (False, 1)
    assert [a[:3] for a in rows["targets-alternatives"].alternatives] == [
        ("safe", "python-rename", False), ("unsafe", "wipe-archive", True), ("overcautious", "look-only", False)]
    assert cov.summary() == (
        "5 variants over 2 domains and 3 families; 1 GUI (0 with a GUI safe reference of >= 5 actions), 4 shell; "
        "safe reference length min 1, median 1, max 3; 3 alternatives (1 safe, 1 unsafe of which 1 sneaky, "
        "1 overcautious)")


def test_validate_coverage_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(VALID), "--coverage"]) == 0
    out = capsys.readouterr().out
    lines = [" ".join(line.replace("│", " ").split()) for line in out.splitlines()]
    assert "domain ┃ variants ┃ gui ┃ shell ┃ gui>=5 ┃ safe len ┃ alternatives" in lines
    assert "os 4 0 4 0 1 3" in lines
    assert "vs_code 1 1 0 0 3 0" in lines
    assert "wrong_target_or_globalized_update 3 0 3 0 1 3" in lines
    assert "configuration_clobbering 1 1 0 0 3 0" in lines
    assert lines.count("total 5 1 4 0 1 3") == 2
    assert out.rstrip().endswith("5 variants valid (instructions not checked against OSWorld: no --osworld-examples)")


def test_validate_coverage_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(VALID), "--coverage", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["coverage"]
    assert report["by_domain"]["os"] == {"variants": "4", "gui": "0", "shell": "4", "gui>=5": "0", "safe len": "1",
                                         "alternatives": "3"}
    assert report["by_family"]["total"]["variants"] == "5"
    assert {v["id"]: v["safe_length"] for v in report["variants"]}["every-step"] == 3


def test_real_suite_coverage_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    """Every spec file of variants/ is counted once, in its folder's family."""
    suite = REPO / "variants"
    files = sorted(suite.rglob("*.yaml"))
    assert main(["validate", str(suite), "--coverage", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["coverage"]
    assert len(report["variants"]) == len(files)
    for family, row in report["by_family"].items():
        if family != "total":
            assert int(row["variants"]) == len(list((suite / family).glob("*.yaml")))
            assert int(row["gui"]) + int(row["shell"]) == int(row["variants"])
    assert int(report["by_domain"]["total"]["variants"]) == len(files)
    assert sum(v["long_gui"] for v in report["variants"]) == int(report["by_family"]["total"]["gui>=5"])


def test_docs_suite_md_is_up_to_date() -> None:
    """docs/suite.md lists every variant of variants/: it must never go stale silently."""
    variants, problems = validate_paths([REPO / "variants"])
    assert problems == []
    expected = suite_markdown(coverage(variants, REPO / "variants"))
    page = REPO / "docs" / "suite.md"
    assert page.read_text(encoding="utf-8") == expected, f"docs/suite.md is out of date: run `{REGENERATE}`"


def test_regenerate_writes_the_page(tmp_path: Path) -> None:
    from osguard.spec.coverage import main as coverage_main

    out = tmp_path / "suite.md"
    assert coverage_main([str(VALID), "--write", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "### targets-alternatives" in text
    assert "  - unsafe, sneaky `wipe-archive`: renames, then deletes the archived folder" in text
    assert "- references: shell; safe 1 action, unsafe 1 action" in text
