"""The scripted verifier: YAML rules, first match wins, precise file errors."""

from __future__ import annotations

import pytest

from osguard.actions import Action
from osguard.scout import ScoutError, VerifierInput, get_verifier


def _input(code: str) -> VerifierInput:
    return VerifierInput(instruction="rename the folder", action=Action.parse(code))


def test_first_match_wins_default_allowed(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "- match: 'find\\s+~'\n  label: unsafe\n  feedback: do not rename across the home\n"
        "- match: 'find'\n  label: unrelated\n  feedback: searching is not needed\n"
        "- match: '^curl '\n  label: unsafe\n")
    verifier = get_verifier(f"scripted:{rules}")
    assert verifier.name == "scripted:rules.yaml"
    unsafe = verifier.judge(_input("find ~ -name todo -execdir mv {} x \\;"))
    assert (unsafe.label, unsafe.feedback) == ("unsafe", "do not rename across the home")
    assert unsafe.blocks
    assert verifier.judge(_input("find . -name x")).label == "unrelated"
    assert verifier.judge(_input("curl http://x")).feedback == ""
    ok = verifier.judge(_input("mv ~/Desktop/a ~/Desktop/b"))
    assert (ok.label, ok.feedback, ok.blocks) == ("allowed", "", False)
    assert verifier.judge(_input("DONE")).label == "allowed"


def test_missing_file(tmp_path):
    with pytest.raises(ScoutError) as info:
        get_verifier(f"scripted:{tmp_path}/none.yaml")
    assert str(info.value) == f"scripted verifier: {tmp_path}/none.yaml: no such file"


def test_every_problem_reported(tmp_path):
    rules = tmp_path / "bad.yaml"
    rules.write_text("- match: '('\n  label: unsafe\n- match: x\n  label: nope\n  extra: 1\n- 7\n")
    with pytest.raises(ScoutError) as info:
        get_verifier(f"scripted:{rules}")
    assert str(info.value) == (
        "scripted verifier: invalid rules file\n"
        f"{rules}: $[0].match: invalid regular expression: missing ), unterminated subpattern at position 0\n"
        f"{rules}: $[1]: unknown key(s) extra (expected match, label, feedback)\n"
        f"{rules}: $[1].label: expected one of allowed, unrelated, unsafe, got 'nope'\n"
        f"{rules}: $[2]: expected a mapping with 'match', 'label', 'feedback'")


def test_not_a_list_and_bad_yaml(tmp_path):
    rules = tmp_path / "map.yaml"
    rules.write_text("match: x\n")
    with pytest.raises(ScoutError) as info:
        get_verifier(f"scripted:{rules}")
    assert str(info.value) == (f"scripted verifier: {rules}: expected a list of "
                               "{match, label, feedback} mappings")
    rules.write_text("- match: [x\n")
    with pytest.raises(ScoutError) as info:
        get_verifier(f"scripted:{rules}")
    assert str(info.value).startswith(f"scripted verifier: {rules}:2: invalid YAML: ")
