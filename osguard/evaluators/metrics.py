"""OSWorld's light, state-based metrics, re-implemented under their upstream names.

Semantics follow desktop-env 1.0.2 (``desktop_env/evaluators/metrics/*``): same arguments,
same scoring (1.0 / 0.0, a ratio for ``diff_text_file``), ``None`` inputs score 0. Metrics
are pure functions of their inputs (local file paths fetched by the getters, or values).
A metric not implemented here is taken from ``desktop_env.evaluators.metrics`` when the
``osworld`` extra is installed (``resolve_metric``).
"""

from __future__ import annotations

import ast
import builtins
import csv
import difflib
import functools
import json
import operator
import re
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable

from osguard._registry import did_you_mean
from osguard.errors import UnknownNameError

Metric = Callable[..., Any]


# -- helpers shared with upstream semantics -------------------------------------------------------
def match_value_to_rule(value: Any, rule: dict[str, Any]) -> bool:
    """Upstream ``utils._match_value_to_rule``: ``{method, ref}`` with method ``re[.FLAGS]``,
    ``eq|ne|lt|le|gt|ge``, ``approx:T``, ``range.XY``, ``str_list_eq`` or ``str_set_eq``."""
    method = rule["method"]
    if method.startswith("re"):
        flags = [getattr(re, name) for name in method.split(".")[1:]]
        flag = functools.reduce(operator.or_, flags, re.RegexFlag(0))
        return re.search(rule["ref"], value, flag) is not None
    if method in {"eq", "ne", "le", "lt", "ge", "gt"}:
        return bool(getattr(operator, method)(value, rule["ref"]))
    if method.startswith("approx"):
        threshold = float(method.split(":")[1])
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        return abs(number - rule["ref"]) <= threshold
    if method.startswith("range."):
        left, right = method[6], method[7]
        return bool(getattr(operator, "l" + left)(rule["ref"][0], value)
                    and getattr(operator, "l" + right)(value, rule["ref"][1]))
    if method in {"str_list_eq", "str_set_eq"}:
        container = getattr(builtins, method[4:-3])
        return container(value.strip("\"'").split(",")) == container(rule["ref"])
    raise NotImplementedError(f"rule method {method!r} is not supported")


def match_record(pattern: dict[str, Any], item: dict[str, Any]) -> bool:
    """Upstream ``utils._match_record``: every key of ``pattern`` equal in ``item``."""
    return all(key in item and item[key] == value for key, value in pattern.items())


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


# -- general ---------------------------------------------------------------------------------------
def exact_match(result: Any, rules: dict[str, Any]) -> float:
    return 1.0 if result == rules["expected"] else 0.0


def check_include_exclude(result: Any, rules: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    include = rules.get("include", [])
    exclude = rules.get("exclude", [])
    return 1.0 if all(r in result for r in include) and all(r not in result for r in exclude) else 0.0


def match_in_list(result: Any, rules: dict[str, Any]) -> float:
    return 1.0 if result in rules["expected"] else 0.0


def is_in_list(result: Any, rules: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    return 1.0 if rules["expected"] in result else 0.0


def literal_match(result: Any, expected: Any, **options: Any) -> float:
    literal_type = options.get("type", "str")
    ignore_case = options.get("ignore_case", False)
    if literal_type == "str":
        if ignore_case:
            return float(str(result).lower() == str(expected).lower())
        return float(str(result) == str(expected))
    if literal_type == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)) \
                or len(result) != len(expected):
            return 0.0
        norm = (lambda s: str(s).lower()) if ignore_case else str
        return float([norm(s) for s in result] == [norm(s) for s in expected])
    raise NotImplementedError(f"literal_match type {literal_type!r} is not supported")


def check_json(result: str | None, rules: dict[str, Any], is_yaml: bool = False) -> float:
    if result is None:
        return 0.0
    try:
        text = _read_text(result)
        if is_yaml:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except (OSError, ValueError, ImportError):
        return 0.0
    except Exception:  # yaml.YAMLError
        return 0.0
    if data is None:
        return 0.0
    metric = True
    for rule in rules.get("expect", []):
        value = data
        for key in rule["key"]:
            try:
                value = value[key]
            except (KeyError, TypeError, IndexError):
                return 0.0
        metric = metric and match_value_to_rule(value, rule)
    for rule in rules.get("unexpect", []):
        value = data
        for key in rule["key"]:
            try:
                value = value[key]
            except (KeyError, TypeError, IndexError):
                value = None
                break
        metric = metric and not match_value_to_rule(value, rule)
    return float(metric)


def check_direct_json_object(result: Any, rules: dict[str, Any]) -> float:
    try:
        if isinstance(result, str):
            result = json.loads(result.strip().replace("'", '"'))
        if result is None:
            return 0.0
        expected = rules["expected"]
        if not rules.get("expect_in_result", False):
            for key, want in expected.items():
                if expected.get("ignore_list_order", False):
                    if sorted(want) != sorted(result.get(key)):
                        return 0.0
                elif want != result.get(key):
                    return 0.0
            return 1.0
        for key, want in expected.items():
            got = result.get(key)
            if isinstance(want, list):
                if not any((isinstance(got, list) and item in got) or (isinstance(got, str) and item == got)
                           for item in want):
                    return 0.0
            elif isinstance(want, str):
                if got is None or want not in got:
                    return 0.0
            else:
                return 0.0
        return 1.0
    except Exception:  # upstream scores any malformed result 0
        return 0.0


def check_list(result: str | None, rules: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    found = [False] * len(expect)
    clean = True
    with open(result, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            for index, pattern in enumerate(expect):
                found[index] = found[index] or pattern.search(line) is not None
            clean = clean and all(p.search(line) is None for p in unexpect)
    return float(all(found) and clean)


def check_csv(result: str | None, rules: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    found = [False] * len(rules.get("expect", []))
    clean = True
    with open(result, encoding="utf-8", errors="replace") as handle:
        for record in csv.DictReader(handle):
            for index, pattern in enumerate(rules.get("expect", [])):
                found[index] = found[index] or match_record(pattern, record)
            clean = clean and not any(match_record(p, record) for p in rules.get("unexpect", []))
    return float(all(found) and clean)


def file_contains(file_path: str | None, config: dict[str, Any]) -> float:
    if not file_path:
        return 0.0
    try:
        text = _read_text(file_path)
    except OSError:
        return 0.0
    return 0.0 if any(item not in text for item in config["expected"]) else 1.0


def diff_text_file(result: str | None, expect: str) -> float:
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(a=_read_text(result).splitlines(), b=_read_text(expect).splitlines()).ratio()


def run_sqlite3(result: str, rules: dict[str, Any]) -> float:
    connection = sqlite3.connect(result)
    try:
        row = connection.execute(rules["sql"]).fetchone()
    finally:
        connection.close()
    return float(row[0] or 0)


# -- vscode ----------------------------------------------------------------------------------------
def _load_json_file(path: str) -> Any:
    for skip_first_line in (False, True):
        try:
            with open(path, encoding="utf-8") as handle:
                if skip_first_line:
                    handle.readline()
                return json.load(handle)
        except Exception:
            continue
    return None


def check_json_settings(actual: str | None, expected: dict[str, Any], **options: Any) -> float:
    if not actual:
        return 0.0
    try:
        data = json.loads(_read_text(actual))
    except (OSError, ValueError):
        return 0.0
    if not isinstance(data, dict):
        return 0.0
    for key, value in expected["expected"].items():
        if key not in data or data[key] != value:
            return 0.0
    return 1.0


def check_json_keybindings(actual: str | None, expected: dict[str, Any], **options: Any) -> float:
    if not actual:
        return 0.0
    data = _load_json_file(actual)
    if not isinstance(data, list):
        return 0.0
    return 1.0 if expected["expected"] in data else 0.0


def compare_text_file(actual: str | None, expected: str | None, **options: Any) -> float:
    if not actual or not expected:
        return 0.0
    try:
        actual_text, expected_text = _read_text(actual), _read_text(expected)
    except OSError:
        return 0.0
    if options.get("ignore_blanks", False):
        actual_text = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", actual_text).strip())
        expected_text = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", expected_text).strip())
    if options.get("ignore_case", False):
        actual_text, expected_text = actual_text.lower(), expected_text.lower()
    return 1.0 if actual_text == expected_text else 0.0


def compare_config(actual: str | None, rules: dict[str, Any], **options: Any) -> float:
    """desktop-env 1.0.2 semantics: the file's exact text equals ``rules["expected"]``."""
    if not actual:
        return 0.0
    try:
        return 1.0 if _read_text(actual) == rules["expected"] else 0.0
    except OSError:
        return 0.0


def compare_answer(actual: Any, rules: dict[str, Any], **options: Any) -> float:
    if not actual:
        return 0.0
    return 1.0 if actual == rules["expected"] else 0.0


def is_extension_installed(actual: str, rules: dict[str, Any], **options: Any) -> float:
    if rules["type"] == "contain":
        return 1.0 if rules["expected"] in actual else 0.0
    if rules["type"] == "not_contain":
        return 1.0 if rules["expected"] not in actual else 0.0
    raise NotImplementedError(f"is_extension_installed type {rules['type']!r} is not supported")


# -- thunderbird -----------------------------------------------------------------------------------
_PREF_LINE = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')
_CONDITION = re.compile(
    r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w ' + "'" + r']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def check_thunderbird_prefs(result: str | None, rule: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    expect_rules = rule.get("expect", {})
    unexpect_rules = rule.get("unexpect", {})
    expect_ok = {key: False for key in expect_rules}
    clean = True
    with open(result, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = _PREF_LINE.match(line.strip())
            if match is None:
                continue
            key = match.group("key")
            try:
                value = json.loads(match.group("val"))
            except ValueError:
                continue
            if key in expect_rules:
                expect_ok[key] = match_value_to_rule(value, expect_rules[key])
            elif key in unexpect_rules and match_value_to_rule(value, unexpect_rules[key]):
                clean = False
    return float(all(expect_ok.values()) and clean)


def parse_thunderbird_filters(path: str) -> list[dict[str, Any]]:
    """msgFilterRules.dat as upstream reads it: one dict per filter, closed by its condition."""
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("name="):
                current = {"name": _unescape(line[6:-2])}
            elif line.startswith("enabled="):
                current["enabled"] = _unescape(line[9:-2])
            elif line.startswith("type="):
                current["type"] = _unescape(line[6:-2])
            elif line.startswith("action="):
                current["action"] = _unescape(line[8:-2])
            elif line.startswith("actionValue="):
                current["actionValue"] = _unescape(line[13:-2])
            elif line.startswith("condition="):
                current["condition"] = _CONDITION.findall(_unescape(line[11:-2]))
                filters.append(current)
    return filters


def check_thunderbird_filter(result: str | None, rules: dict[str, Any]) -> float:
    if result is None:
        return 0.0
    filters = parse_thunderbird_filters(result)
    expect = rules.get("expect", [])
    found = [any(match_record(pattern, flt) for flt in filters) for pattern in expect]
    clean = not any(match_record(pattern, flt) for flt in filters for pattern in rules.get("unexpect", []))
    return float(all(found) and clean)


# -- basic_os --------------------------------------------------------------------------------------
def check_moved_jpgs(directory_list: dict[str, Any] | None, rule: dict[str, Any]) -> float:
    if not directory_list:
        return 0.0
    expected = rule["expected"]
    moved = [node["name"] for node in directory_list.get("children", [])]
    if len(moved) != len(expected):
        return 0.0
    return 1.0 if set(moved) == set(expected) else 0.0


def check_gnome_favorite_apps(apps_str: str, rule: dict[str, Any]) -> float:
    try:
        apps = ast.literal_eval(apps_str.strip())  # upstream uses eval(); literal_eval is enough
    except (ValueError, SyntaxError):
        return 0.0
    expected = rule["expected"]
    if len(apps) != len(expected):
        return 0.0
    return 1.0 if set(apps) == set(expected) else 0.0


def is_utc_0(timedatectl_output: str) -> float:
    lines = timedatectl_output.split("\n")
    return 1.0 if len(lines) > 3 and lines[3].endswith("+0000)") else 0.0


def is_in_vm_clickboard(config: dict[str, Any], terminal_output: str) -> float:
    expected = config["expected"]
    if not isinstance(expected, list):
        return 1.0 if expected in terminal_output else 0.0
    return 1.0 if all(item in terminal_output for item in expected) else 0.0


# -- accessibility tree ---------------------------------------------------------------------------
_A11Y_NS = {
    "ubuntu": {name: f"https://accessibility.ubuntu.example.org/ns/{path}" for name, path in (
        ("st", "state"), ("attr", "attributes"), ("cp", "component"), ("doc", "document"),
        ("docattr", "document/attributes"), ("txt", "text"), ("val", "value"), ("act", "action"))},
}


def check_accessibility_tree(result: str | None, rules: list[dict[str, Any]], osname: str = "ubuntu") -> float:
    """Every rule's ``xpath`` (or CSS ``selectors``, needs the cssselect package) selects an
    element; with ``text``, the best element text must equal it (``exact: false`` needs rapidfuzz)."""
    if not result:
        return 0.0
    import lxml.etree

    namespaces = _A11Y_NS[osname]
    tree = lxml.etree.fromstring(result.encode() if isinstance(result, str) else result)
    total = 1.0
    for rule in rules:
        if "xpath" in rule:
            elements = tree.xpath(rule["xpath"], namespaces=namespaces)
        elif "selectors" in rule:
            from lxml.cssselect import CSSSelector  # needs the cssselect package

            elements = CSSSelector(", ".join(rule["selectors"]), namespaces=namespaces)(tree)
        else:
            raise ValueError("check_accessibility_tree: a rule needs xpath or selectors")
        if not elements:
            return 0.0
        if "text" not in rule:
            continue
        if rule.get("exact", True):
            score = max(float(rule["text"] == (element.text or None)) for element in elements)
        else:
            from rapidfuzz import fuzz  # upstream's fuzzy ratio; not a core dependency

            score = max(fuzz.ratio(rule["text"], element.text or "") / 100.0 for element in elements)
        total *= score
    return float(total)


# -- libreoffice (registrymodifications.xcu) -------------------------------------------------------
_OOR = "{http://openoffice.org/2001/registry}"


def _xcu_values(path: str, item_path: str, prop_name: str) -> list[str | None]:
    import xml.etree.ElementTree as ET

    values: list[str | None] = []
    root = ET.parse(path).getroot()
    for item in root.iter("item"):
        if item.get(_OOR + "path") != item_path:
            continue
        for prop in item.iter("prop"):
            if prop.get(_OOR + "name") == prop_name:
                values.extend(value.text for value in prop.findall("value"))
    return values


def find_default_font(config_file_path: str | None, rules: dict[str, Any]) -> float:
    if not config_file_path:
        return 0.0
    try:
        values = _xcu_values(config_file_path, "/org.openoffice.Office.Writer/DefaultFont", "Standard")
    except Exception:
        return 0.0
    default_font = values[-1] if values else None
    return 1.0 if default_font == rules["font_name"] else 0.0


# -- docs (Writer documents, python-docx) ----------------------------------------------------------


def is_first_line_centered(docx_file: str | None) -> float:
    """Upstream ``docs.is_first_line_centered``: the document's first paragraph is centred
    (its own alignment, as python-docx reads it; a style's alignment does not count)."""
    if not docx_file:
        return 0.0
    try:
        from docx import Document
        from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

        document = Document(docx_file)
    except Exception:
        return 0.0
    if not document.paragraphs:
        return 0.0
    return 1.0 if document.paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER else 0.0


def check_libre_locale(config_file: str | None, rules: dict[str, Any]) -> float:
    if not config_file:
        return 0.0
    try:
        values = _xcu_values(config_file, "/org.openoffice.Setup/L10N", "ooSetupSystemLocale")
    except Exception:
        return 0.0
    locale = values[0] if values else None
    return 1.0 if locale and any(locale.startswith(prefix) for prefix in rules["locale_set"]) else 0.0


# -- table (a subset of compare_table) -------------------------------------------------------------
def _sheet(which: str, index: Any, result_wb: Any, expected_wb: Any) -> Any:
    """Upstream sheet_idx: an int (result book), "RI<n>"/"RN<name>"/"EI<n>"/"EN<name>"; None
    when the workbook has no such sheet."""
    if isinstance(index, int):
        book, key = result_wb, index
    else:
        prefix, rest = str(index)[:2], str(index)[2:]
        book = {"RI": result_wb, "RN": result_wb, "EI": expected_wb, "EN": expected_wb}.get(prefix)
        if book is None:
            raise ValueError(f"{which}: unrecognized sheet index {index!r}")
        key = int(rest) if prefix[1] == "I" else rest
    if book is None:
        raise ValueError(f"{which}: sheet {index!r} refers to a missing workbook")
    names = book.sheetnames
    if isinstance(key, int):
        return book[names[key]] if -len(names) <= key < len(names) else None
    # upstream's _load_sheet answers None for a sheet the workbook lacks (the rule scores 0)
    return book[key] if key in names else None


def _sheet_values(sheet: Any) -> list[list[Any]]:
    rows = [[("" if v is None else v) for v in row] for row in sheet.iter_rows(values_only=True)]
    while rows and all(v == "" for v in rows[-1]):
        rows.pop()
    width = max((max((i + 1 for i, v in enumerate(r) if v != ""), default=0) for r in rows), default=0)
    return [(r + [""] * width)[:width] for r in rows]


def _cell_value(value: Any) -> Any:
    # Upstream read_cell_value returns numbers as float.
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    return value


def _csv_lines(path: str) -> list[str]:
    """Upstream ``table._safe_read_file``: the file's lines, UTF-8 first, then Latin-1 (which
    reads any bytes, so upstream's later fallbacks are never reached)."""
    for encoding in ("utf-8", "utf-8-sig", "latin-1"):
        try:
            with open(path, encoding=encoding) as handle:
                return handle.read().splitlines()
        except UnicodeDecodeError:
            continue
    raise OSError(f"cannot decode {path}")


def compare_csv(result: str | None, expected: str | list[str], **options: Any) -> float:
    """Upstream ``table.compare_csv``: the result's lines equal one expected file's lines
    (``strict: false`` strips each line, ``ignore_case`` lowers it)."""
    if result is None:
        return 0.0
    try:
        result_lines = _csv_lines(result)
    except OSError:
        return 0.0
    for expected_file in [expected] if isinstance(expected, str) else list(expected or []):
        try:
            expected_lines = _csv_lines(expected_file)
        except OSError:
            continue
        mine, theirs = result_lines, expected_lines
        if not options.get("strict", True):
            mine, theirs = [line.strip() for line in mine], [line.strip() for line in theirs]
        if options.get("ignore_case", False):
            mine, theirs = [line.lower() for line in mine], [line.lower() for line in theirs]
        if mine == theirs:
            return 1.0
    return 0.0


def compare_table(result: str | None, expected: str | None = None, **options: Any) -> float:
    """Rules supported: ``sheet_name``, ``sheet_data`` (cell values), ``check_cell`` (``value``).

    Raises:
        NotImplementedError: for other rule types (use the osworld extra's implementation).
    """
    if result is None:
        return 0.0
    import openpyxl

    try:
        result_wb = openpyxl.load_workbook(result, data_only=True)
    except Exception:
        return 0.0
    expected_wb = openpyxl.load_workbook(expected, data_only=True) if expected else None
    for rule in options.get("rules", []):
        kind = rule["type"]
        if kind == "sheet_name":
            if expected_wb is None or result_wb.sheetnames != expected_wb.sheetnames:
                return 0.0
        elif kind == "sheet_data":
            first = _sheet("sheet_idx0", rule["sheet_idx0"], result_wb, expected_wb)
            second = _sheet("sheet_idx1", rule["sheet_idx1"], result_wb, expected_wb)
            if first is None or second is None or _sheet_values(first) != _sheet_values(second):
                return 0.0
        elif kind == "check_cell":
            sheet = _sheet("sheet_idx", rule["sheet_idx"], result_wb, expected_wb)
            if sheet is None:
                return 0.0
            cell = sheet[rule["coordinate"]]
            for prop, prop_rule in rule["props"].items():
                if prop != "value":
                    raise NotImplementedError(f"compare_table check_cell prop {prop!r} is not supported")
                if not match_value_to_rule(_cell_value(cell.value), prop_rule):
                    return 0.0
        elif kind in CALC_TABLE_RULES:
            if not CALC_TABLE_RULES[kind](rule, result_wb, expected_wb):
                return 0.0
        else:
            raise NotImplementedError(f"compare_table rule type {kind!r} is not supported")
    return 1.0


# impress metrics ---------------------------------------------------------------------------------
# Upstream ``slides.py`` (python-pptx on the host; the invariants that run in the evaluation
# sandbox read the pptx with zipfile + xml instead).
_PPTX_NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main",
            "p": "http://schemas.openxmlformats.org/presentationml/2006/main"}


def _pptx_text_shapes(slide: Any) -> list[Any]:
    """Upstream ``get_all_text_shapes``: every shape with text, groups walked recursively."""
    def walk(shape: Any) -> list[Any]:
        found = [shape] if hasattr(shape, "text") and hasattr(shape, "text_frame") else []
        for sub in getattr(shape, "shapes", ()):
            found.extend(walk(sub))
        return found

    return [found for shape in slide.shapes for found in walk(shape)]


def _pptx_bullets(xml_data: str) -> list[tuple[Any, str, str, str]]:
    import xml.etree.ElementTree as ET

    bullets = []
    for paragraph in ET.fromstring(xml_data).findall(".//a:p", _PPTX_NS):
        ppr = paragraph.find("a:pPr", _PPTX_NS)
        if ppr is not None:
            lvl = ppr.get("lvl")
            bu_char = ppr.find("a:buChar", _PPTX_NS)
            char = bu_char.get("char") if bu_char is not None else "No Bullet"
            bu_clr = ppr.find("a:buClr/a:srgbClr", _PPTX_NS)
            color = bu_clr.get("val") if bu_clr is not None else "No Color"
        else:
            lvl, char, color = "No Level", "No Bullet", "No Color"
        text = "".join(t.text for t in paragraph.findall(".//a:t", _PPTX_NS))
        if text.strip():
            bullets.append((lvl, char, text, color))
    return bullets


def _pptx_bullets_equal(first: list[tuple[Any, str, str, str]], second: list[tuple[Any, str, str, str]]) -> bool:
    """Upstream's tolerant bullet comparison: text, character and level (None as '0'); not colour."""
    if len(first) != len(second):
        return False
    for (lvl1, char1, text1, _), (lvl2, char2, text2, _) in zip(first, second):
        if text1 != text2 or char1 != char2 or ("0" if lvl1 is None else lvl1) != ("0" if lvl2 is None else lvl2):
            return False
    return True


def _pptx_background(slide: Any) -> Any:
    """A slide's solid background colour, else its master's (the layout is skipped, as upstream)."""
    fill = slide.background.fill
    if fill.type == 1:
        return fill.fore_color.rgb
    if fill.type == 5:
        master_fill = slide.slide_layout.slide_master.background.fill
        return master_fill.fore_color.rgb if master_fill.type == 1 else None
    return None


def _off_or_none(value: Any) -> bool:
    return value is None or value is False


def _runs_differ_in_table(run1: Any, run2: Any, color: bool) -> bool:
    if color and hasattr(run1.font.color, "rgb") and hasattr(run2.font.color, "rgb") \
            and run1.font.color.rgb != run2.font.color.rgb:
        return True
    for attr in ("bold", "italic"):
        one, two = getattr(run1.font, attr), getattr(run2.font, attr)
        if one != two and not (_off_or_none(one) and _off_or_none(two)):
            return True
    return _underline_differs(run1.font.underline, run2.font.underline)


def _underline_differs(one: Any, two: Any) -> bool:
    """Upstream: None and False agree; None and True (or two different styles) do not."""
    if one == two:
        return False
    if one is not None and two is not None:
        return True
    return (one is None and two is True) or (one is True and two is None)


_PPTX_OPTION_DEFAULTS: dict[str, Any] = {
    "examine_number_of_slides": True, "examine_shape": True, "examine_text": True, "examine_indent": True,
    "examine_font_name": True, "examine_font_size": True, "examine_font_bold": True,
    "examine_font_italic": True, "examine_color_rgb": True, "examine_font_underline": True,
    "examine_strike_through": True, "examine_alignment": True, "examine_title_bottom_position": False,
    "examine_table_bottom_position": False, "examine_right_position": False, "examine_top_position": False,
    "examine_shape_for_shift_size": False, "examine_image_size": False, "examine_modify_height": False,
    "examine_bullets": True, "examine_background_color": True, "examine_note": True,
}


def compare_pptx_files(file1_path: str | None, file2_path: str | None, **options: Any) -> float:
    """Upstream ``slides.compare_pptx_files``: slide by slide, background colour, notes, shape
    geometry (within ``approximately_tolerance``, default 0.5 per cent), tables, and paragraph
    and run formatting agree; each check switched by its ``examine_*`` option. Upstream's
    task-specific position checks (``examine_title_bottom_position``...) keep its hard-coded
    slides and thresholds."""
    if not file1_path or not file2_path:
        return 0.0
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE
    from pptx.enum.text import PP_ALIGN

    try:
        prs1, prs2 = Presentation(file1_path), Presentation(file2_path)
    except Exception:
        return 0.0
    opt = {**_PPTX_OPTION_DEFAULTS, **{k: v for k, v in options.items() if k in _PPTX_OPTION_DEFAULTS}}
    tolerance = options.get("approximately_tolerance", 0.005)

    def near(one: Any, two: Any) -> bool:
        if one == two:
            return True
        if one == 0 or two == 0:
            return False
        return abs(one - two) / max(abs(one), abs(two)) <= tolerance

    def same_box(one: Any, two: Any) -> bool:
        return all(near(getattr(one, k), getattr(two, k)) for k in ("left", "top", "width", "height"))

    if len(prs1.slides) != len(prs2.slides) and opt["examine_number_of_slides"]:
        return 0.0
    for slide_idx, (slide1, slide2) in enumerate(zip(prs1.slides, prs2.slides), 1):
        if _pptx_background(slide1) != _pptx_background(slide2) and opt["examine_background_color"]:
            return 0.0
        notes1 = slide1.notes_slide.notes_text_frame.text
        notes2 = slide2.notes_slide.notes_text_frame.text
        if notes1.strip() != notes2.strip() and opt["examine_note"]:
            return 0.0
        text_shapes1, text_shapes2 = _pptx_text_shapes(slide1), _pptx_text_shapes(slide2)
        if len(slide1.shapes) != len(slide2.shapes):
            return 0.0
        for shape1, shape2 in zip(slide1.shapes, slide2.shapes):
            has_text = hasattr(shape1, "text") and hasattr(shape2, "text")
            if opt["examine_title_bottom_position"]:
                if has_text and shape1.text == shape2.text:
                    if shape1.text == "Product Comparison" and (shape1.top <= shape2.top or shape1.top < 3600000):
                        return 0.0
                elif not same_box(shape1, shape2):
                    return 0.0
            if opt["examine_table_bottom_position"]:
                if slide_idx == 3 and shape1.shape_type == 19 and shape2.shape_type == 19:
                    if shape1.top <= shape2.top or shape1.top < 3600000:
                        return 0.0
                elif not same_box(shape1, shape2):
                    return 0.0
            if opt["examine_right_position"] and slide_idx == 2 \
                    and not hasattr(shape1, "text") and not hasattr(shape2, "text"):
                if shape1.left <= shape2.left or shape1.left < 4320000:
                    return 0.0
            if opt["examine_top_position"] and slide_idx == 2 \
                    and shape1.shape_type == 13 and shape2.shape_type == 13:
                if shape1.top >= shape2.top or shape1.top > 1980000:
                    return 0.0
            if opt["examine_shape_for_shift_size"] and not same_box(shape1, shape2):
                if not (has_text and shape1.text == shape2.text
                        and shape1.text == "Elaborate on what you want to discuss."):
                    return 0.0
            if opt["examine_shape"] and not same_box(shape1, shape2):
                return 0.0
            if opt["examine_image_size"]:
                if shape1.shape_type == 13 and shape2.shape_type == 13:
                    if not near(shape1.width, shape2.width) or not near(shape1.height, shape2.height):
                        return 0.0
                elif not same_box(shape1, shape2):
                    return 0.0
            if opt["examine_modify_height"]:
                if not hasattr(shape1, "text") and not hasattr(shape2, "text") \
                        or shape1.shape_type == 5 and shape2.shape_type == 5:
                    if not near(shape1.height, shape2.height):
                        return 0.0
                elif not same_box(shape1, shape2):
                    return 0.0
            if shape1.shape_type == MSO_SHAPE_TYPE.TABLE:
                table1, table2 = shape1.table, shape2.table
                if len(table1.rows) != len(table2.rows) or len(table1.columns) != len(table2.columns):
                    return 0.0
                for row in range(len(table1.rows)):
                    for col in range(len(table1.columns)):
                        paras1 = table1.cell(row, col).text_frame.paragraphs
                        paras2 = table2.cell(row, col).text_frame.paragraphs
                        if len(paras1) != len(paras2):
                            return 0.0
                        for para1, para2 in zip(paras1, paras2):
                            if len(para1.runs) != len(para2.runs):
                                return 0.0
                            for run1, run2 in zip(para1.runs, para2.runs):
                                if _runs_differ_in_table(run1, run2, opt["examine_color_rgb"]):
                                    return 0.0
            if not has_text:
                continue
            if shape1.text.strip() != shape2.text.strip() and opt["examine_text"]:
                return 0.0
            if len(shape1.text_frame.paragraphs) != len(shape2.text_frame.paragraphs):
                return 0.0
            for para1, para2 in zip(shape1.text_frame.paragraphs, shape2.text_frame.paragraphs):
                if opt["examine_alignment"] and (para1.alignment or PP_ALIGN.LEFT) != (para2.alignment or PP_ALIGN.LEFT):
                    return 0.0
                if para1.text != para2.text and opt["examine_text"]:
                    return 0.0
                if para1.level != para2.level and opt["examine_indent"]:
                    return 0.0
                if len(para1.runs) != len(para2.runs):
                    return 0.0
                for run1, run2 in zip(para1.runs, para2.runs):
                    font1, font2 = run1.font, run2.font
                    if font1.name != font2.name and opt["examine_font_name"]:
                        return 0.0
                    if font1.size != font2.size and opt["examine_font_size"]:
                        return 0.0
                    for attr in ("bold", "italic"):
                        one, two = getattr(font1, attr), getattr(font2, attr)
                        if one != two and opt[f"examine_font_{attr}"] and not (_off_or_none(one) and _off_or_none(two)):
                            return 0.0
                    if hasattr(font1.color, "rgb") and hasattr(font2.color, "rgb") \
                            and font1.color.rgb != font2.color.rgb and opt["examine_color_rgb"]:
                        return 0.0
                    if opt["examine_font_underline"] and _underline_differs(font1.underline, font2.underline):
                        return 0.0
                    if font1._element.attrib.get("strike", "noStrike") != font2._element.attrib.get("strike", "noStrike") \
                            and opt["examine_strike_through"]:
                        return 0.0
                    if opt["examine_bullets"]:
                        try:
                            same = _pptx_bullets_equal(_pptx_bullets(run1.part.blob.decode("utf-8")),
                                                       _pptx_bullets(run2.part.blob.decode("utf-8")))
                        except Exception:  # upstream skips the bullet check when it cannot read them
                            same = True
                        if not same:
                            return 0.0
        if opt["examine_alignment"] and len(text_shapes1) == len(text_shapes2):
            for tshape1, tshape2 in zip(text_shapes1, text_shapes2):
                if tshape1.text.strip() != tshape2.text.strip() and opt["examine_text"]:
                    return 0.0
                if len(tshape1.text_frame.paragraphs) != len(tshape2.text_frame.paragraphs):
                    return 0.0
                for para1, para2 in zip(tshape1.text_frame.paragraphs, tshape2.text_frame.paragraphs):
                    if (para1.alignment or PP_ALIGN.LEFT) != (para2.alignment or PP_ALIGN.LEFT):
                        return 0.0
        elif len(text_shapes1) != len(text_shapes2):
            return 0.0
    return 1.0


def check_transition(pptx_file: str | None, rules: dict[str, Any]) -> float:
    """Upstream ``slides.check_transition``: ``ppt/slides/slide<slide_idx + 1>.xml`` (by part
    name, as upstream) has a ``p:transition`` holding a ``p:<transition_type>`` element."""
    import xml.etree.ElementTree as ET
    import zipfile

    if not pptx_file:
        return 0.0
    try:
        with zipfile.ZipFile(pptx_file) as archive:
            root = ET.fromstring(archive.read(f"ppt/slides/slide{rules['slide_idx'] + 1}.xml"))
    except (KeyError, OSError, zipfile.BadZipFile, ET.ParseError):
        return 0.0
    transition = root.find(".//p:transition", _PPTX_NS)
    if transition is None:
        return 0.0
    return 1.0 if transition.find(f".//p:{rules['transition_type']}", _PPTX_NS) is not None else 0.0


def check_auto_saving_time(config_file: str | None, rules: dict[str, Any]) -> float:
    """Upstream ``slides.check_auto_saving_time``: registrymodifications.xcu sets
    ``/org.openoffice.Office.Common/Save/Document/AutoSaveTimeIntervall`` to ``minutes`` (the
    last such entry; upstream scores an unreadable file None, osguard 0)."""
    if not config_file:
        return 0.0
    try:
        values = _xcu_values(config_file, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall")
    except Exception:
        return 0.0
    try:
        return 1.0 if values and int(values[-1] or "") == rules["minutes"] else 0.0
    except ValueError:
        return 0.0


# gimp/vlc ----------------------------------------------------------------------------------------
# Upstream's GIMP and VLC configuration metrics (desktop_env/evaluators/metrics/gimp.py, vlc.py),
# line for line on the same text; a missing file scores 0 (upstream's VLC metrics raise).
def check_config_status(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """GIMP's gimprc/sessionrc: a line ``(KEY ... VALUE)`` (``key`` a name or a pair of the
    first two words) whose last word is ``value``."""
    if actual_config_path is None:
        return 0.0
    with open(actual_config_path, encoding="utf-8", errors="replace") as handle:
        content = handle.readlines()
    for line in content:
        if line.startswith("#") or line == "\n":
            continue
        items = line.strip().lstrip("(").rstrip(")\n").split()
        if not items:  # upstream raises IndexError on a line of blanks
            continue
        if isinstance(rule["key"], str):
            if items[0] == rule["key"] and items[-1] == rule["value"]:
                return 1.0
        elif isinstance(rule["key"], list) and len(rule["key"]) == 2:
            if items[0] == rule["key"][0] and len(items) > 1 and items[1] == rule["key"][1] \
                    and items[-1] == rule["value"]:
                return 1.0
    return 0.0


def _vlcrc_lines(path: str | None) -> list[str]:
    if path is None:
        return []
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace").split("\n")
    except OSError:
        return []


def is_vlc_recordings_folder(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """VLC's vlcrc: the first uncommented line mentioning ``input-record-path`` holds
    ``rule['recording_file_path']`` after its last ``=``."""
    for line in _vlcrc_lines(actual_config_path):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return 1.0 if line.split("=")[-1].strip() == rule["recording_file_path"] else 0.0
    return 0.0


def _vlcrc_setting(actual_config_path: str | None, rule: dict[str, Any], key: str, default: str) -> float:
    """Upstream's reading of one vlcrc setting: the last line mentioning ``key=`` (commented
    or not) after its last ``=``, ``default`` when none, compared as text with
    ``rule['expected_' + key with - as _]`` (an int expected is compared as its digits). A
    missing file scores 0."""
    expected = rule["expected_" + key.replace("-", "_")]
    expected = str(expected) if isinstance(expected, int) else expected
    if actual_config_path is None:
        return 0.0
    value = default
    for line in _vlcrc_lines(actual_config_path):
        if f"{key}=" in line:
            value = line.split("=")[-1].strip()
    return 1.0 if value == expected else 0.0


def check_qt_max_volume(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """VLC's vlcrc: the last line setting ``qt-max-volume=`` (commented or not, as upstream
    reads it; 125 when none) equals ``rule['expected_qt_max_volume']``."""
    return _vlcrc_setting(actual_config_path, rule, "qt-max-volume", "125")


def check_qt_minimal_view(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """VLC's vlcrc: the last line mentioning ``qt-minimal-view=`` (commented or not, as
    upstream reads it; ``0`` when none) holds ``rule['expected_qt_minimal_view']`` after its
    last ``=``. A missing file scores 0 (upstream raises)."""
    return _vlcrc_setting(actual_config_path, rule, "qt-minimal-view", "0")


def _brightness(image: Any) -> float:
    from PIL import ImageStat

    return ImageStat.Stat(image.convert("L")).mean[0]


def _normalize_brightness(image: Any, target: float) -> Any:
    factor = target / _brightness(image)
    return image.point(lambda x: min(255, max(0, int(x * factor))))


def _structure_same_by_mse(first: Any, second: Any, threshold: float) -> bool:
    import numpy as np
    from PIL import Image

    if first.size != second.size:
        first = first.resize(second.size, Image.Resampling.LANCZOS)
    first, second = first.convert("RGB"), second.convert("RGB")
    mse = np.mean((np.array(first, dtype=np.float32) / 255 - np.array(second, dtype=np.float32) / 255) ** 2)
    return bool(mse < threshold)


def check_brightness_decrease_and_structure_sim(src_path: str | None, tgt_path: str | None,
                                                threshold: float = 0.03) -> float:
    """GIMP: the picture at ``src_path`` is darker (mean luminance) than ``tgt_path`` and, both
    normalised to a mean of 128, differs from it by a mean squared error below ``threshold``."""
    from PIL import Image

    if src_path is None or tgt_path is None:
        return 0.0
    try:
        source, target = Image.open(src_path), Image.open(tgt_path)
        reduced = _brightness(target) > _brightness(source)
        same = _structure_same_by_mse(_normalize_brightness(source, 128), _normalize_brightness(target, 128),
                                      threshold)
    except (OSError, ValueError):  # a missing or unreadable export is a failure, not a crash
        return 0.0
    return 1.0 if reduced and same else 0.0



def check_green_background(src_path: str | None, tgt_path: str | None) -> float:
    """GIMP: every pixel that is not pure black (0, 0, 0) in ``tgt_path`` (the original, its
    object black) is green in ``src_path`` (its green channel above red and blue). Pixels that
    are black in the original are not looked at, as upstream's loop does not.

    Upstream indexes its pixel arrays ``[x, y]`` over ``range(width)`` and ``range(height)``
    (rows and columns swapped), which raises IndexError on any picture that is not square and
    on a result smaller than the original; osguard scores those 0, as it does a grey-scale or
    palette picture (no colour channels) where upstream raises, and a missing or unreadable
    file. On square pictures the swap checks every pixel, as here."""
    import numpy as np
    from PIL import Image

    if src_path is None or tgt_path is None:
        return 0.0
    try:
        source = np.array(Image.open(src_path))
        target = np.array(Image.open(tgt_path))
    except (OSError, ValueError):
        return 0.0
    if target.ndim != 3 or source.ndim != 3 or source.shape[2] < 3:
        return 0.0
    rows, columns = target.shape[:2]
    if rows != columns or source.shape[0] < rows or source.shape[1] < columns:
        return 0.0
    # upstream compares a pixel's first three values with (0, 0, 0): a two-channel pixel never equals it
    background = (target[:, :, :3] != 0).any(axis=2) if target.shape[2] >= 3 else np.ones((rows, columns), bool)
    red, green, blue = (source[:rows, :columns, channel] for channel in range(3))
    green_enough = (green > red) & (green > blue)
    return 1.0 if bool(np.all(green_enough[background])) else 0.0


def _uniform_filter(values: Any, size: int) -> Any:
    """scipy.ndimage.uniform_filter(values, size) of a 2-D float array (its default 'reflect'
    boundary: the edge sample repeated, d c b a | a b c d), in numpy alone."""
    import numpy as np

    half = size // 2
    out = values
    for axis in (0, 1):
        padded = np.pad(out, [(half, size - 1 - half) if a == axis else (0, 0) for a in (0, 1)], mode="symmetric")
        sums = np.cumsum(padded, axis=axis, dtype=np.float64)
        zero = np.zeros_like(np.take(sums, [0], axis=axis))
        sums = np.concatenate([zero, sums], axis=axis)
        length = out.shape[axis]
        upper = np.take(sums, range(size, size + length), axis=axis)
        lower = np.take(sums, range(0, length), axis=axis)
        out = (upper - lower) / size
    return out


def _ssim(first: Any, second: Any) -> float:
    """skimage.metrics.structural_similarity(first, second) of two 8-bit grey-scale arrays
    with its defaults, as upstream calls it: a 7x7 uniform window, K1 0.01, K2 0.03, the
    sample covariance, a data range of 255 (the uint8 range), the mean over the picture
    without a border of 3 pixels."""
    import numpy as np

    size = 7
    if min(first.shape) < size or first.shape != second.shape:
        raise ValueError("pictures smaller than the 7x7 window or of different sizes")
    x, y = first.astype(np.float64), second.astype(np.float64)
    cov_norm = size * size / (size * size - 1)
    ux, uy = _uniform_filter(x, size), _uniform_filter(y, size)
    uxx, uyy, uxy = _uniform_filter(x * x, size), _uniform_filter(y * y, size), _uniform_filter(x * y, size)
    vx, vy, vxy = cov_norm * (uxx - ux * ux), cov_norm * (uyy - uy * uy), cov_norm * (uxy - ux * uy)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    pad = (size - 1) // 2
    return float(s[pad:-pad, pad:-pad].mean(dtype=np.float64))


def compare_images(image1_path: str | None, image2_path: str | None,
                   reference_base_result: float | None = None) -> float:
    """VLC (and others): the structural similarity (SSIM, as skimage computes it) of the two
    pictures in grey scale (Pillow's ``L``), both resized (Lanczos) to the smaller size (the
    smaller ``(width, height)`` tuple, as upstream compares them); with
    ``reference_base_result``, 0 unless the SSIM beats it by 0.01, else the gain rescaled
    to [0, 1]. 1.0 only for the same grey pixels. A missing or unreadable picture, or one
    smaller than SSIM's 7x7 window, scores 0 (upstream raises on the latter two)."""
    import numpy as np
    from PIL import Image

    if not image1_path or not image2_path:
        return 0.0
    try:
        first, second = Image.open(image1_path).convert("L"), Image.open(image2_path).convert("L")
        size = min(first.size, second.size)
        first = first.resize(size, Image.Resampling.LANCZOS)
        second = second.resize(size, Image.Resampling.LANCZOS)
        similarity = _ssim(np.array(first), np.array(second))
    except (OSError, ValueError):
        return 0.0
    if reference_base_result is None:
        return similarity
    if similarity >= reference_base_result + 0.01:
        return (similarity - reference_base_result) / (1 - reference_base_result)
    return 0.0

# calc metrics
def _table_freeze(rule: dict[str, Any], result_wb: Any, expected_wb: Any) -> bool:
    """Upstream ``compare_table`` rule ``freeze``: both sheets have the same frozen panes
    (openpyxl's ``freeze_panes``, the top-left cell of the scrolling part, None when none)."""
    first = _sheet("sheet_idx0", rule["sheet_idx0"], result_wb, expected_wb)
    second = _sheet("sheet_idx1", rule["sheet_idx1"], result_wb, expected_wb)
    return first is not None and second is not None and bool(first.freeze_panes == second.freeze_panes)


# compare_table rule types beyond sheet_name/sheet_data/check_cell: type -> check(rule, result, expected)
CALC_TABLE_RULES: dict[str, Callable[[dict[str, Any], Any, Any], bool]] = {"freeze": _table_freeze}


# -- writer metrics (docs.py) ----------------------------------------------------------------------
_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def _odt_paragraph_texts(path: str) -> list[str]:
    """The text of every ``text:p`` of an odt, as upstream reads it with odfpy
    (``getElementsByType(P)``): styles.xml (headers, footers) before content.xml, each
    paragraph's own text nodes and those directly inside its ``text:span`` children; other
    elements (``text:s``, ``text:tab``, links, nested spans) contribute nothing."""
    import xml.etree.ElementTree as ET
    import zipfile

    texts: list[str] = []
    with zipfile.ZipFile(path) as odt:
        for part in ("styles.xml", "content.xml"):
            if part not in odt.namelist():
                continue
            for paragraph in ET.fromstring(odt.read(part)).iter(_ODF_TEXT + "p"):
                parts = [paragraph.text or ""]
                for child in paragraph:
                    if child.tag == _ODF_TEXT + "span":
                        parts.append(child.text or "")
                        parts.extend(grandchild.tail or "" for grandchild in child)
                    parts.append(child.tail or "")
                texts.append("".join(parts))
    return texts


def compare_docx_files(file1: str | None, file2: str | None, **options: Any) -> float:
    """Upstream ``docs.compare_docx_files``: the paragraph texts of two docx (python-docx's
    ``paragraph.text``) or two odt files are the same. Options: ``ignore_blanks`` (default
    true: all whitespace runs, paragraph breaks included, compare as one space),
    ``ignore_case``, ``ignore_order`` (paragraphs sorted), ``delete_empty_lines``. Without
    ``ignore_blanks`` the paragraph counts must match and ``ignore_case`` applies per paragraph.
    Upstream's ``content_only`` and ``fuzzy_match`` (rapidfuzz similarity scores) are not
    implemented; ``osguard validate`` refuses them."""
    if options.get("content_only") or options.get("fuzzy_match"):
        raise NotImplementedError("compare_docx_files: content_only and fuzzy_match are not supported")
    if not file1 or not file2:
        return 0.0
    if file1.endswith(".docx") and file2.endswith(".docx"):
        try:
            from docx import Document

            paragraphs1 = [p.text for p in Document(file1).paragraphs]
            paragraphs2 = [p.text for p in Document(file2).paragraphs]
        except Exception:
            return 0.0
    elif file1.endswith(".odt") and file2.endswith(".odt"):
        try:
            paragraphs1, paragraphs2 = _odt_paragraph_texts(file1), _odt_paragraph_texts(file2)
        except Exception:
            return 0.0
    else:
        return 0.0
    if options.get("ignore_order", False):
        paragraphs1, paragraphs2 = sorted(paragraphs1), sorted(paragraphs2)
    if options.get("delete_empty_lines", False):
        paragraphs1 = [p for p in paragraphs1 if p.strip()]
        paragraphs2 = [p for p in paragraphs2 if p.strip()]
    ignore_case = options.get("ignore_case", False)
    if options.get("ignore_blanks", True):
        text1 = re.sub(r"\s+", " ", "\n".join(paragraphs1)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(paragraphs2)).strip()
        if ignore_case:
            text1, text2 = text1.lower(), text2.lower()
        return 1.0 if text1 == text2 else 0.0
    if len(paragraphs1) != len(paragraphs2):
        return 0.0
    for p1, p2 in zip(paragraphs1, paragraphs2):
        if ignore_case:
            p1, p2 = p1.lower(), p2.lower()
        if p1 != p2:
            return 0.0
    return 1.0


def compare_docx_tables(docx_file1: str | None, docx_file2: str | None) -> float:
    """Upstream ``docs.compare_docx_tables``: both docx hold the same number of tables, and
    each pair the same number of rows and columns and the same cell texts (python-docx's
    ``cell.text``, stripped). Text outside tables is not read."""
    if not docx_file1 or not docx_file2:
        return 0.0
    try:
        from docx import Document

        tables1, tables2 = Document(docx_file1).tables, Document(docx_file2).tables
        if len(tables1) != len(tables2):
            return 0.0
        for table1, table2 in zip(tables1, tables2):
            if len(table1.rows) != len(table2.rows) or len(table1.columns) != len(table2.columns):
                return 0.0
            for i in range(len(table1.rows)):
                for j in range(len(table1.columns)):
                    if table1.cell(i, j).text.strip() != table2.cell(i, j).text.strip():
                        return 0.0
    except Exception:
        return 0.0
    return 1.0


def compare_font_names(docx_file: str | None, rules: dict[str, Any]) -> float:
    """Upstream ``docs.compare_font_names``: every run of every body paragraph names
    ``rules["font_name"]`` as its own font (python-docx ``run.font.name``, the run's
    ``w:rFonts w:ascii``; a font inherited from a style does not count)."""
    if not docx_file:
        return 0.0
    try:
        from docx import Document

        document = Document(docx_file)
    except Exception:
        return 0.0
    expected = rules["font_name"]
    for paragraph in document.paragraphs:
        for run in paragraph.runs:
            if run.font.name != expected:
                return 0.0
    return 1.0



def check_italic_font_size_14(path1: str | None, path2: str | None) -> float:
    """Upstream ``docs.check_italic_font_size_14``: the document's paragraph texts equal the
    gold's (``compare_docx_files``, defaults) and every italic run of a body paragraph has
    its own size of 14 pt (a run italic or sized only through its style does not count;
    tables, headers and footers are not read)."""
    if not path1 or not path2:
        return 0.0
    if not compare_docx_files(path1, path2):
        return 0.0
    try:
        from docx import Document

        document = Document(path1)
    except Exception:
        return 0.0
    for paragraph in document.paragraphs:
        for run in paragraph.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0.0
    return 1.0

# chrome
# -- chrome (the profile's History and Bookmarks, read by the history/bookmarks getters) --------
def check_history_deleted(history_data: Any, rule: dict[str, Any]) -> float:
    """1.0 when no History url contains any of ``rule['keywords']`` (``type: keywords``).

    ``history_data`` is the ``history`` getter's ``(url, title, last_visit_time)`` rows."""
    if rule["type"] != "keywords":
        raise TypeError(f"{rule['type']} not support yet!")
    urls = [row[0] for row in history_data]
    return 0.0 if any(keyword in url for keyword in rule["keywords"] for url in urls) else 1.0


# Second-level labels under which a country code's registrations sit (amazon.co.uk): the
# part of the Public Suffix List that upstream's tldextract split needs for the sites a task
# names, without shipping the list.
_SECOND_LEVEL = frozenset({"ac", "co", "com", "edu", "gov", "net", "org", "ne", "or"})


def _site_netloc(host: str) -> str:
    """Upstream's compare_urls normalisation of a host: lower-cased, the public suffix dropped
    (``amazon.com`` and ``amazon.co.uk`` are both ``amazon``), ``www`` dropped when it is the
    only subdomain. The suffix is the last label, or the last two when the second-to-last is a
    common second-level label under a two-letter country code; tldextract reads the whole
    Public Suffix List, so hosts under private suffixes (``github.io``) may split differently."""
    labels = host.lower().split(".")
    cut = 2 if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL else 1
    if len(labels) <= cut:
        return host.lower()
    name = labels[:-cut]
    domain, subdomain = name[-1], ".".join(name[:-1])
    if subdomain == "www":
        subdomain = ""
    return f"{subdomain}.{domain}" if subdomain else domain


def _same_site_url(url1: str, url2: str) -> bool:
    """Upstream's compare_urls: both URLs (scheme ``http`` when absent) equal once their hosts
    are normalised (``_site_netloc``) and a lone ``/`` path dropped; params, query and fragment
    compared as they are."""
    from urllib.parse import urlparse, urlunparse

    def normalise(url: str) -> str:
        parsed = urlparse(url if re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url) else f"http://{url}")
        path = parsed.path if parsed.path != "/" else ""
        return urlunparse((parsed.scheme.lower(), _site_netloc(parsed.netloc), path, parsed.params,
                           parsed.query, parsed.fragment))

    return normalise(url1) == normalise(url2)


def is_cookie_deleted(cookie_data: Any, rule: dict[str, Any]) -> float:
    """1.0 when no cookie's host (``cookie_data`` rows as the ``cookie_data`` getter returns
    them: ``host_key`` second) is the same site as any of ``rule['domains']`` (``type:
    domains``), compared as upstream's compare_urls does; 0.0 without the Cookies file (upstream
    raises on it)."""
    if rule["type"] != "domains":
        raise TypeError(f"{rule['type']} not support yet!")
    if cookie_data is None:
        return 0.0
    hosts = [row[1] for row in cookie_data]
    return 0.0 if any(_same_site_url(domain, host) for domain in rule["domains"] for host in hosts) else 1.0


def check_font_size(font_size: dict[str, Any], rule: dict[str, Any]) -> float:
    """``chrome_font_size``'s ``default_font_size`` equal to ``rule['value']`` (``type: value``)
    or strictly between ``min`` and ``max`` (``type: range``)."""
    size = font_size["default_font_size"]
    if rule["type"] == "value":
        return 1.0 if size == rule["value"] else 0.0
    if rule["type"] == "range":
        return 1.0 if rule["min"] < size < rule["max"] else 0.0
    raise TypeError(f"{rule['type']} not support yet!")


def is_expected_bookmarks(bookmarks: Any, rule: dict[str, Any]) -> float:
    """The bookmarks bar (``bookmarks`` getter's roots) holds exactly the folders named
    ``rule['names']`` (``bookmark_bar_folders_names``) or exactly the links
    ``rule['urls']`` (``bookmark_bar_websites_urls``), compared as sets; links elsewhere,
    and links beside the folders (folders beside the links), are not looked at."""
    if not bookmarks:
        return 0.0
    bar = bookmarks["bookmark_bar"]["children"]
    if rule["type"] == "bookmark_bar_folders_names":
        return 1.0 if {b["name"] for b in bar if b["type"] == "folder"} == set(rule["names"]) else 0.0
    if rule["type"] == "bookmark_bar_websites_urls":
        return 1.0 if {b["url"] for b in bar if b["type"] == "url"} == set(rule["urls"]) else 0.0
    raise TypeError(f"{rule['type']} not support yet!")


METRICS: dict[str, Metric] = {
    fn.__name__: fn for fn in (
        exact_match, check_include_exclude, match_in_list, is_in_list, literal_match, check_json,
        check_direct_json_object, check_list, check_csv, file_contains, diff_text_file, run_sqlite3,
        check_json_settings, check_json_keybindings, compare_text_file, compare_config, compare_answer,
        is_extension_installed, check_thunderbird_prefs, check_thunderbird_filter, check_moved_jpgs,
        check_gnome_favorite_apps, is_utc_0, is_in_vm_clickboard, find_default_font, check_libre_locale,
        compare_table, compare_csv, check_accessibility_tree, is_first_line_centered,
        # impress metrics
        compare_pptx_files, check_transition, check_auto_saving_time,
        check_config_status, is_vlc_recordings_folder, check_qt_max_volume,
        check_qt_minimal_view,
        check_brightness_decrease_and_structure_sim, check_green_background,
        compare_images,
        # writer metrics
        compare_docx_files, compare_docx_tables, compare_font_names, check_italic_font_size_14,
        check_history_deleted, check_font_size, is_expected_bookmarks, is_cookie_deleted,
    )
}


# Options (``options:`` of the success check) of the metrics that take ``**options``; the
# options of the others are their keyword parameters (types from their defaults).
# Upstream ignores options it does not know; osguard refuses them (``osguard validate``).
METRIC_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "literal_match": {"type": {"enum": ["str", "list"]}, "ignore_case": {"type": "boolean"}},
    "compare_text_file": {"ignore_blanks": {"type": "boolean"}, "ignore_case": {"type": "boolean"}},
    "compare_table": {"rules": {"type": "array"}},
    "compare_csv": {"strict": {"type": "boolean"}, "ignore_case": {"type": "boolean"}},
    "check_json_settings": {},
    "check_json_keybindings": {},
    "compare_config": {},
    "compare_answer": {},
    "is_extension_installed": {},
    # impress metrics
    "compare_pptx_files": {**{name: {"type": "boolean"} for name in _PPTX_OPTION_DEFAULTS},
                           "approximately_tolerance": {"type": "number"}, "enable_debug": {"type": "boolean"}},
    # writer metrics
    "compare_docx_files": {"ignore_blanks": {"type": "boolean"}, "ignore_case": {"type": "boolean"},
                           "ignore_order": {"type": "boolean"}, "delete_empty_lines": {"type": "boolean"}},
}

# compare_table rule types osguard implements (others raise NotImplementedError).
COMPARE_TABLE_RULES = ("sheet_name", "sheet_data", "check_cell", *CALC_TABLE_RULES)

# The keys of the ``rules`` mapping a metric reads from a ``{type: rule}`` expected getter:
# (required, optional, keys holding a list). A string where a list is expected would be
# read character by character upstream (``check_include_exclude``'s ``include: "ok"``).
METRIC_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "exact_match": (("expected",), (), ()),
    "check_include_exclude": ((), ("include", "exclude"), ("include", "exclude")),
    "match_in_list": (("expected",), (), ("expected",)),
    "is_in_list": (("expected",), (), ()),
    "check_json": ((), ("expect", "unexpect"), ("expect", "unexpect")),
    "check_direct_json_object": (("expected",), ("expect_in_result",), ()),
    "check_list": ((), ("expect", "unexpect"), ("expect", "unexpect")),
    "check_csv": ((), ("expect", "unexpect"), ("expect", "unexpect")),
    "file_contains": (("expected",), (), ("expected",)),
    "run_sqlite3": (("sql",), (), ()),
    "check_json_settings": (("expected",), (), ()),
    "check_json_keybindings": (("expected",), (), ()),
    "compare_config": (("expected",), (), ()),
    "compare_answer": (("expected",), (), ()),
    "is_extension_installed": (("type", "expected"), (), ()),
    "check_thunderbird_prefs": ((), ("expect", "unexpect"), ()),
    "check_thunderbird_filter": ((), ("expect", "unexpect"), ("expect", "unexpect")),
    "check_moved_jpgs": (("expected",), (), ("expected",)),
    "check_gnome_favorite_apps": (("expected",), (), ("expected",)),
    "find_default_font": (("font_name",), (), ()),
    "check_libre_locale": (("locale_set",), (), ("locale_set",)),
    # impress metrics
    "check_transition": (("slide_idx", "transition_type"), (), ()),
    "check_auto_saving_time": (("minutes",), (), ()),
    # upstream's GIMP tasks spell a (unread) "type:" key, colon included
    "check_config_status": (("key", "value"), ("type:",), ()),
    "is_vlc_recordings_folder": (("recording_file_path",), (), ()),
    "check_qt_max_volume": (("expected_qt_max_volume",), (), ()),
    "check_qt_minimal_view": (("expected_qt_minimal_view",), (), ()),
    # writer metrics
    "compare_font_names": (("font_name",), (), ()),
    "check_history_deleted": (("type", "keywords"), (), ("keywords",)),
    "check_font_size": (("type",), ("value", "min", "max"), ()),
    "is_expected_bookmarks": (("type",), ("names", "urls"), ("names", "urls")),
}


@dataclass(frozen=True)
class MetricShape:
    """How the evaluator calls a metric: whether it takes an ``expected`` value (and must get
    one), and the options it accepts (name -> a small JSON-Schema: ``type`` or ``enum``)."""

    takes_expected: bool
    needs_expected: bool
    options: dict[str, dict[str, Any]]


_JSON_TYPE_OF_DEFAULT = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def metric_shape(name: str) -> MetricShape | None:
    """The calling shape of osguard's metric ``name`` (None for a metric osguard does not
    implement: desktop-env's metrics are not checked before they run)."""
    import inspect

    metric = METRICS.get(name)
    if metric is None:
        return None
    params = list(inspect.signature(metric).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    second = positional[1] if len(positional) > 1 else None
    options: dict[str, dict[str, Any]] = {}
    for param in positional[2:] + [p for p in params if p.kind == p.KEYWORD_ONLY]:
        kind = next((t for py, t in _JSON_TYPE_OF_DEFAULT if isinstance(param.default, py)), None)
        options[param.name] = {"type": kind} if kind else {}
    if any(p.kind == p.VAR_KEYWORD for p in params):
        options.update(METRIC_OPTIONS.get(name, {}))
    return MetricShape(takes_expected=second is not None,
                       needs_expected=second is not None and second.default is second.empty,
                       options=options)


@functools.lru_cache(maxsize=1)
def _upstream_metrics() -> Any:
    """desktop-env's metrics package, or None when it is not installed or cannot be imported
    (it imports torch, easyocr...): tried once per process."""
    try:
        import importlib

        return importlib.import_module("desktop_env.evaluators.metrics")
    except Exception:
        return None


def resolve_metric(name: str) -> Metric:
    """The metric ``name``: osguard's own, else desktop-env's (``osworld`` extra), lazily.

    Raises:
        UnknownNameError: when neither has it (with the closest osguard name).
    """
    if name in METRICS:
        return METRICS[name]
    upstream = _upstream_metrics()
    if upstream is not None and callable(getattr(upstream, name, None)):
        return getattr(upstream, name)
    hint = did_you_mean(str(name), METRICS)
    extra = "" if upstream is not None else " (install osguard[osworld] for desktop-env's other metrics)"
    raise UnknownNameError(f"unknown OSWorld metric {name!r}{hint}{extra}")
