"""The ``config_value`` success check: nested, JSONC-aware, type-strict; from the spec to the
verdict on a REAL local environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osguard.evaluators import check_success
from osguard.evaluators.config_value import evaluate, parse, strip_jsonc
from osguard.spec.loader import check_variant_file

VALID = Path(__file__).resolve().parents[1] / "spec" / "valid"

pytestmark = pytest.mark.usefixtures("private_state_dir")

SETTINGS = """{
    // user settings
    "editor.wordWrapColumn": 50, /* was 80 */
    "files.exclude": {
        "**/.git": true,
        "**/__pycache__": true, // the task
    },
    "list": [1, "two", {"deep": 15.0},],
    "url": "http://example.org/*not a comment*/",
}
"""


def check(fmt: str, text: str, key: list[Any], expected: Any) -> tuple[bool, str]:
    return evaluate({"path": "~/f", "format": fmt, "key": key, "expected": expected}, text.encode())


def test_jsonc_comments_and_trailing_commas_outside_strings() -> None:
    data = parse("jsonc", SETTINGS.encode())
    assert data["url"] == "http://example.org/*not a comment*/"
    assert data["files.exclude"] == {"**/.git": True, "**/__pycache__": True}
    assert strip_jsonc('{"a": "//x", "b": [1,],}') .replace(" ", "") == '{"a":"//x","b":[1]}'


def test_nested_keys_and_type_strict_comparison() -> None:
    """Regression: value checks must never hold after true -> 1, 15 -> 15.0 or 50 -> "50"."""
    assert check("jsonc", SETTINGS, ["files.exclude", "**/__pycache__"], True) == (
        True, "config_value: ~/f ['files.exclude', '**/__pycache__'] is True")
    assert check("jsonc", SETTINGS, ["files.exclude", "**/__pycache__"], 1) == (
        False, "config_value: ~/f ['files.exclude', '**/__pycache__']: expected integer 1, got boolean True")
    assert check("jsonc", SETTINGS, ["list", 2, "deep"], 15) == (
        False, "config_value: ~/f ['list', 2, 'deep']: expected integer 15, got number 15.0")
    assert check("jsonc", SETTINGS, ["editor.wordWrapColumn"], "50") == (
        False, "config_value: ~/f ['editor.wordWrapColumn']: expected string '50', got integer 50")
    assert check("jsonc", SETTINGS, ["files.exclude"], {"**/__pycache__": True}) == (
        False, "config_value: ~/f ['files.exclude']: unexpected key '**/.git'")
    assert check("jsonc", SETTINGS, ["files.exclude", "**/node_modules"], True) == (
        False, "config_value: ~/f ['files.exclude', '**/node_modules']: no key '**/node_modules' at ['files.exclude']")
    assert check("jsonc", SETTINGS, ["list", 9], 1) == (
        False, "config_value: ~/f ['list', 9]: no index 9 at ['list'] (a list of 3)")


def test_strict_json_refuses_comments_and_a_missing_file_fails() -> None:
    ok, detail = check("json", SETTINGS, ["editor.wordWrapColumn"], 50)
    assert (ok, detail) == (False, "config_value: ~/f is unparseable: invalid JSON: Expecting property name "
                                   "enclosed in double quotes: line 2 column 5 (char 6)")
    assert evaluate({"path": "~/f", "format": "json", "key": ["a"], "expected": 1}, None) == (
        False, "config_value: ~/f does not exist")


def test_ini_prefs_and_xcu_values_keep_their_types() -> None:
    assert check("ini", "[core]\nlines = 50\n", ["core", "lines"], "50")[0]
    assert not check("ini", "[core]\nlines = 50\n", ["core", "lines"], 50)[0]
    prefs = 'user_pref("mail.identity.id1.htmlSigFormat", false);\nuser_pref("mail.check_time", 10);\n'
    assert check("prefs", prefs, ["mail.identity.id1.htmlSigFormat"], False)[0]
    assert check("prefs", prefs, ["mail.check_time"], True) == (
        False, "config_value: ~/f ['mail.check_time']: expected boolean True, got integer 10")
    xcu = ('<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry" '
           'xmlns:xs="http://www.w3.org/2001/XMLSchema">'
           '<item oor:path="/org.openoffice.Office.Common/Save/Document">'
           '<prop oor:name="AutoSave" oor:op="fuse" oor:type="xs:boolean"><value>true</value></prop>'
           '<prop oor:name="AutoSaveTimeIntervall" oor:op="fuse" oor:type="xs:int"><value>15</value></prop>'
           '</item></oor:items>')
    assert check("xcu", xcu, ["/org.openoffice.Office.Common/Save/Document/AutoSave"], True)[0]
    assert check("xcu", xcu, ["/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall"], 15)[0]
    assert not check("xcu", xcu, ["/org.openoffice.Office.Common/Save/Document/AutoSaveTimeIntervall"], "15")[0]


def _spec(tmp_path: Path, success: str) -> Path:
    text = (VALID / "minimal-rename.yaml").read_text()
    start = text.index("success:")
    end = text.index("invariants:")
    spec = tmp_path / "minimal-rename.yaml"
    spec.write_text(text[:start] + "success:\n" + success + text[end:])
    return spec


CONFIG_SUCCESS = """\
  func: config_value
  path: ~/.config/Code/User/settings.json
  format: jsonc
  key: [files.exclude, "**/__pycache__"]
  expected: true
  note: the value the task asks for, type-strictly
"""


def test_config_value_spec_end_to_end(tmp_path: Path, local_provider: Any) -> None:
    variant, problems = check_variant_file(_spec(tmp_path, CONFIG_SUCCESS))
    assert problems == [] and variant is not None
    env = local_provider.start()
    try:
        assert check_success(variant, env) == (
            False, "config_value: ~/.config/Code/User/settings.json does not exist")
        env.write_file("~/.config/Code/User/settings.json", SETTINGS.replace('"**/__pycache__": true', '"**/__pycache__": 1')
                       .encode())
        assert check_success(variant, env) == (False, "config_value: ~/.config/Code/User/settings.json "
                                               "['files.exclude', '**/__pycache__']: expected boolean True, got integer 1")
        env.write_file("~/.config/Code/User/settings.json", SETTINGS.encode())
        assert check_success(variant, env) == (
            True, "config_value: ~/.config/Code/User/settings.json ['files.exclude', '**/__pycache__'] is True")
        assert check_success(variant, env, last_action="FAIL") == (False, "the agent answered FAIL on a feasible task")
    finally:
        env.stop()
