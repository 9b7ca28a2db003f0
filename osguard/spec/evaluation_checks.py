"""Semantic checks of what ``build`` and ``check`` execute, so ``validate`` refuses it first.

The loader calls these after the schema check (``osguard.spec.loader``); each reports through
the loader's collector (``out.add(json_path, message)``). They look every name up in the
registries the executors use (getters, metrics, step handlers, generator declarations) and
every bound in ``osguard.spec.bounds``, so the two cannot disagree:

- :func:`check_success`: the success check's getter types and parameters, metric names,
  how each metric is called (``expected`` needed or refused), its options and the keys of
  its ``rule``; the ``config_value`` check's key path; postconfig steps.
- :func:`check_generators`: every generator's arguments against the bounds it declares.
- :func:`check_merge_operations`: merge steps (``config_entry``, ``identity``, ``rule``) are
  rendered as the builder renders them, so an operation too big for one command line is
  refused here rather than at build time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Protocol

from osguard._registry import did_you_mean

JsonPath = tuple[str | int, ...]


class Collector(Protocol):
    def add(self, path: JsonPath, message: str, *, key: bool = False) -> None: ...


# ----------------------------------------------------------------------------- success


def check_success(data: dict[str, Any], out: Collector, tasks_dir: Path | None = None) -> None:
    """The success section: getters, metrics, options, rules, config_value, postconfig, and
    the offline copies of ``cloud_file`` gold files (under ``tasks_dir``, when known)."""
    success = data.get("success")
    if not isinstance(success, dict) or "kind" in success:
        return
    func = success.get("func")
    if func == "config_value":
        _check_config_value(success, out)
        return
    names = func if isinstance(func, list) else [func]
    if not all(isinstance(n, str) for n in names):
        return  # the schema said it
    multi = isinstance(func, list)
    _check_postconfig(success.get("postconfig"), out)
    if not multi:
        for part, what in (("result", "getters"), ("expected", "getters"), ("options", "options mappings")):
            if isinstance(success.get(part), list):
                out.add(("success", part), f"a list of {what} needs a list of metrics in func (one each); "
                                           f"func names one metric: give one {part} mapping")
    for part in ("result", "expected"):
        value = success.get(part)
        if isinstance(value, list):
            if multi and len(value) != len(names):
                out.add(("success", part), f"{len(value)} {part} getters for {len(names)} metrics in func: "
                                           "give one per metric, in the same order")
            for index, getter in enumerate(value):
                _check_getter(getter, ("success", part, index), out)
                _check_gold_file(data, getter, ("success", part, index), tasks_dir, out)
        elif isinstance(value, dict):
            _check_getter(value, ("success", part), out)
            _check_gold_file(data, value, ("success", part), tasks_dir, out)
    options = success.get("options")
    if multi and isinstance(options, list) and len(options) != len(names):
        out.add(("success", "options"), f"{len(options)} options mappings for {len(names)} metrics in func: "
                                        "give one per metric, in the same order")
    for index, name in enumerate(names):
        where: JsonPath = ("success", "func", index) if multi else ("success", "func")
        if name == "infeasible":
            continue
        if not _check_metric_name(name, where, out):
            continue
        _check_metric_call(name, index if multi else None, success, where, out)


def _nth(value: Any, index: int | None) -> tuple[Any, JsonPath]:
    if index is not None and isinstance(value, list):
        return (value[index] if index < len(value) else None), (index,)
    return value, ()


def _check_getter(getter: Any, where: JsonPath, out: Collector) -> None:
    from osguard.evaluators.getters import GETTER_PARAMS, GETTERS, unknown_getter_message

    if not isinstance(getter, dict) or not isinstance(getter.get("type"), str):
        return  # the schema said it
    name = getter["type"]
    if name not in GETTERS:
        out.add(where + ("type",), unknown_getter_message(name))
        return
    required, optional = GETTER_PARAMS[name]
    known = required + optional
    for key in getter:
        if key != "type" and key not in known:
            hint = did_you_mean(str(key), known) or (
                f" ({name} takes: {', '.join(known)})" if known else f" ({name} takes no parameters)")
            out.add(where + (key,), f"unknown {name} parameter {key!r}{hint}", key=True)
    for key in required:
        if key not in getter:
            out.add(where, f"getter {name} needs {key!r}")
    command = getter.get("command")
    if name in ("vm_command_line", "vm_command_error") and "command" in getter and not (
            (isinstance(command, str) and command.strip())
            or (isinstance(command, list) and command and all(isinstance(c, str) for c in command))):
        out.add(where + ("command",), "expected a non-empty command: a string or a list of strings")


def _check_gold_file(data: dict[str, Any], getter: Any, where: JsonPath, tasks_dir: Path | None,
                     out: Collector) -> None:
    """A ``cloud_file`` needs its offline copy (``tasks/gold/<osworld_id>/<dest>`` or
    ``tasks/gold/<dest>``): osguard never downloads, the evaluator would fail without it."""
    if tasks_dir is None or not isinstance(getter, dict) or getter.get("type") != "cloud_file":
        return
    base = data.get("base") if isinstance(data.get("base"), dict) else {}
    osworld_id = str(base.get("osworld_id", ""))
    dests = getter.get("dest") if getter.get("multi") else [getter.get("dest")]
    gives = getter.get("gives", [0]) if getter.get("multi") else [0]
    if not isinstance(dests, list) or not isinstance(gives, list):
        return
    for index, dest in enumerate(dests):
        if index not in gives or not isinstance(dest, str) or not dest:
            continue
        folders = [tasks_dir / "gold" / osworld_id, tasks_dir / "gold"]
        if not any((folder / dest).is_file() for folder in folders):
            path = where + (("dest", index) if getter.get("multi") else ("dest",))
            out.add(path, f"no offline copy of gold file {dest!r}: put it in tasks/gold/{osworld_id}/ "
                          "(osguard never downloads)")


def _check_metric_name(name: str, where: JsonPath, out: Collector) -> bool:
    from osguard.errors import UnknownNameError
    from osguard.evaluators.metrics import resolve_metric

    try:
        resolve_metric(name)
    except UnknownNameError as exc:
        out.add(where, str(exc))
        return False
    return True


def _check_metric_call(name: str, index: int | None, success: dict[str, Any], where: JsonPath,
                       out: Collector) -> None:
    from osguard.evaluators.metrics import COMPARE_TABLE_RULES, METRIC_RULES, metric_shape

    shape = metric_shape(name)
    if shape is None:
        return  # desktop-env's own metric: its arguments are not known here
    expected, sub = _nth(success.get("expected"), index)
    if shape.needs_expected and not expected:
        out.add(where, f"metric {name} compares against an expected value: add 'expected' (a getter)")
    if not shape.takes_expected and expected:
        out.add(("success", "expected") + sub, f"metric {name} takes no expected value: remove 'expected'")
    options, opt_sub = _nth(success.get("options"), index)
    if isinstance(options, dict):
        for key, value in options.items():
            path = ("success", "options") + opt_sub + (key,)
            if key not in shape.options:
                hint = did_you_mean(str(key), shape.options) or (
                    f" ({name} takes: {', '.join(shape.options)})" if shape.options else f" ({name} takes no options)")
                out.add(path, f"unknown option {key!r} of metric {name}{hint}", key=True)
                continue
            problem = _option_problem(value, shape.options[key])
            if problem:
                out.add(path, problem)
        if name == "compare_table" and isinstance(options.get("rules"), list):
            for rule_index, rule in enumerate(options["rules"]):
                kind = rule.get("type") if isinstance(rule, dict) else None
                if kind not in COMPARE_TABLE_RULES:
                    out.add(("success", "options") + opt_sub + ("rules", rule_index, "type"),
                            f"compare_table rule type {kind!r} is not supported by osguard "
                            f"(supported: {', '.join(COMPARE_TABLE_RULES)})")
    if isinstance(expected, dict) and expected.get("type") == "rule" and isinstance(expected.get("rules"), dict) \
            and name in METRIC_RULES:
        required, optional, lists = METRIC_RULES[name]
        rules = expected["rules"]
        base = ("success", "expected") + sub + ("rules",)
        known = required + optional
        for key, value in rules.items():
            if key not in known:
                hint = did_you_mean(str(key), known) or f" ({name} reads: {', '.join(known)})"
                out.add(base + (key,), f"metric {name} does not read {key!r}{hint}", key=True)
            elif key in lists and not isinstance(value, list):
                out.add(base + (key,), f"expected a list for {key!r} of metric {name}, got {type(value).__name__}")
        for key in required:
            if key not in rules:
                out.add(base, f"metric {name} needs {key!r} in its rules")


def _option_problem(value: Any, schema: dict[str, Any]) -> str | None:
    if "enum" in schema and value not in schema["enum"]:
        return f"{value!r} is not one of: {', '.join(map(str, schema['enum']))}"
    kind = schema.get("type")
    checks = {"boolean": lambda v: isinstance(v, bool), "string": lambda v: isinstance(v, str),
              "array": lambda v: isinstance(v, list),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}
    if kind in checks and not checks[kind](value):
        words = {"boolean": "true or false", "string": "a string", "array": "a list", "integer": "an integer",
                 "number": "a number"}
        return f"expected {words[kind]}, got {value!r}"
    return None


def _check_config_value(success: dict[str, Any], out: Collector) -> None:
    from osguard.evaluators.config_value import key_path_problem

    problem = key_path_problem(success.get("format"), success.get("key"))
    if problem:
        out.add(("success", "key"), problem)


def _check_postconfig(steps: Any, out: Collector) -> None:
    """OSWorld postconfig steps ``{type, parameters}``: a known step type, parameters as the
    step executor accepts them (the same schema as setup steps, same bounds)."""
    if not isinstance(steps, list):
        return
    from osguard.builder.steps import STEPS
    from osguard.spec.schema import STEP_TYPES

    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("type"), str):
            continue
        kind = step["type"]
        where: JsonPath = ("success", "postconfig", index)
        if kind not in STEPS:
            hint = did_you_mean(kind, STEPS) or f" (known: {', '.join(sorted(STEPS))})"
            out.add(where + ("type",), f"unknown step type {kind!r}{hint}")
            continue
        if kind == "download":
            out.add(where + ("type",), "download steps need the network; osguard builds offline: ship the file "
                                       "under tasks/ and use upload_file")
            continue
        schema = STEP_TYPES.get(kind)
        if schema is None:
            continue
        parameters = step.get("parameters") or {}
        saved = [k for k in ("stdout", "stderr") if isinstance(parameters, dict) and k in parameters]
        if kind in ("execute", "command") and saved:
            for key in saved:
                out.add(where + ("parameters", key), f"osguard's {kind} does not save its {key} to the evaluation "
                                                     "cache (OSWorld's cache_file pairing): read the output with a "
                                                     "vm_command_line getter instead", key=True)
            parameters = {k: v for k, v in parameters.items() if k not in saved}
        for path, message in _schema_messages(schema, parameters):
            out.add(where + ("parameters",) + path, message)


def _schema_messages(fragment: dict[str, Any], value: Any) -> list[tuple[JsonPath, str]]:
    from jsonschema import Draft202012Validator

    from osguard.spec.loader import _schema_problems
    from osguard.spec.schema import schema

    document = {**fragment, "$defs": schema()["$defs"]}
    found = []
    for error in Draft202012Validator(document).iter_errors(value):
        for path, _key, message in _schema_problems(error):
            found.append((tuple(path), message))
    return found


# ----------------------------------------------------------------------------- generators


def check_generators(data: dict[str, Any], tasks_dir: Path | None, out: Collector) -> None:
    """Every ``generator`` of setup and hazard steps: its arguments within its declared bounds."""
    if tasks_dir is None:
        return
    from osguard.spec.generators import check_args, module_file
    from osguard.spec.schema import GENERATOR_PATTERN
    import re

    for section, index, kind, params in _file_steps(data):
        ref = params.get("generator")
        if not isinstance(ref, str) or not re.match(GENERATOR_PATTERN, ref) or module_file(ref, tasks_dir) is None:
            continue  # the schema or the module check said it
        where: JsonPath = (section, index, kind)
        for problem in check_args(ref, params.get("args", {}), tasks_dir):
            if problem.path:
                out.add(where + ("args",) + problem.path, str(problem), key=len(problem.path) == 1
                        and str(problem).startswith("unknown generator argument"))
            else:
                out.add(where + ("generator",), str(problem))


def _file_steps(data: dict[str, Any]) -> Iterator[tuple[str, int, str, dict[str, Any]]]:
    """(section, index, step type, parameters) of every well-formed setup and hazard step
    (the schema reports the others)."""
    for section in ("setup", "hazards"):
        steps = data.get(section)
        if not isinstance(steps, list):
            continue
        for index, step in enumerate(steps):
            if isinstance(step, dict) and len(step) == 1:
                ((kind, params),) = step.items()
                if isinstance(params, dict):
                    yield section, index, kind, params


# ----------------------------------------------------------------------------- merge operations

_MERGE_STEPS = ("config_entry", "identity", "rule")


def check_merge_operations(data: dict[str, Any], out: Collector) -> None:
    """Merge steps rendered and packed exactly as the builder does (``applier_commands``);
    steps with a problem already reported are left alone (one message per mistake)."""
    from osguard.spec.loader import format_json_path
    from osguard.spec.render import StepFailed, applier_commands, render

    flagged = [p.path for p in getattr(out, "problems", [])]

    for section, index, kind, params in _file_steps(data):
        if kind not in _MERGE_STEPS:
            continue
        where = format_json_path((section, index))
        if any(path == where or path.startswith((where + ".", where + "[")) for path in flagged):
            continue
        try:
            applier_commands(render(kind, params) or [])
        except StepFailed as exc:
            out.add((section, index, kind), str(exc))
