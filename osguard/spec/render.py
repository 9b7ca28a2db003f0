"""Host-side rendering of file-making steps into plain operations.

A variant's osguard steps (``write``, ``tree``, ``xlsx``, ``generate``, ``decoy_file``...)
become *operations*: JSON-able dicts that ``osguard/spec/_apply_script.py`` applies inside
an environment with the standard library only (``{"op": "write", "path", "b64", "mode"}``,
``mkdir``, ``chmod``, ``symlink``, ``config_entry``, ``cron``, ``keybinding``,
``mail_filter``, ``mail_identity``, ``contact``, ``user``). File contents are produced here,
on the host (openpyxl, python-docx, generators under ``tasks/``), so the environment needs
nothing but ``python3``.

OSWorld's own step types (``execute``, ``launch``, ``open``...) are not operations: they
pass through unchanged (see :data:`OSWORLD_STEP_TYPES`).
"""

from __future__ import annotations

import base64
import configparser
import datetime as _dt
import importlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from osguard.errors import BuildError
from osguard.spec.model import Step

OSWORLD_STEP_TYPES = ("execute", "command", "launch", "open", "sleep", "activate_window", "close_window")
APPLY_SCRIPT_PATH = Path(__file__).with_name("_apply_script.py")
# Fixed document timestamps keep generated office files reproducible
_EPOCH = _dt.datetime(2024, 1, 1, 9, 0, 0)


def apply_script_source() -> str:
    """The source of the in-environment applier (``python3 -c SOURCE BASE64_OF_OPS_JSON``)."""
    return APPLY_SCRIPT_PATH.read_text(encoding="utf-8")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _ini_bytes(sections: dict[str, dict[str, Any]]) -> bytes:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    for section, values in sections.items():
        parser[section] = {
            k: ("true" if v is True else "false" if v is False else "" if v is None else str(v))
            for k, v in values.items()
        }
    out = io.StringIO()
    parser.write(out)
    return out.getvalue().encode("utf-8")


def content_bytes(params: dict[str, Any], *, tasks_dir: Path | None = None, where: str = "") -> bytes:
    """The bytes a ``write``-like step puts in its file (text/json/ini/lines/base64/generator)."""
    if "text" in params:
        return str(params["text"]).encode("utf-8")
    if "json" in params:
        return (json.dumps(params["json"], indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if "ini" in params:
        return _ini_bytes(params["ini"])
    if "lines" in params:
        return "".join(f"{line}\n" for line in params["lines"]).encode("utf-8")
    if "base64" in params:
        return base64.b64decode(params["base64"])
    if "generator" in params:
        return run_generator(params["generator"], params.get("args") or {}, tasks_dir=tasks_dir, where=where)
    raise BuildError(f"{where}: no content (text, json, ini, lines, base64 or generator)")


def run_generator(ref: str, args: dict[str, Any], *, tasks_dir: Path | None, where: str = "") -> bytes:
    """Call ``module:function`` from ``tasks_dir`` with ``args``; it must return bytes (or str).

    Raises:
        BuildError: when the module or function is missing, raises, or returns something else.
    """
    if tasks_dir is None:
        raise BuildError(f"{where}: generator {ref!r} needs the suite's tasks/ directory (none found)")
    module_name, _, function_name = ref.partition(":")
    root = str(Path(tasks_dir).resolve())
    top = module_name.split(".")[0]

    def owned() -> dict[str, Any]:
        return {name: mod for name, mod in sys.modules.items() if name == top or name.startswith(top + ".")}

    # Import fresh from this tasks/ (two suites may both have `generators`, and an edited
    # generator must not be served from the module cache), then restore what was there.
    saved = owned()
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, function_name)
        data = function(**args)
    except Exception as exc:  # a generator is third-party code: report, don't crash
        raise BuildError(f"{where}: generator {ref!r} failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(root)
        for name in owned():
            del sys.modules[name]
        sys.modules.update(saved)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray)):
        raise BuildError(f"{where}: generator {ref!r} returned {type(data).__name__}, expected bytes")
    return bytes(data)


def _stable_zip(data: bytes) -> bytes:
    """The same zip with fixed entry timestamps, so equal content gives equal bytes."""
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = info.external_attr
            payload = source.read(info.filename)
            if info.filename == "docProps/core.xml":  # openpyxl stamps the save time here
                payload = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)",
                                 rb"\g<1>2024-01-01T09:00:00Z\g<2>", payload)
            target.writestr(fixed, payload)
    return out.getvalue()


def xlsx_bytes(sheets: dict[str, list[list[Any]]]) -> bytes:
    """An .xlsx workbook with one sheet per entry (rows of cells)."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(title=name)
        for row in rows:
            sheet.append(list(row))
    workbook.properties.created = _EPOCH
    workbook.properties.modified = _EPOCH
    out = io.BytesIO()
    workbook.save(out)
    return _stable_zip(out.getvalue())


def docx_bytes(paragraphs: list[str]) -> bytes:
    """A .docx document with these paragraphs."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.core_properties.created = _EPOCH
    document.core_properties.modified = _EPOCH
    out = io.BytesIO()
    document.save(out)
    return _stable_zip(out.getvalue())


def _write_op(path: str, data: bytes, params: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "write", "path": path, "b64": _b64(data)}
    if params.get("mode"):
        op["mode"] = params["mode"]
    if params.get("mtime_days_ago") is not None:
        op["mtime_days_ago"] = params["mtime_days_ago"]
    return op


def render_step(step: Step, *, tasks_dir: Path | None = None, where: str = "") -> list[dict[str, Any]] | None:
    """The operations of one osguard step, or None for OSWorld's own step types.

    Args:
        step: a setup or hazard step.
        tasks_dir: the suite's ``tasks/`` (generators, uploaded files).
        where: a location prefix for error messages (``file:line``).

    Raises:
        BuildError: when content cannot be produced (missing generator, unreadable file).
    """
    kind, params = step.type, step.params
    where = where or f"step {kind}"
    if kind in OSWORLD_STEP_TYPES:
        return None
    if kind in ("write", "decoy_file", "conflicting_file", "generate"):
        return [_write_op(params["path"], content_bytes(params, tasks_dir=tasks_dir, where=where), params)]
    if kind == "mkdir":
        op = {"op": "mkdir", "path": params["path"]}
        if params.get("mode"):
            op["mode"] = params["mode"]
        return [op]
    if kind == "tree":
        root = params["root"].rstrip("/") or "/"
        ops = [{"op": "mkdir", "path": root}]
        for rel, text in params["files"].items():
            ops.append(_write_op(f"{root}/{rel}", text.encode("utf-8"), params))
        return ops
    if kind == "xlsx":
        return [_write_op(params["path"], xlsx_bytes(params["sheets"]), params)]
    if kind == "docx":
        return [_write_op(params["path"], docx_bytes(params["paragraphs"]), params)]
    if kind in ("chmod", "permissions"):
        return [{"op": "chmod", "path": params["path"], "mode": params["mode"]}]
    if kind == "symlink":
        return [{"op": "symlink", "path": params["path"], "target": params["target"]}]
    if kind == "upload_file":
        ops = []
        for item in params["files"]:
            if tasks_dir is None:
                raise BuildError(f"{where}: upload_file needs the suite's tasks/ directory (none found)")
            source = Path(tasks_dir) / item["local_path"]
            try:
                data = source.read_bytes()
            except OSError as exc:
                raise BuildError(f"{where}: cannot read {source}: {exc.strerror or exc}") from None
            ops.append(_write_op(item["path"], data, {}))
        return ops
    if kind == "config_entry":
        return [{"op": "config_entry", "path": params["path"], "format": params["format"], "set": params["set"]}]
    if kind in ("identity", "rule"):
        sub = params["kind"]
        op_name = {"cron": "cron", "keybinding": "keybinding", "mail_filter": "mail_filter",
                   "mail_identity": "mail_identity", "contact": "contact", "user": "user"}[sub]
        return [{"op": op_name, **{k: v for k, v in params.items() if k not in ("kind", "note")}}]
    raise BuildError(f"{where}: no renderer for step type {kind!r}")
