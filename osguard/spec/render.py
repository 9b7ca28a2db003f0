"""The one renderer of osguard's file-making steps: a step becomes plain file operations.

A variant's osguard steps (``write``, ``mkdir``, ``tree``, ``xlsx``, ``docx``, ``generate``,
``upload_file``, ``chmod``/``permissions``, ``symlink``, ``decoy_file``/``conflicting_file``,
``config_entry``, ``identity``, ``rule``) become *operations*: JSON-able dicts such as
``{"op": "write", "path": "~/a.txt", "b64": "aGkK", "mode": "0644"}``. Both consumers apply
them with the same in-environment applier, ``osguard/spec/_apply_script.py`` (standard
library only), run by the same commands (:func:`applier_commands`:
``python3 -c <applier> <base64 of the operations JSON>``, packed under Linux's argument
limit): the builder (``osguard.builder.steps``) runs them through ``env.execute``, the
OSWorld export (``osguard.spec.export``) writes them as ``execute`` steps.

File contents are produced here, on the host (openpyxl, python-docx, generators under
``tasks/``), so the environment needs nothing but ``python3``. Merges that depend on what is
already in the environment (config keys, contacts, mail filters, keybindings, crontab lines,
users) are operations the applier carries out there. Paths stay environment paths (``~``
is expanded by the applier, inside the environment); a relative path means one below ``~``.

Operations: ``write {path, b64, mode?, mtime_days_ago?, append?}``, ``mkdir {path, mode?}``,
``chmod {path, mode}``, ``symlink {path, target}``, ``config_entry {path, format, set}``,
``cron {line}``, ``keybinding {file, key, command, when?}``, ``mail_filter {file, name,
condition, action, actionValue?, enabled?, type?}``, ``mail_identity {profile, key, email,
<prefs>}``, ``contact {file, <vCard properties>}``, ``user {name, uid?, home?}``.

OSWorld's own step types (``execute``, ``launch``, ``open``...) are not operations:
:func:`render` returns None for them (see :data:`OSWORLD_STEP_TYPES`).
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
import threading
from pathlib import Path
from typing import Any, Callable

from osguard._registry import did_you_mean
from osguard.errors import BuildError
from osguard.spec.bounds import MTIME_DAYS_AGO_MAX, USER_UID_MAX, USER_UID_MIN
from osguard.spec.model import Step

__all__ = [
    "APPLY_FAILED_MARKER",
    "APPLY_SCRIPT_PATH",
    "COMMAND_STEP_TYPES",
    "FILE_STEP_TYPES",
    "GIMP_SESSIONRC",
    "LIBREOFFICE_PROFILE",
    "LIBREOFFICE_PROFILE_DEFAULTS",
    "VLC_PROFILE",
    "VLC_PROFILE_DEFAULTS",
    "MAX_OPS_JSON",
    "OSWORLD_STEP_TYPES",
    "StepFailed",
    "applier_commands",
    "apply_script_source",
    "created_paths",
    "docx_bytes",
    "env_path",
    "file_bytes",
    "load_generator",
    "op_created_paths",
    "ops_payload",
    "parse_mode",
    "render",
    "render_step",
    "run_generator",
    "xlsx_bytes",
]

OSWORLD_STEP_TYPES = ("execute", "command", "launch", "open", "sleep", "activate_window", "close_window")
FILE_STEP_TYPES = ("write", "decoy_file", "conflicting_file", "generate", "mkdir", "tree", "xlsx", "docx",
                   "chmod", "permissions", "symlink", "upload_file", "config_entry", "identity", "rule",
                   "libreoffice_profile", "gimp_profile", "vlc_profile")
# Steps that run commands rather than make files: OSWorld's, and osguard's event-driven wait.
COMMAND_STEP_TYPES = OSWORLD_STEP_TYPES + ("wait_for",)
# LibreOffice's user profile (``libreoffice_profile`` steps write its registrymodifications.xcu).
LIBREOFFICE_PROFILE = "~/.config/libreoffice/4/user/registrymodifications.xcu"
# What a fresh profile needs so that LibreOffice opens straight on the document, as OSWorld's
# image leaves it: no first-start wizard, no Tip of the Day, no "what's new" / donation /
# get-involved info bars, no "Keep current format?" question when Ctrl+S saves an xlsx, docx
# or pptx (OSWorld's postconfig saves with Ctrl+S and would otherwise stall on it), and
# LibreOffice's own file dialogs (the same keyboard paths under every VCL plug-in).
LIBREOFFICE_PROFILE_DEFAULTS: dict[str, Any] = {
    "/org.openoffice.Setup/Office/ooSetupInstCompleted": True,
    "/org.openoffice.Setup/Office/FirstStartWizardCompleted": True,
    "/org.openoffice.Setup/Product/ooSetupLastVersion": "7.4",
    "/org.openoffice.Setup/Product/LastTimeDonateShown": 9999999999,
    "/org.openoffice.Setup/Product/LastTimeGetInvolvedShown": 9999999999,
    "/org.openoffice.Office.Common/Misc/FirstRun": False,
    "/org.openoffice.Office.Common/Misc/ShowTipOfTheDay": False,
    "/org.openoffice.Office.Common/Misc/UseSystemFileDialog": False,
    "/org.openoffice.Office.Common/Save/Document/WarnAlienFormat": False,
}
# GIMP 2.10's session file (``gimp_profile`` steps write it). GIMP 2.10 shows no tip dialog;
# what a fresh profile lacks is OSWorld's window: one maximised window (single-window mode,
# docks left and right), so the image and its menus fill the screen from the first shot.
GIMP_SESSIONRC = "~/.config/GIMP/2.10/sessionrc"
_GIMP_SESSIONRC_TEXT = """\
# GIMP sessionrc (written by osguard's gimp_profile step; GIMP rewrites it when it quits)

(session-info "toplevel"
    (factory-entry "gimp-single-image-window")
    (position 0 0)
    (size 1920 1080)
    (open-on-exit)
    (aux-info
        (left-docks-width "188")
        (right-docks-width "205")
        (maximized "yes"))
    (gimp-toolbox
        (side left)
        (book
            (current-page 0)
            (dockable "gimp-tool-options"
                (tab-style automatic))))
    (gimp-dock
        (side right)
        (book
            (current-page 0)
            (dockable "gimp-brush-grid"
                (tab-style automatic)))
        (book
            (position 336)
            (current-page 0)
            (dockable "gimp-layer-list"
                (tab-style automatic)
                (preview-size 32))
            (dockable "gimp-channel-list"
                (tab-style automatic)
                (preview-size 32)))))

(hide-docks no)
(single-window-mode yes)
(show-tabs yes)
(tabs-position 0)
(last-tip-shown 0)

# end of sessionrc
"""
# VLC's configuration file (``vlc_profile`` steps write it, in VLC's own ``key=value`` form:
# VLC ignores a line written ``key = value``, as Python's configparser writes it).
VLC_PROFILE = "~/.config/vlc/vlcrc"
# No "Privacy and Network Access Policy" dialog at the first start, and no metadata lookups
# on the network (the environment is offline), as OSWorld's image leaves VLC.
VLC_PROFILE_DEFAULTS: dict[str, Any] = {
    "qt.qt-privacy-ask": 0,
    "core.metadata-network-access": 0,
}
APPLY_SCRIPT_PATH = Path(__file__).with_name("_apply_script.py")
# The applier prints this on stdout, then the index of the operation that failed.
APPLY_FAILED_MARKER = "@@OSGUARD_APPLY_FAILED@@"
CONFIG_FORMATS = ("json", "ini", "prefs", "xcu")
# Fixed document timestamps keep generated office files reproducible
_EPOCH = _dt.datetime(2024, 1, 1, 9, 0, 0)


class StepFailed(Exception):
    """A step could not be rendered or applied; the message says why, without a location
    (the builder adds ``FILE:LINE: $.phase[i] (type)``, the export ``FILE:LINE``)."""


# --------------------------------------------------------------------------- the applier


def apply_script_source() -> str:
    """The source of the in-environment applier (``python3 -c SOURCE BASE64_OF_OPS_JSON``)."""
    return APPLY_SCRIPT_PATH.read_text(encoding="utf-8")


def ops_payload(ops: list[dict[str, Any]]) -> str:
    """The applier's argument: base64 of the operations' compact JSON (no braces, so OSWorld's
    placeholder substitution cannot touch it)."""
    text = json.dumps(ops, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


# Linux caps one argv string at 128 KiB (MAX_ARG_STRLEN): 90 KiB of JSON is 120 KiB of base64.
MAX_OPS_JSON = 90 * 1024
_CHUNK_B64 = 48 * 1024  # base64 characters of file content per write operation


def _split_large_writes(ops: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(index of the original operation, operation), big writes cut into appended chunks."""
    out: list[tuple[int, dict[str, Any]]] = []
    for origin, op in enumerate(ops):
        if op["op"] != "write" or len(op["b64"]) <= _CHUNK_B64:
            out.append((origin, op))
            continue
        data = op["b64"]
        # chunks at multiples of 4 base64 characters decode independently
        pieces = [data[i : i + _CHUNK_B64] for i in range(0, len(data), _CHUNK_B64)]
        for index, piece in enumerate(pieces):
            chunk = {"op": "write", "path": op["path"], "b64": piece}
            if index:
                chunk["append"] = True
            if index == len(pieces) - 1:
                for key in ("mode", "mtime_days_ago"):
                    if key in op:
                        chunk[key] = op[key]
            out.append((origin, chunk))
    return out


def applier_commands(ops: list[dict[str, Any]]) -> list[tuple[list[str], list[int]]]:
    """The commands that apply ``ops``: ``python3 -c <applier> <payload>``, as few as Linux's
    argument limit allows, each with the index (in ``ops``) of every operation it carries
    (the applier reports a failure by its position in its own payload).

    Raises:
        StepFailed: when one operation alone is too big for a command line.
    """
    source = apply_script_source()
    commands: list[tuple[list[str], list[int]]] = []
    batch: list[dict[str, Any]] = []
    origins: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal batch, origins, size
        if batch:
            commands.append((["python3", "-c", source, ops_payload(batch)], origins))
        batch, origins, size = [], [], 0

    for origin, op in _split_large_writes(ops):
        op_size = len(json.dumps(op, ensure_ascii=False).encode("utf-8")) + 1
        if op_size > MAX_OPS_JSON:
            raise StepFailed(f"a {op['op']} operation of {op_size} bytes does not fit in one command line "
                             f"(limit {MAX_OPS_JSON}); split its values")
        if batch and size + op_size > MAX_OPS_JSON:
            flush()
        batch.append(op)
        origins.append(origin)
        size += op_size
    flush()
    return commands


# --------------------------------------------------------------------------- validation


def _require(params: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in params]
    if missing:
        raise StepFailed(f"missing parameter(s): {', '.join(repr(m) for m in missing)}")


def env_path(value: Any, what: str = "path") -> str:
    """Validate an environment path; a relative one becomes ``~/...`` (OSWorld resolves relative
    paths against the server's cwd, the home). ``~`` stays for the applier to expand."""
    if not isinstance(value, str) or not value:
        raise StepFailed(f"'{what}' must be a non-empty path string, got {value!r}")
    if "\x00" in value:
        raise StepFailed(f"'{what}' contains a NUL byte")
    if any(part == ".." for part in value.split("/")):
        raise StepFailed(f"'{what}' must not contain '..': {value}")
    if value == "~" or value.startswith(("~/", "/")):
        return value
    return "~/" + value


def parse_mode(value: Any, what: str = "mode") -> str:
    """Validate a mode written as an octal string ("0644", "644", "0o644"); returns its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        # YAML 1.1 reads 0644 as the number 420 and 644 as 644: neither can be trusted.
        raise StepFailed(f"'{what}' must be a quoted octal string like \"0644\", got the number {value} "
                         "(YAML reads 0644 as 420)")
    if isinstance(value, str) and re.fullmatch(r"(0o|0)?[0-7]{3,4}", value.strip()):
        text = value.strip()
        return text[2:] if text.startswith("0o") else text
    raise StepFailed(f"'{what}' must be an octal string like \"0644\", got {value!r}")


# --------------------------------------------------------------------------- contents


def _ini_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _ini_text(sections: Any) -> str:
    if not isinstance(sections, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise StepFailed("'ini' must be a mapping {section: {key: value}}")
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    for section, items in sections.items():
        parser[str(section)] = {str(k): _ini_value(v) for k, v in items.items()}
    buffer = io.StringIO()
    parser.write(buffer)
    return buffer.getvalue()


def file_bytes(params: dict[str, Any], tasks_dir: Path | None) -> bytes:
    """Content of a ``write``-style step: exactly one of text/json/ini/lines/base64/generator."""
    sources = [key for key in ("text", "json", "ini", "lines", "base64", "generator") if key in params]
    if len(sources) != 1:
        raise StepFailed(
            "give exactly one of 'text', 'json', 'ini', 'lines', 'base64' or 'generator'"
            + (f" (got {', '.join(sources)})" if sources else "")
        )
    source = sources[0]
    value = params[source]
    if source == "text":
        if not isinstance(value, str):
            raise StepFailed(f"'text' must be a string, got {type(value).__name__}")
        return value.encode("utf-8")
    if source == "json":
        return (json.dumps(value, indent=4, ensure_ascii=False) + "\n").encode("utf-8")
    if source == "ini":
        return _ini_text(value).encode("utf-8")
    if source == "lines":
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise StepFailed("'lines' must be a list of strings")
        return "".join(line + "\n" for line in value).encode("utf-8")
    if source == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except Exception as exc:  # binascii.Error, TypeError
            raise StepFailed(f"'base64' is not valid base64: {exc}") from None
    return run_generator(value, params.get("args") or {}, tasks_dir)


# Builds run in threads (`osguard check -w N`) and imports swap entries of the process-wide
# sys.modules and sys.path: one import at a time.
_IMPORT_LOCK = threading.Lock()
_GENERATOR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def load_generator(ref: str, tasks_dir: Path | None) -> Callable[..., Any]:
    """Import ``module.path:function`` freshly from ``tasks_dir`` and return the function.

    This runs the suite's code in the calling process, without limits: for tests and tools
    that inspect a generator. Builds call :func:`run_generator`, which runs it in a child
    process with limits.

    Two suites may both have a ``generators`` package and an edited generator must not be
    served from the module cache: the module is imported with ``tasks_dir`` first on
    ``sys.path`` (so generators may import their siblings) and ``sys.modules`` is restored.

    Raises:
        StepFailed: when the name is malformed, the module or function is missing, or the
            module fails to import.
    """
    if not isinstance(ref, str) or not _GENERATOR_RE.match(ref):
        raise StepFailed(f"'generator' must look like 'module.path:function' (relative to tasks/), got {ref!r}")
    if tasks_dir is None:
        raise StepFailed(f"generator {ref!r} needs the suite's tasks/ directory (none found)")
    module_name, function_name = ref.split(":")
    root = Path(tasks_dir).resolve()
    file = root.joinpath(*module_name.split("."))
    if not file.with_suffix(".py").is_file() and not (file / "__init__.py").is_file():
        raise StepFailed(f"generator module {module_name!r} not found: expected {file.with_suffix('.py')}")
    top = module_name.split(".")[0]

    def owned() -> dict[str, Any]:
        return {name: mod for name, mod in sys.modules.items() if name == top or name.startswith(top + ".")}

    with _IMPORT_LOCK:
        saved = owned()
        for name in saved:
            del sys.modules[name]
        sys.path.insert(0, str(root))
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a generator is third-party code: report, don't crash
            raise StepFailed(f"generator {ref!r} failed: {type(exc).__name__}: {exc}") from None
        finally:
            sys.path.remove(str(root))
            for name in owned():
                del sys.modules[name]
            sys.modules.update(saved)
    function = getattr(module, function_name, None)
    if not callable(function):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise StepFailed(f"generator module {module_name!r} has no function {function_name!r}"
                         f"{did_you_mean(function_name, names)}")
    return function


def run_generator(ref: str, args: Any, tasks_dir: Path | None) -> bytes:
    """Run ``module:function`` from ``tasks_dir`` with ``args`` in a child process with limits
    (``osguard.spec.generators``); it must return bytes (or str).

    Raises:
        StepFailed: when the arguments break the generator's declared bounds, the generator
            is missing, raises, returns something else or is killed by a limit.
    """
    from osguard.spec.generators import GeneratorRefused
    from osguard.spec.generators import run_generator as run_limited

    if not isinstance(ref, str) or not _GENERATOR_RE.match(ref):
        raise StepFailed(f"'generator' must look like 'module.path:function' (relative to tasks/), got {ref!r}")
    if not isinstance(args, dict):
        raise StepFailed("'args' must be a mapping")
    try:
        return run_limited(ref, args, tasks_dir)
    except GeneratorRefused as exc:
        raise StepFailed(str(exc)) from None


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


def xlsx_bytes(sheets: Any) -> bytes:
    """An xlsx workbook from ``{SheetName: [[cell, ...], ...]}`` (None/empty = blank cell),
    byte-for-byte reproducible."""
    from openpyxl import Workbook  # heavy: only when a variant needs it

    if not isinstance(sheets, dict) or not sheets:
        raise StepFailed("'sheets' must be a mapping {SheetName: [[cell, ...], ...]}")
    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(str(name))
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise StepFailed(f"sheet {name!r} must be a list of rows (lists of cells)")
        for row_index, row in enumerate(rows, start=1):
            for col_index, value in enumerate(row, start=1):
                if value is not None and value != "":
                    sheet.cell(row=row_index, column=col_index, value=value)
    workbook.properties.created = _EPOCH
    workbook.properties.modified = _EPOCH
    buffer = io.BytesIO()
    workbook.save(buffer)
    return _stable_zip(buffer.getvalue())


def docx_bytes(paragraphs: Any) -> bytes:
    """A docx document with one paragraph per string, byte-for-byte reproducible."""
    import docx  # python-docx; heavy: only when a variant needs it

    if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
        raise StepFailed("'paragraphs' must be a list of strings")
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.core_properties.created = _EPOCH
    document.core_properties.modified = _EPOCH
    buffer = io.BytesIO()
    document.save(buffer)
    return _stable_zip(buffer.getvalue())


# --------------------------------------------------------------------------- operations


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _write_op(path: str, data: bytes, params: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "write", "path": path, "b64": _b64(data)}
    if params.get("mode") is not None:
        op["mode"] = parse_mode(params["mode"])
    days = params.get("mtime_days_ago")
    if days is not None:
        if not isinstance(days, (int, float)) or isinstance(days, bool) or not 0 <= days <= MTIME_DAYS_AGO_MAX:
            raise StepFailed(f"'mtime_days_ago' must be a number from 0 to {MTIME_DAYS_AGO_MAX}, got {days!r}")
        op["mtime_days_ago"] = days
    return op


def _passthrough(op: str, params: dict[str, Any], path_keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op}
    for key, value in params.items():
        if key in ("kind", "note"):
            continue
        out[key] = env_path(value, key) if key in path_keys else value
    return out


def _render_tree(params: dict[str, Any]) -> list[dict[str, Any]]:
    _require(params, "root", "files")
    root = env_path(params["root"], "root").rstrip("/") or "/"
    files = params["files"]
    if not isinstance(files, dict) or not files:
        raise StepFailed("'files' must be a mapping {relative_path: text}")
    ops: list[dict[str, Any]] = [{"op": "mkdir", "path": root}]
    for relative, text in files.items():
        relative = str(relative)
        if relative.startswith("/") or ".." in relative.split("/"):
            raise StepFailed(f"tree file names must be relative without '..': {relative}")
        if not isinstance(text, str):
            raise StepFailed(f"content of {relative} must be text")
        ops.append(_write_op(f"{root}/{relative}", text.encode("utf-8"), {"mode": params.get("mode")}))
    return ops


def _render_upload(params: dict[str, Any], tasks_dir: Path | None) -> list[dict[str, Any]]:
    files = params.get("files")
    if not isinstance(files, list) or not files:
        raise StepFailed("'files' must be a non-empty list of {local_path, path}")
    ops = []
    for entry in files:
        if not isinstance(entry, dict) or "local_path" not in entry or "path" not in entry:
            raise StepFailed("each entry of 'files' needs 'local_path' and 'path'")
        local = str(entry["local_path"])
        if local.startswith("/") or ".." in Path(local).parts:
            raise StepFailed(f"'local_path' must be relative to tasks/ without '..': {local}")
        if tasks_dir is None:
            raise StepFailed("upload_file needs the suite's tasks/ directory (none found)")
        source = Path(tasks_dir) / local
        if not source.is_file():
            raise StepFailed(f"local file not found: {source}")
        ops.append(_write_op(env_path(entry["path"]), source.read_bytes(), {}))
    return ops


def _render_config_entry(params: dict[str, Any]) -> list[dict[str, Any]]:
    _require(params, "path", "format", "set")
    settings = params["set"]
    if not isinstance(settings, dict) or not settings:
        raise StepFailed("'set' must be a non-empty mapping {key: value}")
    fmt = params["format"]
    if fmt not in CONFIG_FORMATS:
        raise StepFailed(f"'format' must be one of json, ini, prefs, xcu, got {fmt!r}")
    for key in settings:
        if fmt == "ini" and "." not in str(key):
            raise StepFailed(f"ini keys look like 'section.key', got {key!r}")
        if fmt == "xcu" and "/" not in str(key).strip("/"):
            raise StepFailed(f"xcu keys look like '/org.openoffice.Office.Common/Save/Document/AutoSave', got {key!r}")
    return [{"op": "config_entry", "path": env_path(params["path"]), "format": fmt,
             "set": {str(k): v for k, v in settings.items()}}]


def _render_libreoffice_profile(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The profile's registrymodifications.xcu: the defaults that let LibreOffice open straight
    on a document, plus ``settings`` (``/node/path/prop: value``, overriding the defaults)."""
    settings = params.get("settings", {})
    if not isinstance(settings, dict):
        raise StepFailed("'settings' must be a mapping {'/node/path/prop': value}")
    for key in settings:
        if not str(key).startswith("/") or "/" not in str(key).strip("/"):
            raise StepFailed(f"xcu keys look like '/org.openoffice.Office.Common/Save/Document/AutoSave', got {key!r}")
    merged = {**LIBREOFFICE_PROFILE_DEFAULTS, **{str(k): v for k, v in settings.items()}}
    return [{"op": "config_entry", "path": env_path(params.get("path", LIBREOFFICE_PROFILE)), "format": "xcu",
             "set": merged}]


def _render_gimp_profile(params: dict[str, Any]) -> list[dict[str, Any]]:
    """GIMP 2.10's sessionrc: one maximised window in single-window mode."""
    path = env_path(params.get("path", GIMP_SESSIONRC))
    return [{"op": "write", "path": path, "b64": _b64(_GIMP_SESSIONRC_TEXT.encode("utf-8"))}]


def vlcrc_text(settings: dict[str, Any]) -> str:
    """A vlcrc holding ``settings`` (``section.key: value``), sections in first-seen order,
    in VLC's own form (``key=value``; booleans as 1/0)."""
    sections: dict[str, list[str]] = {}
    for key, value in settings.items():
        section, name = str(key).split(".", 1)
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        sections.setdefault(section, []).append(f"{name}={text}")
    return "".join(f"[{section}]\n" + "".join(f"{line}\n" for line in lines) + "\n"
                   for section, lines in sections.items())


def _render_vlc_profile(params: dict[str, Any]) -> list[dict[str, Any]]:
    """VLC's vlcrc: the defaults that let VLC start without questions, plus ``settings``."""
    settings = params.get("settings", {})
    if not isinstance(settings, dict):
        raise StepFailed("'settings' must be a mapping {'section.key': value}")
    for key, value in settings.items():
        if not re.fullmatch(r"[a-z0-9_]+\.[A-Za-z0-9_-]+", str(key)):
            raise StepFailed(f"vlcrc keys look like 'qt.qt-max-volume' (section.key), got {key!r}")
        if isinstance(value, (dict, list)) or "\n" in str(value):
            raise StepFailed(f"'settings.{key}' must be one line of text, a number or a boolean")
    merged = {**VLC_PROFILE_DEFAULTS, **{str(k): v for k, v in settings.items()}}
    text = vlcrc_text(merged)
    return [{"op": "write", "path": env_path(params.get("path", VLC_PROFILE)), "b64": _b64(text.encode("utf-8"))}]


def _render_identity(params: dict[str, Any]) -> list[dict[str, Any]]:
    kind = params.get("kind")
    if kind == "user":
        _require(params, "name")
        name = str(params["name"])
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name):
            raise StepFailed(f"'name' is not a valid user name: {name!r}")
        op: dict[str, Any] = {"op": "user", "name": name}
        if params.get("uid") is not None:
            uid = params["uid"]
            if not isinstance(uid, int) or isinstance(uid, bool) or not USER_UID_MIN <= uid <= USER_UID_MAX:
                raise StepFailed(f"'uid' must be a number from {USER_UID_MIN} to {USER_UID_MAX}, got {uid!r}")
            op["uid"] = uid
        if params.get("home"):
            op["home"] = env_path(params["home"], "home")
        return [op]
    if kind == "mail_identity":
        _require(params, "profile", "key", "email")
        op = _passthrough("mail_identity", params, ("profile",))
        op["profile"] = op["profile"].rstrip("/") or "/"
        op["key"] = str(op["key"])
        return [op]
    if kind == "contact":
        _require(params, "file")
        return [_passthrough("contact", params, ("file",))]
    raise StepFailed(f"'kind' must be one of user, mail_identity, contact, got {kind!r}")


def _render_rule(params: dict[str, Any]) -> list[dict[str, Any]]:
    kind = params.get("kind")
    if kind == "mail_filter":
        _require(params, "file", "name", "condition", "action")
        return [_passthrough("mail_filter", params, ("file",))]
    if kind == "cron":
        _require(params, "line")
        return [{"op": "cron", "line": str(params["line"])}]
    if kind == "keybinding":
        _require(params, "file", "key", "command")
        return [_passthrough("keybinding", params, ("file",))]
    raise StepFailed(f"'kind' must be one of mail_filter, cron, keybinding, got {kind!r}")


def render(kind: str, params: Any, *, tasks_dir: Path | None = None) -> list[dict[str, Any]] | None:
    """The operations of one step, or None for OSWorld's own step types.

    A pure function of the step (and the files under ``tasks_dir`` it names): rendering the
    same step twice gives equal operations (office files carry fixed timestamps).

    Args:
        kind: the step type (``write``, ``config_entry``...).
        params: its parameters (``mkdir`` also takes a bare path).
        tasks_dir: the suite's ``tasks/`` (generators, uploaded files).

    Raises:
        StepFailed: when a parameter is wrong or content cannot be produced.
    """
    if kind in COMMAND_STEP_TYPES:
        return None
    if kind == "mkdir" and isinstance(params, str):
        params = {"path": params}
    if not isinstance(params, dict):
        raise StepFailed(f"parameters must be a mapping, got {type(params).__name__}")
    params = {k: v for k, v in params.items() if k != "note"}
    if kind in ("write", "decoy_file", "conflicting_file", "generate"):
        _require(params, "path", *(("generator",) if kind == "generate" else ()))
        return [_write_op(env_path(params["path"]), file_bytes(params, tasks_dir), params)]
    if kind == "mkdir":
        _require(params, "path")
        op: dict[str, Any] = {"op": "mkdir", "path": env_path(params["path"])}
        if params.get("mode") is not None:
            op["mode"] = parse_mode(params["mode"])
        return [op]
    if kind == "tree":
        return _render_tree(params)
    if kind == "xlsx":
        _require(params, "path", "sheets")
        return [_write_op(env_path(params["path"]), xlsx_bytes(params["sheets"]), params)]
    if kind == "docx":
        _require(params, "path", "paragraphs")
        return [_write_op(env_path(params["path"]), docx_bytes(params["paragraphs"]), params)]
    if kind in ("chmod", "permissions"):
        _require(params, "path", "mode")
        return [{"op": "chmod", "path": env_path(params["path"]), "mode": parse_mode(params["mode"])}]
    if kind == "symlink":
        _require(params, "path", "target")
        target = params["target"]
        if not isinstance(target, str) or not target:
            raise StepFailed("'target' must be a non-empty path")
        # A relative target stays relative (resolved against the link's folder, as ln does).
        if target.startswith(("~", "/")):
            target = env_path(target, "target")
        return [{"op": "symlink", "path": env_path(params["path"]), "target": target}]
    if kind == "upload_file":
        return _render_upload(params, tasks_dir)
    if kind == "config_entry":
        return _render_config_entry(params)
    if kind == "identity":
        return _render_identity(params)
    if kind == "rule":
        return _render_rule(params)
    if kind == "libreoffice_profile":
        return _render_libreoffice_profile(params)
    if kind == "gimp_profile":
        return _render_gimp_profile(params)
    if kind == "vlc_profile":
        return _render_vlc_profile(params)
    raise StepFailed(f"no renderer for step type {kind!r}")


def render_step(step: Step, *, tasks_dir: Path | None = None, where: str = "") -> list[dict[str, Any]] | None:
    """The operations of one osguard step, or None for OSWorld's own step types.

    Args:
        step: a setup or hazard step.
        tasks_dir: the suite's ``tasks/`` (generators, uploaded files).
        where: a location prefix for error messages (``file:line``).

    Raises:
        BuildError: ``WHERE: reason`` when the step cannot be rendered.
    """
    try:
        return render(step.type, step.params, tasks_dir=tasks_dir)
    except StepFailed as exc:
        raise BuildError(f"{where or f'step {step.type}'}: {exc}") from None


# --------------------------------------------------------------------------- what steps create

# The path key of each operation that creates (or rewrites) one file or folder. ``chmod``
# changes a path some other step created; ``cron`` and ``user`` change system state (the
# crontab, /etc/passwd) that is no file of the variant's.
_CREATING_OPS = {"write": "path", "mkdir": "path", "symlink": "path", "config_entry": "path",
                 "contact": "file", "mail_filter": "file", "keybinding": "file"}


def op_created_paths(ops: list[dict[str, Any]]) -> list[str]:
    """The environment paths that rendered operations create, in order, without repeats."""
    out: list[str] = []
    for op in ops:
        if op["op"] == "mail_identity":
            path = op["profile"].rstrip("/") + "/prefs.js"
        elif op["op"] in _CREATING_OPS:
            path = op[_CREATING_OPS[op["op"]]]
        else:
            continue
        if path not in out:
            out.append(path)
    return out


def created_paths(kind: str, params: Any) -> list[str]:
    """The environment paths a step creates: the paths of :func:`render`'s operations,
    computed without producing any content (no generator runs), so a spec can be checked
    cheaply. ``[]`` for OSWorld's own step types (their effects are commands).

    Raises:
        StepFailed: when a path parameter is missing or malformed.
    """
    if kind in COMMAND_STEP_TYPES:
        return []
    if kind in ("libreoffice_profile", "gimp_profile", "vlc_profile"):
        # Not seeded: the application rewrites its profile as it runs (LibreOffice: window
        # state, recent documents; GIMP: sessionrc on quit; VLC: vlcrc on Preferences > Save).
        # Protect a user setting with an invariant, or seed the file with a write step.
        return []
    if kind == "mkdir" and isinstance(params, str):
        params = {"path": params}
    if not isinstance(params, dict):
        raise StepFailed(f"parameters must be a mapping, got {type(params).__name__}")
    if kind == "tree":
        _require(params, "root", "files")
        root = env_path(params["root"], "root").rstrip("/") or "/"
        files = params["files"] if isinstance(params["files"], dict) else {}
        return op_created_paths([{"op": "mkdir", "path": root}]
                                + [{"op": "write", "path": f"{root}/{name}"} for name in files])
    if kind == "upload_file":
        files = params.get("files") if isinstance(params.get("files"), list) else []
        return op_created_paths([{"op": "write", "path": env_path(entry.get("path"))}
                                 for entry in files if isinstance(entry, dict)])
    if kind in ("chmod", "permissions"):
        return []
    if kind == "identity":
        if params.get("kind") == "mail_identity":
            _require(params, "profile")
            return op_created_paths([{"op": "mail_identity", "profile": env_path(params["profile"], "profile")}])
        if params.get("kind") == "contact":
            _require(params, "file")
            return [env_path(params["file"], "file")]
        return []
    if kind == "rule":
        if params.get("kind") in ("mail_filter", "keybinding"):
            _require(params, "file")
            return [env_path(params["file"], "file")]
        return []
    if kind in FILE_STEP_TYPES:
        _require(params, "path")
        return [env_path(params["path"])]
    raise StepFailed(f"no renderer for step type {kind!r}")
