"""Generators under ``tasks/``: their declared argument bounds, and running them with limits.

A generator is a function ``f(**args) -> bytes`` in ``tasks/<module>.py``. Its module
declares the arguments each function accepts, with bounds, as a literal at module level::

    ARGS = {"ipynb": {"title": {"type": "string", "maxLength": 200},
                      "cells": {"type": "integer", "minimum": 0, "maximum": 1000}}}

(JSON-Schema fragments, one per argument). ``osguard validate`` reads it from the source
without importing the module (:func:`declared_args`) and checks every ``args`` of a spec
against it; ``build`` checks the same before it runs the generator, so both refuse the same
specs with the same message.

Generators are suite code running on the host, so they never run in osguard's process:
:func:`run_generator` starts a child Python with limits on CPU time, memory and output size
and a wall-clock timeout (``osguard.spec.bounds``); past any of them the child is killed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osguard._registry import did_you_mean
from osguard.spec import bounds

JsonPath = tuple[str | int, ...]


class GeneratorRefused(Exception):
    """A generator reference or its arguments are refused; ``path`` is where, below ``args``
    (empty for the generator itself)."""

    def __init__(self, message: str, path: JsonPath = ()) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class GeneratorLimits:
    """What a generator's child process may use (defaults: ``osguard.spec.bounds``)."""

    cpu_seconds: int = bounds.GENERATOR_CPU_SECONDS
    wall_seconds: float = bounds.GENERATOR_WALL_SECONDS
    memory_bytes: int = bounds.GENERATOR_MEMORY_BYTES
    output_bytes: int = bounds.GENERATOR_OUTPUT_BYTES


# ----------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class Declaration:
    """What a generator module's source says about one function."""

    function: str
    required: tuple[str, ...]  # parameters without a default
    parameters: tuple[str, ...]
    args: dict[str, Any] | None  # ARGS[function], None when not declared


def module_file(ref: str, tasks_dir: Path) -> Path | None:
    """The source file of ``module.path:function`` under ``tasks_dir`` (None when missing)."""
    module = ref.split(":", 1)[0]
    base = Path(tasks_dir).joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_Signatures = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


@functools.lru_cache(maxsize=64)
def _parse(path: str, mtime_ns: int, size: int) -> tuple[_Signatures, Any, str | None]:
    """(functions: name -> (required, parameters), ARGS literal or None, error)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    except (OSError, SyntaxError, ValueError) as exc:
        return {}, None, f"cannot read {path}: {exc}"
    functions: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    declared: Any = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            positional = [p.arg for p in a.posonlyargs + a.args]
            first_default = len(positional) - len(a.defaults)
            required = positional[:first_default] + [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
            # a **kwargs function takes what ARGS declares for it ("**" marks it)
            extra = ["**"] if a.kwarg is not None else []
            functions[node.name] = (tuple(required), tuple(positional + [k.arg for k in a.kwonlyargs] + extra))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ARGS" for t in targets) and node.value is not None:
                try:
                    declared = ast.literal_eval(node.value)
                except ValueError:
                    return functions, None, f"{path}: ARGS must be a literal mapping (no names or calls)"
    return functions, declared, None


def declaration(ref: str, tasks_dir: Path) -> Declaration:
    """Read ``module:function``'s parameters and declared argument bounds from its source.

    Raises:
        GeneratorRefused: when the module or the function does not exist, or ARGS is malformed.
    """
    module, function = ref.split(":", 1)
    path = module_file(ref, tasks_dir)
    if path is None:
        raise GeneratorRefused(f"generator module {module!r} not found: expected "
                               f"{Path(tasks_dir).joinpath(*module.split('.')).with_suffix('.py')}")
    stat = path.stat()
    functions, declared, error = _parse(str(path), stat.st_mtime_ns, stat.st_size)
    if error:
        raise GeneratorRefused(error)
    if function not in functions:
        public = [name for name in functions if not name.startswith("_")]
        raise GeneratorRefused(f"generator module {module!r} has no function {function!r}"
                               f"{did_you_mean(function, public)}")
    if declared is not None and not (isinstance(declared, dict)
                                     and all(isinstance(v, dict) for v in declared.values())):
        raise GeneratorRefused(f"{path}: ARGS must map each function name to {{argument: schema}}")
    required, parameters = functions[function]
    args = None if declared is None else declared.get(function)
    if "**" in parameters:
        parameters = tuple(p for p in parameters if p != "**") + tuple(k for k in (args or {}) if k not in parameters)
    return Declaration(function, required, parameters, args)


def check_args(ref: str, args: Any, tasks_dir: Path) -> list[GeneratorRefused]:
    """Every problem of ``args`` for generator ``ref`` (empty when it may run).

    A generator must declare bounds for each argument it takes (``ARGS`` in its module);
    arguments are checked against them, unknown and missing ones reported.
    """
    try:
        decl = declaration(ref, tasks_dir)
    except GeneratorRefused as exc:
        return [exc]
    if not isinstance(args, dict):
        return [GeneratorRefused("'args' must be a mapping")]
    if decl.args is None:
        module = ref.split(":", 1)[0]
        return [GeneratorRefused(f"generator {ref!r} declares no argument bounds: add "
                                 f"ARGS = {{{decl.function!r}: {{argument: schema, ...}}}} to "
                                 f"{module.replace('.', '/')}.py (see docs/authoring.md)")]
    problems: list[GeneratorRefused] = []
    undeclared = [p for p in decl.parameters if p not in decl.args]
    if undeclared:
        problems.append(GeneratorRefused(f"generator {ref!r} declares no bounds for its argument(s) "
                                         f"{', '.join(undeclared)} (ARGS[{decl.function!r}])"))
    for name in args:
        if name not in decl.parameters:
            takes = ", ".join(decl.parameters) or "nothing"
            hint = did_you_mean(str(name), decl.parameters) or f" ({ref} takes: {takes})"
            problems.append(GeneratorRefused(f"unknown generator argument {name!r}{hint}", (name,)))
    for name in decl.required:
        if name not in args:
            problems.append(GeneratorRefused(f"generator {ref!r} needs the argument {name!r}"))
    from jsonschema import Draft202012Validator

    for name, value in args.items():
        schema = decl.args.get(name)
        if name not in decl.parameters or not isinstance(schema, dict):
            continue
        for error in sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path)):
            problems.append(GeneratorRefused(_bound_message(error, ref), (name, *error.absolute_path)))
    return problems


def _bound_message(error: Any, ref: str) -> str:
    value = error.instance
    limit = error.validator_value
    short = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    messages = {
        "maximum": f"{short} is above the maximum of {limit}",
        "minimum": f"{short} is below the minimum of {limit}",
        "maxLength": f"a text of {len(value) if isinstance(value, str) else '?'} characters is longer than {limit}",
        "maxItems": f"{len(value) if isinstance(value, list) else '?'} items are more than {limit}",
        "maxProperties": f"{len(value) if isinstance(value, dict) else '?'} entries are more than {limit}",
        "type": f"expected {limit}, got {type(value).__name__} ({short})",
        "enum": f"{short} is not one of: {', '.join(map(str, limit)) if isinstance(limit, list) else limit}",
    }
    return f"{messages.get(error.validator, error.message)} ({ref} bounds its arguments: ARGS)"


# ----------------------------------------------------------------------------- running

# The child: limits first, then the suite's code. Reads {"tasks", "ref", "args"} as JSON on
# stdin, writes the bytes to stdout (a file capped by RLIMIT_FSIZE), a reason on stderr.
# Exit status: 2 the generator raised, 3 it returned no bytes, 4 its output is too big.
_CHILD = r"""
import json, resource, sys
cpu, memory, output = (int(x) for x in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
import os
request = json.load(sys.stdin)
# the generator's own prints go nowhere: stdout carries its bytes, stderr the reason
result, reason = os.fdopen(os.dup(1), "wb"), os.fdopen(os.dup(2), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
sys.path.insert(0, request["tasks"])
module_name, function_name = request["ref"].split(":")
try:
    import importlib
    function = getattr(importlib.import_module(module_name), function_name)
    data = function(**request["args"])
except BaseException as exc:
    reason.write(f"{type(exc).__name__}: {exc}"[:2000])
    reason.flush()
    os._exit(2)
if isinstance(data, str):
    data = data.encode("utf-8")
if not isinstance(data, (bytes, bytearray)):
    reason.write(f"returned {type(data).__name__}, expected bytes")
    reason.flush()
    os._exit(3)
if len(data) > output:
    os._exit(4)
try:
    result.write(data)
    result.flush()
except OSError:  # EFBIG: Python ignores SIGXFSZ, the write fails instead
    os._exit(4)
os._exit(0)
"""


def _tree_digest(tasks_dir: Path, module: str) -> str:
    """A digest of the generator's package sources (an edit changes every cached result)."""
    top = Path(tasks_dir) / module.split(".")[0]
    files = sorted(top.rglob("*.py")) if top.is_dir() else [top.with_suffix(".py")]
    digest = hashlib.sha256()
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        digest.update(f"{file}:{stat.st_mtime_ns}:{stat.st_size};".encode())
    return digest.hexdigest()


_CACHE: dict[tuple[str, ...], bytes] = {}
_CACHE_LOCK = threading.Lock()  # builds run in threads (`osguard check -w N`)
_CACHE_ITEM_MAX = 1024 * 1024
_CACHE_ENTRIES = 256


def run_generator(ref: str, args: Any, tasks_dir: Path | None, *, limits: GeneratorLimits | None = None) -> bytes:
    """Check ``args`` against the generator's declared bounds, then run it in a limited child.

    Generators are deterministic, so a result is remembered (per package source state) and
    a rebuild does not start another child.

    Raises:
        GeneratorRefused: when the arguments are refused, the generator fails, or a limit
            kills it (the message says which).
    """
    if tasks_dir is None:
        raise GeneratorRefused(f"generator {ref!r} needs the suite's tasks/ directory (none found)")
    problems = check_args(ref, args, Path(tasks_dir))
    if problems:
        first = problems[0]
        where = "args." + ".".join(map(str, first.path)) + ": " if first.path else ""
        raise GeneratorRefused(f"{where}{first}", first.path)
    limits = limits or GeneratorLimits()
    key = (str(Path(tasks_dir).resolve()), ref, json.dumps(args, sort_keys=True, default=str),
           _tree_digest(Path(tasks_dir), ref.split(":")[0]), repr(limits))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    data = _run_child(ref, args, Path(tasks_dir), limits)
    if len(data) <= _CACHE_ITEM_MAX:
        with _CACHE_LOCK:
            if len(_CACHE) >= _CACHE_ENTRIES:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = data
    return data


def _run_child(ref: str, args: dict[str, Any], tasks_dir: Path, limits: GeneratorLimits) -> bytes:
    try:
        request = json.dumps({"tasks": str(tasks_dir.resolve()), "ref": ref, "args": args})
    except (TypeError, ValueError) as exc:
        raise GeneratorRefused(f"generator {ref!r}: its arguments must be plain data "
                               f"(text, numbers, true/false, lists, mappings): {exc}") from None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # -I: no user site, no PYTHON* variables, no current directory on sys.path
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _CHILD, str(limits.cpu_seconds), str(limits.memory_bytes),
             str(limits.output_bytes)],
            stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=str(tasks_dir), start_new_session=True,
            # one BLAS thread: thread stacks count against the memory limit
            env={"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
                 "OMP_NUM_THREADS": "1"},
        )
        try:
            proc.communicate(request.encode("utf-8"), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise GeneratorRefused(f"generator {ref!r} was stopped: still running after "
                                   f"{limits.wall_seconds:g} s (limit)") from None
        finally:
            _kill_group(proc)  # whatever it started goes with it
        out.seek(0)
        data = out.read(limits.output_bytes + 1)
        err.seek(0)
        reason = err.read(4000).decode("utf-8", "replace").strip()
    code = proc.returncode
    if code == -signal.SIGXCPU or code == -signal.SIGKILL and not reason:
        raise GeneratorRefused(f"generator {ref!r} was killed: it used more than {limits.cpu_seconds} s "
                               "of CPU time (limit)")
    if code in (4, -signal.SIGXFSZ) or len(data) > limits.output_bytes:
        raise GeneratorRefused(f"generator {ref!r} was killed: its output exceeds {limits.output_bytes} bytes (limit)")
    if code == 2 and reason.startswith("MemoryError"):
        raise GeneratorRefused(f"generator {ref!r} was stopped: it needed more than {limits.memory_bytes} bytes "
                               "of memory (limit)")
    if code == 2:
        raise GeneratorRefused(f"generator {ref!r} failed: {reason}")
    if code == 3:
        raise GeneratorRefused(f"generator {ref!r} {reason}")
    if code != 0:
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        raise GeneratorRefused(f"generator {ref!r} died ({how}){': ' + reason[-400:] if reason else ''}")
    return data


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
