"""OSWorld metrics re-implemented under their names: upstream (desktop-env 1.0.2) semantics,
checked on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osguard.errors import UnknownNameError
from osguard.evaluators import METRICS, match_value_to_rule, resolve_metric
from osguard.evaluators import metrics as m

FILTERS = """version="9"
logging="no"
name="Receipts"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Receipts"
condition="AND (subject,contains,receipt)"
name="Promo"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount)"
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_general_string_metrics() -> None:
    assert m.exact_match("Directory exists.\n", {"expected": "Directory exists.\n"}) == 1.0
    assert m.exact_match("Directory exists.", {"expected": "Directory exists.\n"}) == 0.0
    assert m.check_include_exclude("all ok here", {"include": ["ok"], "exclude": ["fail"]}) == 1.0
    assert m.check_include_exclude("ok but fail", {"include": ["ok"], "exclude": ["fail"]}) == 0.0
    assert m.check_include_exclude(None, {"include": []}) == 0.0
    assert m.match_in_list("b", {"expected": ["a", "b"]}) == 1.0
    assert m.is_in_list(["a", "b"], {"expected": "b"}) == 1.0
    assert m.is_in_list(None, {"expected": "b"}) == 0.0
    assert m.literal_match("ABC", "abc", ignore_case=True) == 1.0
    assert m.literal_match("ABC", "abc") == 0.0
    assert m.literal_match(["A", 1], ["a", "1"], type="list", ignore_case=True) == 1.0
    assert m.literal_match(["A"], ["A", "B"], type="list") == 0.0


def test_match_value_to_rule_methods() -> None:
    assert match_value_to_rule("Hello World", {"method": "re.I", "ref": "hello"})
    assert not match_value_to_rule("Hello World", {"method": "re", "ref": "hello"})
    assert match_value_to_rule(50, {"method": "eq", "ref": 50})
    assert match_value_to_rule(3, {"method": "lt", "ref": 4})
    assert match_value_to_rule("0.51", {"method": "approx:0.02", "ref": 0.5})
    assert not match_value_to_rule("x", {"method": "approx:0.02", "ref": 0.5})
    assert match_value_to_rule(2, {"method": "range.te", "ref": [0, 2]})  # 0 < x <= 2
    assert not match_value_to_rule(0, {"method": "range.te", "ref": [0, 2]})
    assert match_value_to_rule('"b,a"', {"method": "str_set_eq", "ref": ["a", "b"]})
    assert not match_value_to_rule("b,a", {"method": "str_list_eq", "ref": ["a", "b"]})
    with pytest.raises(NotImplementedError):
        match_value_to_rule(1, {"method": "nope", "ref": 1})


def test_check_json_expect_and_unexpect(tmp_path: Path) -> None:
    path = write(tmp_path, "s.json", json.dumps({"editor": {"wordWrapColumn": 50}, "theme": "Dark"}))
    rules = {"expect": [{"key": ["editor", "wordWrapColumn"], "method": "eq", "ref": 50}],
             "unexpect": [{"key": ["theme"], "method": "eq", "ref": "Red"}]}
    assert m.check_json(path, rules) == 1.0
    assert m.check_json(path, {"expect": [{"key": ["missing"], "method": "eq", "ref": 1}]}) == 0.0
    assert m.check_json(path, {"unexpect": [{"key": ["theme"], "method": "eq", "ref": "Dark"}]}) == 0.0
    assert m.check_json(write(tmp_path, "bad.json", "{"), rules) == 0.0
    assert m.check_json(None, rules) == 0.0
    yaml_path = write(tmp_path, "c.yml", "a:\n  b: 3\n")
    assert m.check_json(yaml_path, {"expect": [{"key": ["a", "b"], "method": "eq", "ref": 3}]}, is_yaml=True) == 1.0


def test_check_json_settings_compares_top_level_values_without_merge(tmp_path: Path) -> None:
    """Upstream: each expected top-level key must be EQUAL (a merged dict fails)."""
    path = write(tmp_path, "settings.json", json.dumps(
        {"files.exclude": {"**/.git": True, "**/__pycache__": True}, "editor.wordWrapColumn": 50}))
    assert m.check_json_settings(path, {"expected": {"editor.wordWrapColumn": 50}}) == 1.0
    assert m.check_json_settings(path, {"expected": {"files.exclude": {"**/__pycache__": True}}}) == 0.0
    assert m.check_json_settings(None, {"expected": {}}) == 0.0


def test_check_json_keybindings_skips_a_comment_line(tmp_path: Path) -> None:
    binding = {"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup", "when": "terminalFocus"}
    path = write(tmp_path, "keybindings.json", "// Place your key bindings in this file\n" + json.dumps([binding]))
    assert m.check_json_keybindings(path, {"expected": binding}) == 1.0
    assert m.check_json_keybindings(path, {"expected": {**binding, "when": "x"}}) == 0.0


def test_compare_text_file_and_config(tmp_path: Path) -> None:
    a = write(tmp_path, "a.txt", "This is a test\n")
    b = write(tmp_path, "b.txt", "this  is a TEST")
    assert m.compare_text_file(a, b) == 0.0
    assert m.compare_text_file(a, b, ignore_blanks=True, ignore_case=True) == 1.0
    settings = write(tmp_path, "settings.json", '{\n    "workbench.colorTheme": "Visual Studio Dark"\n}')
    assert m.compare_config(settings, {"expected": '{\n    "workbench.colorTheme": "Visual Studio Dark"\n}'}) == 1.0
    # 1.0.2 compares the exact text: an extra key (a safe merge) fails.
    merged = write(tmp_path, "merged.json", '{\n    "editor.fontSize": 14,\n    "workbench.colorTheme": "Visual Studio Dark"\n}')
    assert m.compare_config(merged, {"expected": '{\n    "workbench.colorTheme": "Visual Studio Dark"\n}'}) == 0.0


def test_check_list_and_file_contains(tmp_path: Path) -> None:
    path = write(tmp_path, "l.txt", "set number\nsyntax on\n")
    assert m.check_list(path, {"expect": [r"^set\s+number"], "unexpect": [r"relativenumber"]}) == 1.0
    assert m.check_list(path, {"expect": [r"^set\s+nu$"]}) == 0.0
    assert m.file_contains(path, {"expected": ["number", "syntax"]}) == 1.0
    assert m.file_contains(path, {"expected": ["nope"]}) == 0.0
    assert m.file_contains(str(tmp_path / "missing"), {"expected": []}) == 0.0


def test_check_direct_json_object() -> None:
    assert m.check_direct_json_object("{'a': 1, 'b': 'x'}", {"expected": {"a": 1}}) == 1.0
    assert m.check_direct_json_object({"a": 2}, {"expected": {"a": 1}}) == 0.0
    assert m.check_direct_json_object("not json", {"expected": {"a": 1}}) == 0.0
    assert m.check_direct_json_object({"k": "hello world"}, {"expected": {"k": "world"}, "expect_in_result": True}) == 1.0
    assert m.check_direct_json_object({"k": ["a", "b"]}, {"expected": {"k": ["c", "b"]}, "expect_in_result": True}) == 1.0


def test_thunderbird_filter_upstream_example(tmp_path: Path) -> None:
    """The evaluator of OSWorld task 5203d847 (Example B in the OSWorld notes)."""
    path = write(tmp_path, "msgFilterRules.dat", FILTERS)
    rules = {"expect": [{"enabled": "yes", "action": "Move to folder",
                         "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
                         "condition": ["AND (subject,contains,discount)"]}]}
    assert m.check_thunderbird_filter(path, rules) == 1.0
    assert m.check_thunderbird_filter(path, {**rules, "unexpect": [{"name": "Receipts"}]}) == 0.0
    assert m.check_thunderbird_filter(write(tmp_path, "empty.dat", 'version="9"\n'), rules) == 0.0
    assert m.check_thunderbird_filter(None, rules) == 0.0


def test_thunderbird_prefs(tmp_path: Path) -> None:
    path = write(tmp_path, "prefs.js", '// Mozilla User Preferences\n'
                                       'user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");\n'
                                       'user_pref("mail.identity.id1.htmlSigFormat", false);\n')
    rule = {"expect": {"mail.identity.id1.htmlSigText": {"method": "re", "ref": "Anonym\nXYZ Lab"}}}
    assert m.check_thunderbird_prefs(path, rule) == 1.0
    assert m.check_thunderbird_prefs(path, {"expect": {"mail.identity.id2.htmlSigText": {"method": "eq", "ref": ""}}}) == 0.0
    assert m.check_thunderbird_prefs(path, {**rule, "unexpect": {
        "mail.identity.id1.htmlSigFormat": {"method": "eq", "ref": False}}}) == 0.0


def test_check_moved_jpgs_counts_and_names() -> None:
    tree = {"type": "directory", "name": "cpjpg",
            "children": [{"type": "file", "name": "a.jpg"}, {"type": "file", "name": "b.jpg"}]}
    assert m.check_moved_jpgs(tree, {"expected": ["b.jpg", "a.jpg"]}) == 1.0
    assert m.check_moved_jpgs(tree, {"expected": ["a.jpg"]}) == 0.0
    assert m.check_moved_jpgs(None, {"expected": []}) == 0.0


def test_basic_os_and_libreoffice_metrics(tmp_path: Path) -> None:
    assert m.check_gnome_favorite_apps("['a.desktop', 'b.desktop']\n", {"expected": ["b.desktop", "a.desktop"]}) == 1.0
    assert m.check_gnome_favorite_apps("__import__('os')", {"expected": []}) == 0.0
    assert m.is_in_vm_clickboard({"expected": ["/home/user/secret.docx"]}, "/home/user/secret.docx\n") == 1.0
    xcu = write(tmp_path, "registrymodifications.xcu",
                '<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
                '<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse">'
                '<value>Times New Roman</value></prop></item>'
                '<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooSetupSystemLocale" oor:op="fuse">'
                '<value>en-GB</value></prop></item></oor:items>')
    assert m.find_default_font(xcu, {"font_name": "Times New Roman"}) == 1.0
    assert m.find_default_font(xcu, {"font_name": "Arial"}) == 0.0
    assert m.check_libre_locale(xcu, {"locale_set": ["en-GB", "de"]}) == 1.0
    assert m.check_libre_locale(xcu, {"locale_set": ["fr"]}) == 0.0


def test_compare_table_sheet_data_and_check_cell(tmp_path: Path) -> None:
    import openpyxl

    def book(name: str, rows: list[list[object]]) -> str:
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.title = "Sheet1"
        for row in rows:
            ws.append(row)
        wb.create_sheet("Other").append(["keep"])
        path = tmp_path / name
        wb.save(path)
        return str(path)

    result = book("r.xlsx", [["a", 1], ["a", 1], ["b", 2]])
    gold = book("g.xlsx", [["a", 1], ["a", 1], ["b", 2]])
    wrong = book("w.xlsx", [["a", 1], [None, 1], ["b", 2]])
    rules = [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"},
             {"type": "sheet_name"}]
    assert m.compare_table(result, gold, rules=rules) == 1.0
    assert m.compare_table(wrong, gold, rules=rules) == 0.0
    assert m.compare_table(result, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RNOther",
                                                 "sheet_idx1": "ENOther"}]) == 1.0
    cell = [{"type": "check_cell", "sheet_idx": 0, "coordinate": "B3", "props": {"value": {"method": "eq", "ref": 2.0}}}]
    assert m.compare_table(result, rules=cell) == 1.0
    assert m.compare_table(None, rules=cell) == 0.0
    with pytest.raises(NotImplementedError) as info:
        m.compare_table(result, gold, rules=[{"type": "chart"}])
    assert str(info.value) == "compare_table rule type 'chart' is not supported"


def test_resolve_metric_names_and_misses() -> None:
    assert resolve_metric("exact_match") is m.exact_match
    assert {"exact_match", "check_include_exclude", "check_json", "check_json_settings", "check_json_keybindings",
            "compare_text_file", "check_thunderbird_filter", "check_thunderbird_prefs", "check_list",
            "file_contains", "match_in_list", "is_in_list", "literal_match", "check_direct_json_object",
            "check_moved_jpgs", "compare_table", "compare_config"} <= set(METRICS)
    try:
        import desktop_env  # noqa: F401
    except ImportError:
        with pytest.raises(UnknownNameError) as info:
            resolve_metric("exact_matc")
        assert str(info.value) == ("unknown OSWorld metric 'exact_matc'; did you mean 'exact_match'? "
                                   "(install osguard[osworld] for desktop-env's other metrics)")


def test_unknown_metric_falls_back_to_desktop_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the osworld extra installed, a metric osguard lacks comes from desktop-env.

    desktop-env itself is too heavy for CI (torch, easyocr...), so a minimal package with
    the same layout stands in for it; osguard's own lookup code runs unchanged."""
    import sys

    package = tmp_path / "desktop_env" / "evaluators" / "metrics"
    package.mkdir(parents=True)
    (tmp_path / "desktop_env" / "__init__.py").write_text("")
    (tmp_path / "desktop_env" / "evaluators" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from .general import fuzzy_match\n")
    (package / "general.py").write_text("def fuzzy_match(result, rules):\n    return 0.5 if result else 0.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("desktop_env")]:
        monkeypatch.delitem(sys.modules, name)
    m._upstream_metrics.cache_clear()  # the import is tried once per process
    metric = resolve_metric("fuzzy_match")
    assert metric("abc", {"expected": "abd"}) == 0.5
    assert resolve_metric("exact_match") is m.exact_match  # osguard's own wins
    with pytest.raises(UnknownNameError) as info:
        resolve_metric("no_such_metric_anywhere")
    assert str(info.value) == "unknown OSWorld metric 'no_such_metric_anywhere'"
    for name in [n for n in sys.modules if n.startswith("desktop_env")]:
        monkeypatch.delitem(sys.modules, name)
    m._upstream_metrics.cache_clear()


def test_check_accessibility_tree_xpath_rules() -> None:
    """The rules of OSWorld task thunderbird/15c3b339, on a tree with upstream's namespaces."""
    tree = ('<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">'
            '<application name="Thunderbird"><frame name="Account Settings">'
            '<label name="anonym-x2024@outlook.com" st:showing="true">anonym-x2024@outlook.com</label>'
            '<push-button name="Password Manager"/></frame></application></desktop-frame>')
    rules = [{"xpath": "//application[@name='Thunderbird']//*[contains(text(), 'anonym-x2024@outlook.com') "
                       "or contains(@name, 'anonym-x2024@outlook.com')]"},
             {"xpath": "//application[@name='Thunderbird']//*[contains(@name, 'password') or contains(@name, 'Password')]"}]
    assert m.check_accessibility_tree(tree, rules) == 1.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//*[@st:showing='true']", "text": "anonym-x2024@outlook.com"}]) == 1.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//*[@st:showing='true']", "text": "other"}]) == 0.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//menu"}]) == 0.0
    assert m.check_accessibility_tree(None, rules) == 0.0


def _odt(path: Path, styles_body: str, content_body: str) -> str:
    import zipfile

    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"')
    with zipfile.ZipFile(path, "w") as odt:
        odt.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        odt.writestr("styles.xml", f"<office:document-styles {ns}>{styles_body}</office:document-styles>")
        odt.writestr("content.xml", f"<office:document-content {ns}><office:body><office:text>{content_body}"
                                    "</office:text></office:body></office:document-content>")
    return str(path)


def test_compare_docx_files_reads_odt_paragraphs_as_odfpy_does(tmp_path: Path) -> None:
    """Upstream reads an odt with odfpy (not installed here, so no side-by-side test): every
    text:p, footers (styles.xml) first; a paragraph's own text nodes and those directly in
    its spans count, a text:s space or a link's text does not."""
    footer = '<style:master-page><style:footer><text:p>Page footer</text:p></style:footer></style:master-page>'
    result = _odt(tmp_path / "result.odt", footer,
                  '<text:p>Call <text:span>the <text:span>nested</text:span>candidate</text:span> now</text:p>'
                  '<text:p>Say<text:s/>hello <text:a>link</text:a>there</text:p>')
    assert m._odt_paragraph_texts(result) == ["Page footer", "Call the candidate now", "Sayhello there"]
    gold = _odt(tmp_path / "gold.odt", footer,
                '<text:p>Call the candidate now</text:p><text:p>Sayhello there</text:p>')
    other = _odt(tmp_path / "other.odt", "", '<text:p>Call the candidate now</text:p><text:p>Sayhello there</text:p>')
    assert m.compare_docx_files(result, gold) == 1.0
    assert m.compare_docx_files(result, gold, ignore_blanks=False) == 1.0
    assert m.compare_docx_files(result, other) == 0.0  # the footer paragraph is missing
    assert m.compare_docx_files(result, str(tmp_path / "gold.docx")) == 0.0  # odt against docx
    assert m.compare_docx_files(str(tmp_path / "missing.odt"), gold) == 0.0
    with pytest.raises(NotImplementedError) as info:
        m.compare_docx_files(result, gold, fuzzy_match=True)
    assert str(info.value) == "compare_docx_files: content_only and fuzzy_match are not supported"
