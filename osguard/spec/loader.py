"""Loading variant specs: YAML → schema check → semantic checks → ``Variant``.

Every problem of every file is collected in one pass and reported as
``variants/x/y.yaml:LINE: $.json.path: message`` (``osguard.errors.Problem``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from osguard._registry import did_you_mean
from osguard.errors import Problem, SpecError
from osguard.spec.model import (
    ALTERNATIVE_OUTCOMES,
    SEEDED_INVARIANT_ID,
    SEEDED_KIND,
    Alternative,
    Base,
    Exemption,
    InvariantSpec,
    References,
    Step,
    SuccessSpec,
    UnsafeReference,
    Variant,
)
from osguard.spec.yamlread import JsonPath, YamlDoc, read_yaml

# ------------------------------------------------------------------------------ paths


def default_suite_dir() -> Path:
    """The default suite: ``./variants`` if it exists, else the repository's ``variants/``."""
    local = Path.cwd() / "variants"
    if local.is_dir():
        return local
    return Path(__file__).resolve().parents[2] / "variants"


def tasks_dir_for(spec_path: str | Path) -> Path | None:
    """The ``tasks/`` directory next to the ``variants/`` folder holding ``spec_path``.

    Generators and uploaded files named by a spec live there. None when the spec is not
    inside a ``variants/`` folder or there is no ``tasks/`` beside it.
    """
    path = Path(spec_path).resolve()
    for parent in path.parents:
        if parent.name == "variants":
            tasks = parent.parent / "tasks"
            return tasks if tasks.is_dir() else None
    return None


def display_path(path: Path) -> str:
    """``path`` relative to the current directory when below it (shorter messages)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def format_json_path(path: Iterable[str | int]) -> str:
    """``("invariants", 2, "paths")`` → ``$.invariants[2].paths``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


# ------------------------------------------------------------------------------ schema errors


def _validator() -> Any:
    """The schema validator: the shipped schema, or one built from the invariant registry
    when a plug-in registered kinds the shipped file does not know."""
    from osguard.invariants import KINDS

    return _validator_for(tuple(sorted(KINDS)))


@functools.lru_cache(maxsize=4)
def _validator_for(kinds: tuple[str, ...]) -> Any:
    from jsonschema import Draft202012Validator, FormatChecker

    from osguard.spec.paths import FORMAT_CHECKS
    from osguard.spec.schema import build_schema, schema

    checker = FormatChecker(formats=())
    for name, check in FORMAT_CHECKS.items():

        def _check(value: Any, _check: Any = check) -> bool:
            if not isinstance(value, str):
                return True
            message = _check(value)
            if message:
                raise ValueError(message)
            return True

        checker.checks(name, raises=ValueError)(_check)
    document = schema()
    if set(document["$defs"]["invariant"]["properties"]["kind"]["enum"]) != set(kinds):
        document = build_schema()
    return Draft202012Validator(document, format_checker=checker)


_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


# The JSON-Schema type of a parsed YAML value (bool before int: a bool is an int).
_PY_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
             (str, "string"), (list, "array"), (dict, "object"))


def _json_type(value: Any) -> str:
    for py_type, name in _PY_TYPES:
        if isinstance(value, py_type):
            return _TYPE_NAMES[name]
    return type(value).__name__


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_X_MESSAGE_VALIDATORS = {"type", "oneOf", "anyOf", "not", "pattern", "minProperties", "maxProperties", "minLength"}


def _schema_problems(error: Any) -> list[tuple[JsonPath, bool, str]]:
    """Turn one jsonschema error into (json path, point at key?, message) entries."""
    path: JsonPath = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    validator = error.validator
    instance = error.instance
    if validator == "additionalProperties" and isinstance(instance, dict):
        known = list(schema.get("properties", {}))
        allowed = [k for k in known if schema["properties"][k] != {"not": {}} and "not" not in schema["properties"][k]]
        what = schema.get("x-unknown", "key")
        out = []
        for key in instance:
            if key in known:
                continue
            hint = did_you_mean(key, allowed)
            if what == "action key":
                out.append((path + (key,), True, f"unknown action key {key!r}" + (
                    hint or ": an action is a string, {shell: CODE} or {pyautogui: CODE}; "
                    "quote a command that contains ': '")))
                continue
            if not hint and what == "key":
                hint = " (expected one of: " + ", ".join(allowed) + ")"
            elif not hint:
                hint = f" (known {what}s: " + ", ".join(allowed) + ")"
            out.append((path + (key,), True, f"unknown {what} {key!r}{hint}"))
        return out
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return [(path + (missing,), False, error.message)]
    if validator == "dependentRequired" and isinstance(instance, dict):
        return [(path + (key,), False, f"'{key}' goes only with " + " and ".join(f"'{n}'" for n in needs))
                for key, needs in error.validator_value.items() if key in instance and not all(n in instance for n in needs)]
    combinator = "oneOf" in schema or "anyOf" in schema
    if validator in ("oneOf", "anyOf") and not isinstance(instance, dict) and \
            all(set(b) == {"required"} for b in error.validator_value if isinstance(b, dict)):
        return []  # "needs one of these keys" means nothing for a non-mapping: its type error says it
    if "x-message" in schema and validator in _X_MESSAGE_VALIDATORS and not (validator == "type" and combinator):
        return [(path + ((schema["x-key"],) if "x-key" in schema else ()), False, schema["x-message"])]
    if validator == "type":
        expected = error.validator_value
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
        message = f"expected {wanted}, got {_json_type(instance)} ({_short(instance)})"
        if isinstance(instance, bool) and "string" in names:
            message += "; quote it: YAML reads yes/no/on/off/true/false as booleans"
        return [(path, False, message)]
    if validator == "enum":
        options = [str(o) for o in error.validator_value]
        what = schema.get("x-what")
        if isinstance(instance, str) and what:
            hint = did_you_mean(instance, options)
            return [(path, False, f"unknown {what} {instance!r}{hint or ' (expected one of: ' + ', '.join(options) + ')'}")]
        hint = did_you_mean(instance, options) if isinstance(instance, str) else ""
        return [(path, False, f"{_short(instance)} is not one of: {', '.join(options)}{hint}")]
    if validator == "format":
        return [(path, False, str(error.cause) if error.cause else error.message)]
    if validator == "minItems":
        n = error.validator_value
        return [(path, False, f"expected at least {n} item{'s' if n != 1 else ''}")]
    if validator == "minLength":
        n = error.validator_value
        return [(path, False, "must not be empty" if n == 1 else f"expected at least {n} characters")]
    if validator == "minimum":
        return [(path, False, f"expected a number >= {error.validator_value}, got {_short(instance)}")]
    if validator == "uniqueItems":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                return [(path, False, f"{_short(item)} is listed twice")]
            seen.append(item)
    if validator == "maxProperties":
        return [(path, False, f"expected at most {error.validator_value} key(s), got {len(instance)}")]
    if validator == "minProperties":
        return [(path, False, f"expected at least {error.validator_value} key(s)")]
    if validator in ("oneOf", "anyOf") and error.context:
        from jsonschema.exceptions import best_match

        # a branch of another type (a list where a mapping was given) says nothing useful:
        # judge the value by the branches of its own type, when there are any
        wrong_type = {e.relative_schema_path[0] for e in error.context
                      if e.validator == "type" and not e.relative_path and e.relative_schema_path}
        own = [e for e in error.context if e.relative_schema_path and e.relative_schema_path[0] not in wrong_type]
        if own and len({e.relative_schema_path[0] for e in own}) == 1:  # the one branch of its type: all it says
            return [problem for e in own for problem in _schema_problems(e)]
        return _schema_problems(best_match(own or error.context))
    return [(path, False, error.message)]


# ------------------------------------------------------------------------------ semantic checks


class _Collector:
    def __init__(self, file: str, doc: YamlDoc):
        self.file = file
        self.doc = doc
        self.problems: list[Problem] = []

    def add(self, path: JsonPath, message: str, *, key: bool = False) -> None:
        self.problems.append(Problem(self.file, self.doc.line_of(path, key=key), format_json_path(path), message))


def _iter_step_paths(data: dict[str, Any]) -> Iterable[tuple[JsonPath, str, dict[str, Any]]]:
    for section in ("setup", "hazards"):
        steps = data.get(section)
        if not isinstance(steps, list):
            continue
        for index, step in enumerate(steps):
            if isinstance(step, dict) and len(step) == 1:
                ((kind, params),) = step.items()
                if isinstance(params, str) and kind == "mkdir":
                    params = {"path": params}
                if isinstance(params, dict):
                    yield (section, index, kind), kind, params


def _semantic_checks(data: dict[str, Any], spec_path: Path, out: _Collector, osworld_root: Path | None) -> None:
    # ids unique within the variant, and references name existing invariants
    invariant_ids: dict[str, int] = {}
    invariants = data.get("invariants")
    if isinstance(invariants, list):
        for index, inv in enumerate(invariants):
            if isinstance(inv, dict) and isinstance(inv.get("id"), str):
                inv_id = inv["id"]
                if inv_id in invariant_ids:
                    first = out.doc.line_of(("invariants", invariant_ids[inv_id], "id"))
                    out.add(("invariants", index, "id"), f"duplicate invariant id {inv_id!r} (first on line {first})")
                else:
                    invariant_ids[inv_id] = index
    if SEEDED_INVARIANT_ID in invariant_ids:
        out.add(("invariants", invariant_ids[SEEDED_INVARIANT_ID], "id"),
                f"invariant id {SEEDED_INVARIANT_ID!r} is reserved for the implicit collateral invariant "
                "(everything setup and hazards create, minus targets and exempt): choose another id")
    known_ids = dict(invariant_ids)
    seeded = _raw_seeded_paths(data)
    if _kept_paths(seeded, data.get("targets"), data.get("exempt")):
        known_ids.setdefault(SEEDED_INVARIANT_ID, -1)

    def check_violates(violates: Any, where: JsonPath) -> None:
        if not (isinstance(violates, list) and isinstance(invariants, list)):
            return
        for index, name in enumerate(violates):
            if name == SEEDED_INVARIANT_ID and name not in known_ids:
                out.add(where + (index,), f"no invariant {name!r} in this variant: "
                        + ("the targets and exempt paths cover everything setup and hazards create" if seeded
                           else "setup and hazards create no files"))
            elif isinstance(name, str) and name not in known_ids:
                hint = did_you_mean(name, known_ids) or (
                    " (invariants: " + ", ".join(known_ids) + ")" if known_ids else ""
                )
                out.add(where + (index,), f"no invariant {name!r} in this variant{hint}")

    refs = data.get("references")
    unsafe = refs.get("unsafe") if isinstance(refs, dict) else None
    check_violates(unsafe.get("violates") if isinstance(unsafe, dict) else None, ("references", "unsafe", "violates"))

    # alternatives: unique names; violates only (and always) on unsafe ones, naming invariants
    alternatives = data.get("alternatives")
    names: dict[str, int] = {}
    for index, alt in enumerate(alternatives if isinstance(alternatives, list) else ()):
        if not isinstance(alt, dict):
            continue
        name, kind = alt.get("name"), alt.get("kind")
        if isinstance(name, str):
            if name in names:
                first = out.doc.line_of(("alternatives", names[name], "name"))
                out.add(("alternatives", index, "name"), f"duplicate alternative name {name!r} (first on line {first})")
            else:
                names[name] = index
        if kind == "unsafe" and "violates" not in alt:
            out.add(("alternatives", index), "an unsafe alternative needs 'violates': the invariant ids it breaks")
        if kind in ALTERNATIVE_OUTCOMES and kind != "unsafe":
            for key in ("violates", "sneaky"):
                if key in alt and (key == "violates" or alt[key] is True):
                    out.add(("alternatives", index, key), f"'{key}' is only for unsafe alternatives (this one is {kind})",
                            key=True)
        check_violates(alt.get("violates"), ("alternatives", index, "violates"))

    # an exempt path must name something setup or hazards create
    exempt = data.get("exempt")
    for index, item in enumerate(exempt if isinstance(exempt, list) else ()):
        path = item.get("path") if isinstance(item, dict) else None
        if isinstance(path, str) and not _kept_paths(seeded, [path], None, keep_matching=True):
            out.add(("exempt", index, "path"), f"{path!r} matches no path that setup or hazards create "
                    "(only seeded paths need an exemption)")

    # the file is <id>.yaml, in the folder of its family when inside a family folder
    from osguard.spec.model import FAMILIES
    from osguard.spec.schema import SLUG_PATTERN

    variant_id = data.get("id")
    if isinstance(variant_id, str) and spec_path.stem != variant_id and re.fullmatch(SLUG_PATTERN, variant_id):
        out.add(("id",), f"id {variant_id!r} differs from the file name {spec_path.name!r}: name the file {variant_id}.yaml")
    family = data.get("family")
    parent = spec_path.resolve().parent.name
    if isinstance(family, str) and family in FAMILIES and parent in FAMILIES and parent != family:
        out.add(("family",), f"family {family!r} but the file is in the {parent!r} folder: move it to {family}/")

    # writes under /etc or another user's home need requires.root
    requires = data.get("requires")
    root_ok = (isinstance(requires, dict) and requires.get("root") is True) or (
        isinstance(requires, list) and "root" in requires
    )
    from osguard.spec.paths import needs_root

    tasks_dir = tasks_dir_for(spec_path)
    for step_path, kind, params in _iter_step_paths(data):
        if not root_ok:
            for key in ("path", "root", "home"):
                value = params.get(key)
                if isinstance(value, str) and kind != "open" and needs_root(value):
                    out.add(step_path + (key,), f"writing {value!r} needs root: add 'requires: {{root: true}}'")
            if kind == "identity" and params.get("kind") == "user":
                out.add(step_path, "creating a user needs root: add 'requires: {root: true}'")
        if kind == "config_entry" and isinstance(params.get("set"), dict):
            shape = {"ini": (r"^[^.]+\..+$", "'section.key'"),
                     "xcu": (r"^/[^/]+(/[^/]+)+$", "'/org.openoffice.Office.Common/Save/Document/AutoSave'")}
            if params.get("format") in shape:
                pattern, example = shape[params["format"]]
                for key in params["set"]:
                    if not re.match(pattern, key):
                        out.add(step_path + ("set", key), f"{params['format']} keys look like {example}, got {key!r}",
                                key=True)
        encoded = params.get("base64")
        if isinstance(encoded, str):
            try:
                base64.b64decode(encoded.encode("ascii"), validate=True)
            except (binascii.Error, ValueError, UnicodeEncodeError):
                out.add(step_path + ("base64",), "not valid base64")
        if tasks_dir is not None:
            generator = params.get("generator")
            if isinstance(generator, str) and ":" in generator:
                module = generator.split(":", 1)[0]
                rel = Path(*module.split("."))
                if not ((tasks_dir / rel).with_suffix(".py").is_file() or (tasks_dir / rel / "__init__.py").is_file()):
                    out.add(step_path + ("generator",), f"no module {module!r} under {display_path(tasks_dir)}/ (expected {rel}.py)")
            files = params.get("files")
            if kind == "upload_file" and isinstance(files, list):
                for index, item in enumerate(files):
                    local = item.get("local_path") if isinstance(item, dict) else None
                    if isinstance(local, str) and not (tasks_dir / local).is_file():
                        out.add(step_path + ("files", index, "local_path"), f"no file {local!r} under {display_path(tasks_dir)}/")

    # success in OSWorld form needs a result getter unless it is 'infeasible'
    success = data.get("success")
    if isinstance(success, dict) and "kind" not in success and "func" in success:
        if success.get("func") not in ("infeasible", "config_value") and "result" not in success:
            out.add(("success", "result"), "'result' is a required property (unless func is 'infeasible')")
    _evaluation_checks(data, tasks_dir, out)

    # the instruction is the upstream one, exactly
    base = data.get("base")
    if osworld_root is not None and isinstance(base, dict):
        osworld_id, domain, instruction = base.get("osworld_id"), base.get("domain"), base.get("instruction")
        from osguard.spec.schema import UUID_PATTERN

        if (isinstance(osworld_id, str) and re.fullmatch(UUID_PATTERN, osworld_id)
                and isinstance(domain, str) and isinstance(instruction, str)):
            upstream_file = osworld_root / domain / f"{osworld_id}.json"
            if not upstream_file.is_file():
                elsewhere = sorted(osworld_root.glob(f"*/{osworld_id}.json"))
                if elsewhere:
                    out.add(("base", "domain"), f"task {osworld_id} is in domain {elsewhere[0].parent.name!r}, not {domain!r}")
                else:
                    out.add(("base", "osworld_id"), f"no OSWorld task {osworld_id} in {display_path(osworld_root)}")
            else:
                from osguard.spec.osworld import OSWorldDataError, _read_task

                try:
                    upstream = _read_task(upstream_file)["instruction"]
                except OSWorldDataError as exc:
                    out.add(("base", "osworld_id"), str(exc))
                else:
                    if upstream != instruction:
                        out.add(("base", "instruction"), f"differs from the upstream OSWorld instruction {upstream!r}")


def _evaluation_checks(data: dict[str, Any], tasks_dir: Path | None, out: _Collector) -> None:
    """What build and check would refuse: getters, metrics, options, bounds, generator args."""
    from osguard.spec.evaluation_checks import check_generators, check_merge_operations, check_success

    check_success(data, out, tasks_dir)
    check_generators(data, tasks_dir, out)
    check_merge_operations(data, out)


# ------------------------------------------------------------------------------ seeded paths


def _raw_seeded_paths(data: dict[str, Any]) -> list[str]:
    """What the (raw, maybe malformed) setup and hazard steps create; malformed steps are
    skipped (the schema reports them)."""
    from osguard.spec.render import StepFailed, created_paths

    out: list[str] = []
    for section in ("setup", "hazards"):
        steps = data.get(section)
        for step in steps if isinstance(steps, list) else ():
            if not (isinstance(step, dict) and len(step) == 1):
                continue
            ((kind, params),) = step.items()
            try:
                paths = created_paths(kind, params)
            except (StepFailed, TypeError, AttributeError):
                continue
            out.extend(p for p in paths if p not in out)
    return out


def seeded_paths(variant_steps: Iterable[Step]) -> list[str]:
    """The environment paths a variant's steps create (in order, without repeats), as
    :func:`osguard.spec.render.created_paths` derives them from the rendered file steps."""
    from osguard.spec.render import created_paths

    out: list[str] = []
    for step in variant_steps:
        out.extend(p for p in created_paths(step.type, step.params) if p not in out)
    return out


def _home_form(path: str) -> str:
    """``/home/user/x`` and ``~/x`` compare equal (the suite's environments' home)."""
    if path == "/home/user" or path.startswith("/home/user/"):
        return "~" + path[len("/home/user"):]
    return path


def _kept_paths(seeded: list[str], targets: Any, exempt: Any, *, keep_matching: bool = False) -> list[str]:
    """``seeded`` minus the paths a target or exempt pattern covers (a plain path covers
    itself and everything under it; globs follow fnmatch, ``*`` crossing ``/``). With
    ``keep_matching`` the covered ones instead."""
    from osguard.invariants.base import glob_matcher

    patterns = [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []
    if isinstance(exempt, list):
        patterns += [e["path"] for e in exempt if isinstance(e, dict) and isinstance(e.get("path"), str)]
    covered = glob_matcher([_home_form(p) for p in patterns])
    return [p for p in seeded if bool(covered(_home_form(p))) == keep_matching]


def _implicit_invariants(data: dict[str, Any], setup: tuple[Step, ...], hazards: tuple[Step, ...]) -> list[InvariantSpec]:
    """``seeded-preserved`` over what setup and hazards create, minus targets and exempt
    (none when nothing is left)."""
    kept = _kept_paths(seeded_paths(setup + hazards), data.get("targets"), data.get("exempt"))
    if not kept:
        return []
    return [InvariantSpec(id=SEEDED_INVARIANT_ID, kind=SEEDED_KIND, family=data["family"], params={"paths": kept},
                          description="everything setup and hazards created, except the targets and exempt "
                                      "paths, still exists unchanged (content, mode, owner)",
                          implicit=True)]


def _todo_paths(value: Any, path: JsonPath) -> Iterable[JsonPath]:
    """Where a scaffold's TODO markers are still in place."""
    if isinstance(value, str):
        if value.lstrip().startswith("TODO"):
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _todo_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _todo_paths(item, path + (index,))


# ------------------------------------------------------------------------------ building


def _step(item: dict[str, Any], line: int | None) -> Step:
    ((kind, params),) = item.items()
    if isinstance(params, str):  # `mkdir: PATH`
        params = {"path": params}
    return Step(type=kind, params=dict(params), line=line)


def _build(data: dict[str, Any], doc: YamlDoc, spec_path: Path, raw: bytes) -> Variant:
    import xxhash

    from osguard.actions import Action
    from osguard.providers.base import Requirements

    def actions(values: list[Any] | None) -> tuple[Action, ...]:
        return tuple(Action.parse(v) for v in values or ())

    requires_raw = data.get("requires", {})
    if isinstance(requires_raw, list):
        requires = Requirements(gui="gui" in requires_raw, root="root" in requires_raw)
    else:
        requires = Requirements(
            gui=bool(requires_raw.get("gui", False)),
            root=bool(requires_raw.get("root", False)),
            apps=tuple(requires_raw.get("apps", ())),
        )
    success_raw = dict(data["success"])
    note = success_raw.pop("note", "")
    if "kind" in success_raw:
        kind = success_raw.pop("kind")
        success = SuccessSpec(kind=kind, params=success_raw, note=note)
    else:
        success = SuccessSpec(osworld=success_raw, note=note)
    invariants = []
    for index, inv in enumerate(data["invariants"]):
        params = {k: v for k, v in inv.items() if k not in ("id", "kind", "family", "description")}
        invariants.append(
            InvariantSpec(
                id=inv["id"],
                kind=inv["kind"],
                family=inv["family"],
                params=params,
                description=inv.get("description", ""),
                line=doc.line_of(("invariants", index)),
            )
        )
    setup = tuple(_step(s, doc.line_of(("setup", i))) for i, s in enumerate(data.get("setup") or ()))
    hazards = tuple(_step(s, doc.line_of(("hazards", i))) for i, s in enumerate(data["hazards"]))
    invariants.extend(_implicit_invariants(data, setup, hazards))
    start = tuple(_step(s, doc.line_of(("start", i))) for i, s in enumerate(data.get("start") or ()))
    alternatives = tuple(
        Alternative(name=alt["name"], kind=alt["kind"], description=alt["description"],
                    actions=actions(alt["actions"]), violates=tuple(alt.get("violates", ())),
                    sneaky=bool(alt.get("sneaky", False)), line=doc.line_of(("alternatives", index)))
        for index, alt in enumerate(data.get("alternatives") or ())
    )
    refs = data["references"]
    unsafe = refs["unsafe"]
    base = data["base"]
    return Variant(
        id=data["id"],
        version=data["version"],
        base=Base(osworld_id=base["osworld_id"], domain=base["domain"], instruction=base["instruction"]),
        family=data["family"],
        description=data["description"],
        setup=setup,
        hazards=hazards,
        start=start,
        success=success,
        invariants=tuple(invariants),
        references=References(
            safe=actions(refs["safe"]),
            unsafe=UnsafeReference(actions=actions(unsafe["actions"]), violates=tuple(unsafe["violates"])),
            noop=actions(refs["noop"]) if "noop" in refs else None,
        ),
        requires=requires,
        tags=tuple(data.get("tags", ())),
        workdir=data.get("workdir", "~"),
        targets=tuple(data.get("targets", ())),
        exempt=tuple(Exemption(path=e["path"], reason=e["reason"]) for e in data.get("exempt", ())),
        alternatives=alternatives,
        source_path=str(spec_path),
        spec_hash=xxhash.xxh3_128_hexdigest(raw),
    )


def check_variant_file(path: str | Path, *, osworld_examples: Path | None = None) -> tuple[Variant | None, list[Problem]]:
    """Read and check one spec file; never raises for bad input.

    Args:
        path: the YAML file.
        osworld_examples: OSWorld's examples directory; when given, the instruction must
            equal the upstream one.

    Returns:
        ``(variant, [])`` when valid, else ``(None, problems)``.
    """
    spec_path = Path(path)
    file = display_path(spec_path)
    try:
        raw = spec_path.read_bytes()
    except OSError as exc:
        return None, [Problem(file, None, "$", f"cannot read: {exc.strerror or exc}")]
    doc = read_yaml(raw)
    out = _Collector(file, doc)
    for problem in doc.problems:
        out.problems.append(Problem(file, problem.line, format_json_path(problem.path), problem.message))
    if doc.data is None and doc.problems:
        return None, out.problems
    data = doc.data
    if not isinstance(data, dict):
        out.add((), f"expected a mapping with id, version, base, ... at the top, got {_json_type(data)}")
        return None, out.problems

    found: list[tuple[int | None, str, str]] = []
    read_paths = {format_json_path(p.path) for p in doc.problems}
    for error in _validator().iter_errors(data):
        for json_path, at_key, message in _schema_problems(error):
            entry = (out.doc.line_of(json_path, key=at_key), format_json_path(json_path), message)
            # a value the reader already rejected (bad tag, duplicate) needs no second message
            if entry not in found and entry[1] not in read_paths:
                found.append(entry)
    # "'family' is required" says nothing new next to "unknown key 'famly'; did you mean 'family'?"
    suggested = {
        (path_text.rsplit(".", 1)[0], match.group(1))
        for _, path_text, message in found
        if (match := re.search(r"^unknown key .*; did you mean '([^']+)'\?$", message))
    }
    for line, json_path_text, message in found:
        parent, _, name = json_path_text.rpartition(".")
        if message == f"'{name}' is a required property" and (parent, name) in suggested:
            continue
        out.problems.append(Problem(file, line, json_path_text, message))
    from osguard.spec.osworld import examples_root, resolve_examples_dir

    # given explicitly, or taken from $OSGUARD_OSWORLD_EXAMPLES
    osworld_root = examples_root(osworld_examples) if osworld_examples is not None else resolve_examples_dir(None)
    _semantic_checks(data, spec_path, out, osworld_root)
    flagged = {p.path for p in out.problems}
    for todo_path in _todo_paths(data, ()):
        if format_json_path(todo_path) not in flagged:
            out.add(todo_path, "unfinished: replace this TODO")
    if out.problems:
        out.problems.sort(key=lambda p: (p.line or 0, p.path))
        return None, out.problems
    from osguard.spec.render import StepFailed

    try:
        return _build(data, doc, spec_path, raw), []
    except (ValueError, StepFailed) as exc:  # Action.parse, created_paths; the schema should have caught it first
        return None, [Problem(file, None, "$", str(exc))]


def load_variant(path: str | Path, *, osworld_examples: Path | None = None) -> Variant:
    """Load one variant spec.

    Args:
        path: the YAML file.
        osworld_examples: OSWorld's examples directory (checks the instruction), optional.

    Raises:
        SpecError: with every problem found in the file.
    """
    variant, problems = check_variant_file(path, osworld_examples=osworld_examples)
    if problems or variant is None:
        raise SpecError(problems)
    return variant


def spec_files(paths: list[str | Path] | None = None) -> tuple[list[Path], list[Problem]]:
    """The ``*.yaml`` files named by ``paths`` (directories searched recursively, sorted)."""
    targets = [Path(p) for p in paths] if paths else [default_suite_dir()]
    files: list[Path] = []
    problems: list[Problem] = []
    for target in targets:
        if target.is_dir():
            found = sorted(p for p in target.rglob("*.yaml") if p.is_file())
            if not found:
                problems.append(Problem(display_path(target), None, "$", "no *.yaml variant specs in this directory"))
            files.extend(found)
        elif target.is_file():
            files.append(target)
        else:
            problems.append(Problem(display_path(target), None, "$", "no such file or directory"))
    unique: list[Path] = []
    seen: set[Path] = set()
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, problems


def validate_paths(
    paths: list[str | Path] | None = None, *, osworld_examples: Path | None = None
) -> tuple[list[Variant], list[Problem]]:
    """Check specs (default: the whole suite) and return the valid variants and all problems.

    Beyond each file's own checks, variant ids must be unique across the files checked.
    """
    files, problems = spec_files(paths)
    variants: list[Variant] = []
    first_seen: dict[str, Variant] = {}
    for path in files:
        variant, file_problems = check_variant_file(path, osworld_examples=osworld_examples)
        problems.extend(file_problems)
        if variant is None:
            continue
        other = first_seen.get(variant.id)
        if other is not None:
            line = _id_line(path)
            problems.append(
                Problem(display_path(path), line, "$.id",
                        f"duplicate variant id {variant.id!r} (also in {display_path(Path(other.source_path or ''))})")
            )
            continue
        first_seen[variant.id] = variant
        variants.append(variant)
    return variants, problems


def _id_line(path: Path) -> int | None:
    try:
        doc = read_yaml(path.read_bytes())
    except OSError:
        return None
    return doc.line_of(("id",))


def load_suite(paths: list[str | Path] | None = None, *, osworld_examples: Path | None = None) -> list[Variant]:
    """Load every variant under ``paths`` (None: the default suite directory).

    Raises:
        SpecError: with every problem of every file.
    """
    variants, problems = validate_paths(paths, osworld_examples=osworld_examples)
    if problems:
        raise SpecError(problems)
    return variants
