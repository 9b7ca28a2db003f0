"""The ``config_value`` success check: one (nested) value of a config file, compared type-strictly.

::

    success:
      func: config_value
      path: ~/.config/Code/User/settings.json
      format: jsonc                    # json | jsonc | ini | prefs | xcu
      key: [files.exclude, "**/__pycache__"]
      expected: true

The file is read after the episode (through :func:`osguard.evaluators.getters.read_env_file`),
parsed keeping types, the value found by following ``key`` and compared with ``expected``
type-strictly: ``true`` is not ``1``, ``15`` is not ``15.0`` and ``"15"`` is not ``15``; mappings
and lists compare element by element the same way. A missing file, an unparseable file or a
missing key is a failed check (the agent broke or never made the setting), with the reason.

Key paths per format:

- ``json`` / ``jsonc``: any number of steps; a string indexes a mapping, an integer a list.
  ``jsonc`` (VS Code's settings) allows ``//`` and ``/* */`` comments and trailing commas.
- ``ini``: ``[section, option]``; values are strings (INI has no types).
- ``prefs`` (Mozilla ``prefs.js``): ``[pref.name]``; values are true/false, integers or strings.
- ``xcu`` (LibreOffice ``registrymodifications.xcu``): ``[item path, property]`` or the full
  ``/node/.../property`` path; values are typed by their ``oor:type`` (``xs:boolean``,
  ``xs:int``/``short``/``long``, ``xs:double``, ``xs:string``; untyped: a string).
"""

from __future__ import annotations

import json
import re
from typing import Any

FORMATS: tuple[str, ...] = ("json", "jsonc", "ini", "prefs", "xcu")


class Unparseable(ValueError):
    """The file is not valid in its format."""


class KeyMissing(LookupError):
    """The key path does not lead to a value; the message says at which step."""


# ----------------------------------------------------------------------------- key paths


def key_path_problem(fmt: Any, key: Any) -> str | None:
    """Why ``key`` cannot address a value of format ``fmt`` (None when it can)."""
    if fmt not in FORMATS or not isinstance(key, list) or not key:
        return None  # the schema said it
    if fmt in ("json", "jsonc"):
        bad = [k for k in key if not (isinstance(k, str) or (isinstance(k, int) and not isinstance(k, bool)))]
        return f"{fmt} key steps are strings (mapping keys) or integers (list indices), got {bad[0]!r}" if bad else None
    if not all(isinstance(k, str) for k in key):
        return f"{fmt} key steps are strings"
    if fmt == "ini" and len(key) != 2:
        return f"an ini key is [section, option], got {len(key)} step(s)"
    if fmt == "prefs" and len(key) != 1:
        return f"a prefs key is [pref.name], got {len(key)} steps"
    if fmt == "xcu":
        if len(key) == 1 and not re.fullmatch(r"/[^/]+(/[^/]+)+", key[0]):
            return f"an xcu key is [item path, property] or '/node/.../property', got {key[0]!r}"
        if len(key) > 2:
            return f"an xcu key is [item path, property], got {len(key)} steps"
    return None


# ----------------------------------------------------------------------------- parsing


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (VS Code's settings) as plain JSON text.

    Comments and commas inside strings are kept; line numbers are kept (a comment's newlines stay).
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise Unparseable("unterminated /* comment")
            out.append("\n" * text.count("\n", i, j))
            i = j + 2
        elif c == ",":
            j = i + 1
            while j < n:  # a comma before a closing bracket (past blanks and comments) goes
                if text[j].isspace():
                    j += 1
                elif text.startswith("//", j):
                    k = text.find("\n", j)
                    j = n if k < 0 else k
                elif text.startswith("/*", j):
                    k = text.find("*/", j + 2)
                    j = n if k < 0 else k + 2
                else:
                    break
            if j < n and text[j] in "]}":
                i += 1
                continue
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


_PREF = re.compile(r'^\s*(?:user_)?pref\(\s*"((?:[^"\\]|\\.)*)"\s*,\s*(.+?)\s*\)\s*;\s*$')
_XCU_TYPES = {"xs:boolean": "bool", "xs:int": "int", "xs:short": "int", "xs:long": "int", "xs:double": "float",
              "xs:string": "str"}
_OOR = "{http://openoffice.org/2001/registry}"


def parse(fmt: str, data: bytes) -> Any:
    """The file's content with its types (see the module docstring).

    Raises:
        Unparseable: when ``data`` is not valid in ``fmt``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unparseable(f"not UTF-8: {exc}") from None
    if fmt in ("json", "jsonc"):
        try:
            return json.loads(strip_jsonc(text) if fmt == "jsonc" else text)
        except json.JSONDecodeError as exc:
            raise Unparseable(f"invalid {fmt.upper()}: {exc}") from None
    if fmt == "ini":
        import configparser

        parser = configparser.ConfigParser(interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
        try:
            parser.read_string(text)
        except configparser.Error as exc:
            raise Unparseable(f"invalid INI: {exc}".splitlines()[0]) from None
        return {section: dict(parser[section]) for section in parser.sections()}
    if fmt == "prefs":
        prefs: dict[str, Any] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith(("//", "#", "/*", "*")):
                continue
            match = _PREF.match(stripped)
            if match is None:
                raise Unparseable(f"line {number} is not a pref: {stripped[:60]!r}")
            try:
                value = json.loads(match.group(2))
            except json.JSONDecodeError:
                raise Unparseable(f"line {number}: bad value {match.group(2)[:40]!r}") from None
            if isinstance(value, float) or value is None or isinstance(value, (list, dict)):
                raise Unparseable(f"line {number}: a pref value is true/false, an integer or a string")
            prefs[json.loads(f'"{match.group(1)}"')] = value
        return prefs
    if fmt == "xcu":
        import xml.etree.ElementTree as ET

        try:
            root = ET.fromstring(data)
        except ET.ParseError as exc:
            raise Unparseable(f"invalid XML: {exc}") from None
        values: dict[tuple[str, str], Any] = {}
        for item in root.iter("item"):
            node = item.get(_OOR + "path", "")
            for prop in item.findall("prop"):
                value = prop.find("value")
                values[(node, prop.get(_OOR + "name", ""))] = _xcu_value(prop.get(_OOR + "type"),
                                                                          None if value is None else value.text)
        return values
    raise ValueError(f"unknown config format {fmt!r}")


def _xcu_value(oor_type: str | None, text: str | None) -> Any:
    text = text or ""
    kind = _XCU_TYPES.get(oor_type or "", "str")
    try:
        if kind == "bool":
            if text not in ("true", "false"):
                raise Unparseable(f"xs:boolean value {text!r}")
            return text == "true"
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise Unparseable(f"{oor_type} value {text!r}") from None
    return text


def lookup(fmt: str, data: Any, key: list[Any]) -> Any:
    """Follow ``key`` into parsed ``data``.

    Raises:
        KeyMissing: saying which step is missing.
    """
    if fmt == "xcu":
        node, prop = (key[0], key[1]) if len(key) == 2 else tuple(key[0].rsplit("/", 1))
        if (node, prop) not in data:
            raise KeyMissing(f"no property {prop!r} under {node!r}")
        return data[(node, prop)]
    value = data
    for depth, step in enumerate(key):
        where = "the top level" if depth == 0 else "[" + ", ".join(map(repr, key[:depth])) + "]"
        if isinstance(value, dict) and isinstance(step, str):
            if step not in value:
                raise KeyMissing(f"no key {step!r} at {where}")
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and not isinstance(step, bool):
            if not -len(value) <= step < len(value):
                raise KeyMissing(f"no index {step} at {where} (a list of {len(value)})")
            value = value[step]
        else:
            raise KeyMissing(f"{where} is {type_name(value)}, not something {step!r} can index")
    return value


# ----------------------------------------------------------------------------- comparing


def type_name(value: Any) -> str:
    """The JSON-ish name of ``value``'s type, for evidence."""
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (type(None), "null"),
                     (list, "list"), (dict, "mapping")):
        if isinstance(value, py):
            return name
    return type(value).__name__


def strict_difference(expected: Any, actual: Any, where: str = "") -> str | None:
    """None when ``actual`` equals ``expected`` type-strictly, else the first difference."""
    at = f" at {where}" if where else ""
    if type(expected) is not type(actual):
        return f"expected {type_name(expected)} {expected!r}, got {type_name(actual)} {actual!r}{at}"
    if isinstance(expected, dict):
        for k in expected:
            if k not in actual:
                return f"missing key {k!r}{at}"
            diff = strict_difference(expected[k], actual[k], f"{where}[{k!r}]")
            if diff:
                return diff
        extra = [k for k in actual if k not in expected]
        return f"unexpected key {extra[0]!r}{at}" if extra else None
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return f"expected {len(expected)} items, got {len(actual)}{at}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            diff = strict_difference(e, a, f"{where}[{i}]")
            if diff:
                return diff
        return None
    return None if expected == actual else f"expected {expected!r}, got {actual!r}{at}"


def evaluate(config: dict[str, Any], data: bytes | None) -> tuple[bool, str]:
    """Judge a ``config_value`` check on the file's bytes (None: the file does not exist)."""
    path, fmt, key = config["path"], config["format"], list(config["key"])
    shown = "[" + ", ".join(map(repr, key)) + "]"
    if data is None:
        return False, f"config_value: {path} does not exist"
    try:
        value = lookup(fmt, parse(fmt, data), key)
    except Unparseable as exc:
        return False, f"config_value: {path} is unparseable: {exc}"
    except KeyMissing as exc:
        return False, f"config_value: {path} {shown}: {exc}"
    diff = strict_difference(config["expected"], value)
    if diff:
        return False, f"config_value: {path} {shown}: {diff}"
    return True, f"config_value: {path} {shown} is {value!r}"
