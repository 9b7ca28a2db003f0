"""The invariant-kind interface and the helpers every kind shares.

A kind is a pure check: ``check(inv, baseline, final, traj) -> Verdict``. Kinds declare what
the probe must collect (``probe_request(params)``) and the JSON-Schema fragment of their
parameters. Kinds report violations as ``Evidence``; a check that cannot be decided raises
``CheckError`` internally and becomes ``Verdict(held=False, error=...)``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from osguard.invariants.types import Evidence, ProbeRequest, State, TrajectoryView, Verdict

if TYPE_CHECKING:
    from osguard.spec.model import InvariantSpec  # noqa: F401


class CheckError(Exception):
    """Raised inside a check when it cannot be decided (path not probed, state malformed)."""


# (params, baseline view, final view, trajectory) -> violations
CheckFunction = Callable[[dict[str, Any], "StateView", "StateView", TrajectoryView], list[Evidence]]


@dataclass(frozen=True)
class InvariantKind:
    """One registered invariant kind.

    Attributes:
        name: the ``kind:`` value in YAML.
        families: the hazard families (``osguard.spec.model.FAMILIES``) this kind serves.
        description: one paragraph for docs and ``--help``.
        params_schema: JSON-Schema fragment of the parameters (beside id/kind/family/description).
        request: params -> ProbeRequest (what the probe must collect).
        checker: the pure check (see ``CheckFunction``).
        needs_baseline: False when the check reads only the final state (then it may also be
            used as a success check without a baseline).
    """

    name: str
    families: tuple[str, ...]
    description: str
    params_schema: dict[str, Any]
    request: Callable[[dict[str, Any]], ProbeRequest]
    checker: CheckFunction
    needs_baseline: bool = True

    def probe_request(self, params: dict[str, Any]) -> ProbeRequest:
        """What the probe must collect for these parameters."""
        return self.request(params)

    def check(self, inv: "InvariantSpec", baseline: State | None, final: State | None,
              traj: TrajectoryView | None = None) -> Verdict:
        """Run the check; never raises (errors become ``held=False`` with ``error``)."""
        try:
            if final is None:
                raise CheckError("no final state (the probe did not run)")
            if baseline is None and self.needs_baseline:
                raise CheckError("no baseline state (the probe did not run before the episode)")
            final_view = StateView(final, "final")
            base_view = StateView(baseline, "baseline") if baseline is not None else final_view
            if baseline is not None and base_view.hash_algo != final_view.hash_algo:
                raise CheckError(f"baseline hashed with {base_view.hash_algo} but final with {final_view.hash_algo}")
            evidence = self.checker(dict(inv.params), base_view, final_view, traj or TrajectoryView())
        except CheckError as exc:
            return Verdict(inv.id, self.name, False, (), str(exc))
        except Exception as exc:  # a bug or malformed input must never count as held
            return Verdict(inv.id, self.name, False, (), f"check failed: {type(exc).__name__}: {exc}")
        return Verdict(inv.id, self.name, not evidence, tuple(evidence), None)


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def glob_base(pattern: str) -> str:
    """The longest leading directory of a glob with no wildcard in it (the root to probe)."""
    parts = pattern.split("/")
    kept: list[str] = []
    for part in parts:
        if is_glob(part):
            break
        kept.append(part)
    if len(kept) == len(parts):
        return pattern
    base = "/".join(kept)
    return base or "/"


def glob_matcher(patterns: Iterable[str], *, root: str | None = None) -> Callable[[str], bool]:
    """A predicate: does an absolute path, or its path relative to ``root``, match a glob?

    ``*`` also matches ``/`` (fnmatch semantics), so ``cache/*`` covers a whole subtree, and
    a plain path (absolute or relative) covers itself and everything under it. Patterns are
    compiled once: checks run this over every entry of a 10,000-file home.
    """
    import re

    regexes = []
    for pattern in patterns:
        plain = pattern.rstrip("/")
        regexes.append(re.compile(fnmatch.translate(pattern)))
        regexes.append(re.compile(re.escape(plain) + r"(?:/.*)?\Z", re.S))
    if not regexes:
        return lambda path: False
    prefix = root.rstrip("/") + "/" if root else None

    def matches(path: str) -> bool:
        relative = path[len(prefix):] if prefix and path.startswith(prefix) else None
        for regex in regexes:
            if regex.match(path) or (relative is not None and regex.match(relative)):
                return True
        return False

    return matches


def matches_any(path: str, patterns: Iterable[str], *, root: str | None = None) -> bool:
    """One-off form of ``glob_matcher``."""
    return glob_matcher(patterns, root=root)(path)


def parse_mode(value: Any) -> int:
    """``"0600"``, ``"600"`` or an int (YAML reads an unquoted 0600 as octal) to an int."""
    if isinstance(value, bool):
        raise CheckError(f"mode must be an octal string like \"0600\", got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 8)
        except ValueError:
            pass
    raise CheckError(f"mode must be an octal string like \"0600\", got {value!r}")


def fmt_mode(mode: int | None) -> str | None:
    return None if mode is None else f"{mode:04o}"


# -- typed comparisons ----------------------------------------------------------------------------
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
               list: "array", tuple: "array", dict: "object"}


def type_name(value: Any) -> str:
    """The JSON type word of a parsed value (``boolean`` is not ``integer``, ``integer`` is
    not ``number``)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def typed_equal(a: Any, b: Any) -> bool:
    """Equality that never crosses types: ``True != 1``, ``15 != 15.0``, ``"15" != 15``,
    recursively through lists and objects (Python's ``==`` says the first two are equal)."""
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(typed_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(typed_equal(x, y) for x, y in zip(a, b))
    return a == b


def typed_in(value: Any, items: Iterable[Any]) -> bool:
    """``value in items`` with ``typed_equal``."""
    return any(typed_equal(value, item) for item in items)


def type_change(old: Any, new: Any, where: str = "") -> str | None:
    """Where and how the types of two values first differ, e.g. ``"boolean -> integer"`` or
    ``"at /a/0: string -> number"``; None when every type matches (values may still differ).

    A LibreOffice setting (``{"value": ..., "type": "xs:int"}``) reports its ``oor:type``.
    """
    prefix = f"at {where}: " if where else ""
    if type_name(old) != type_name(new):
        return f"{prefix}{type_name(old)} -> {type_name(new)}"
    if isinstance(old, dict):
        if set(old) == {"value", "type"} == set(new) and old["type"] != new["type"]:
            return f"{prefix}oor:type {old['type'] or 'none'} -> {new['type'] or 'none'}"
        for key in old:
            if key in new:
                found = type_change(old[key], new[key], f"{where}/{key}")
                if found:
                    return found
    elif isinstance(old, (list, tuple)):
        for index, (x, y) in enumerate(zip(old, new)):
            found = type_change(x, y, f"{where}/{index}")
            if found:
                return found
    return None


def change_detail(what: str, old: Any, new: Any) -> str:
    """``"<what> changed"`` plus the type change when there is one (evidence detail)."""
    change = type_change(old, new)
    return f"{what} changed (type changed {change})" if change else f"{what} changed"


class StateView:
    """Read-only helpers over one State: ``~`` expansion, coverage, subtrees, configs."""

    def __init__(self, state: State, label: str):
        if not isinstance(state, dict) or not isinstance(state.get("files"), dict):
            raise CheckError(f"{label} state is malformed (no 'files' mapping)")
        self.state = state
        self.label = label
        self.home = state.get("home") or "/home/user"
        self.files: dict[str, dict[str, Any]] = state["files"]
        self.roots: dict[str, bool] = state.get("roots") or {}
        self.hash_algo = state.get("hash_algo")

    def expand(self, path: str) -> str:
        if path == "~":
            return self.home
        if path.startswith("~/"):
            return self.home.rstrip("/") + "/" + path[2:]
        return path.rstrip("/") or "/"

    def covered(self, path: str) -> bool:
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in self.roots)

    def entry(self, path: str) -> dict[str, Any] | None:
        """The manifest entry of an absolute path, None when absent.

        Raises:
            CheckError: when the path lies under no probed root (absence is then unknown).
        """
        if path in self.files:
            return self.files[path]
        if not self.covered(path):
            raise CheckError(f"{path} was not probed in the {self.label} state (under no probed root)")
        return None

    def subtree(self, root: str) -> dict[str, dict[str, Any]]:
        """Every entry at or under ``root`` (absolute)."""
        if not self.covered(root):
            raise CheckError(f"{root} was not probed in the {self.label} state (under no probed root)")
        prefix = root.rstrip("/") + "/"
        return {p: e for p, e in self.files.items() if p == root or p.startswith(prefix)}

    def config_status(self, path: str, fmt: str) -> tuple[Any, str | None]:
        """(parsed data, read status) of a config file; the status is None when it was read
        and parsed, else ``"missing"``, ``"unreadable: ..."``, ``"unparseable: ..."`` or
        ``"not a regular file: ..."`` (data is then None).

        Raises:
            CheckError: when it was not probed at all.
        """
        record = ((self.state.get("configs") or {}).get(path) or {}).get(fmt)
        if not isinstance(record, dict):
            raise CheckError(f"{path} was not read as {fmt} in the {self.label} state")
        error = record.get("error")
        return (None, str(error)) if error else (record.get("data"), None)

    def config(self, path: str, fmt: str) -> Any:
        """Parsed data of a config file; None when the file is missing.

        Raises:
            CheckError: when it was not probed, or could not be read or parsed.
        """
        data, error = self.config_status(path, fmt)
        if error == "missing":
            return None
        if error:
            raise CheckError(f"{path} in the {self.label} state: {error}")
        return data

    def command(self, command: str) -> dict[str, Any]:
        record = (self.state.get("commands") or {}).get(command)
        if record is None:
            raise CheckError(f"command {command!r} was not run by the {self.label} probe")
        return record


def merge_requests(requests: Iterable[ProbeRequest]) -> ProbeRequest:
    """Union of several requests, order kept, duplicates dropped; ``extra`` dicts are merged."""
    roots: list[str] = []
    configs: list[tuple[str, str]] = []
    tokens: list[str] = []
    commands: list[str] = []
    lines: list[str] = []
    git: list[str] = []
    watch: list[str] = []
    processes = clipboard = False
    extra: dict[str, Any] = {}
    for request in requests:
        for value, into in ((request.roots, roots), (request.configs, configs),
                            (request.tokens, tokens), (request.commands, commands),
                            (request.lines, lines), (request.git, git), (request.watch, watch)):
            for item in value:
                item = tuple(item) if isinstance(item, list) else item
                if item not in into:
                    into.append(item)
        processes = processes or request.processes
        clipboard = clipboard or request.clipboard
        for key, value in request.extra.items():
            if isinstance(value, list) and isinstance(extra.get(key), list):
                extra[key] = extra[key] + [v for v in value if v not in extra[key]]
            else:
                extra.setdefault(key, value)
    return ProbeRequest(roots=tuple(roots), configs=tuple(configs), tokens=tuple(tokens),
                        commands=tuple(commands), processes=processes, clipboard=clipboard, extra=extra,
                        lines=tuple(lines), git=tuple(git), watch=tuple(watch))
