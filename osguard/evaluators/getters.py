"""OSWorld's state getters (``result``/``expected`` of an evaluator), under their names.

A getter is ``(ctx, config) -> value``: ``config`` is the ``{type: NAME, ...}`` mapping of the
task JSON, ``ctx`` carries the environment and a cache directory where fetched files land
(OSWorld's metrics take local file paths). Like upstream, a file that does not exist gives
``None`` (the metric then scores 0); a dead environment raises and becomes ``env_error``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from osguard._registry import did_you_mean
from osguard.errors import OsguardError, UnknownNameError

if TYPE_CHECKING:
    from osguard.providers.base import Environment


@dataclass(frozen=True)
class GetterContext:
    """What getters may use.

    Attributes:
        env: the environment after the episode.
        cache_dir: a host directory for fetched files (OSWorld's ``env.cache_dir``).
        gold_dirs: host directories holding offline copies of ``cloud_file`` gold files,
            searched in order for ``<dest>`` (osguard never downloads).
    """

    env: "Environment"
    cache_dir: Path
    gold_dirs: tuple[Path, ...] = ()


class GoldFileMissing(OsguardError):
    """Raised when a ``cloud_file`` getter names a gold file with no offline copy."""


Getter = Callable[[GetterContext, dict[str, Any]], Any]


def _cache_path(ctx: GetterContext, dest: str) -> Path:
    # ``dest`` comes from the spec; keep it inside the cache dir whatever it says.
    name = Path(str(dest)).name or "file"
    return ctx.cache_dir / name


def _fetch(ctx: GetterContext, path: str, dest: str) -> str | None:
    try:
        data = ctx.env.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    local = _cache_path(ctx, dest)
    local.write_bytes(data)
    return str(local)


def get_vm_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: vm_file, path, dest, multi?, gives?}``: fetch file(s) into the cache.

    Returns the local path (None when the file does not exist); with ``multi`` the paths at
    the ``gives`` indices (a single path when ``gives`` has one index), as upstream.
    """
    if not config.get("multi"):
        return _fetch(ctx, config["path"], config.get("dest") or os.path.basename(config["path"]))
    paths = list(config["path"])
    dests = list(config.get("dest") or [os.path.basename(p) for p in paths])
    fetched = [_fetch(ctx, p, d) for p, d in zip(paths, dests)]
    gives = config.get("gives", [0])
    chosen = [fetched[i] for i in gives]
    return chosen[0] if len(chosen) == 1 else chosen


def get_cloud_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: cloud_file, path: URL, dest, multi?, gives?}``: a gold file, offline.

    Upstream downloads ``path`` into ``cache_dir/dest`` unless that file exists; osguard
    has no network, so ``dest`` must already be in the cache or in a gold directory
    (``tasks/gold/<osworld_id>/<dest>`` of the variant's suite).

    Raises:
        GoldFileMissing: when no offline copy exists.
    """
    paths = list(config["path"]) if config.get("multi") else [config["path"]]
    dests = list(config["dest"]) if config.get("multi") else [config["dest"]]
    gives = config.get("gives", [0])
    found: list[str] = []
    for index, (url, dest) in enumerate(zip(paths, dests)):
        if index not in gives:
            continue
        candidates = [ctx.cache_dir / str(dest)] + [folder / str(dest) for folder in ctx.gold_dirs]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            where = ", ".join(str(c) for c in candidates[1:]) or "no gold directory"
            raise GoldFileMissing(f"cloud_file: no offline copy of {url} (looked for {dest!r} in: {where}); "
                                  "osguard never downloads: put the file there")
        found.append(str(hit))
    return found[0] if len(found) == 1 else found


def get_cache_file(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: cache_file, path}``: a file in the evaluation's cache directory."""
    return str(ctx.cache_dir / config["path"])


def get_vm_command_line(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: vm_command_line, command, shell?}``: the command's stdout."""
    return ctx.env.execute(config["command"], shell=bool(config.get("shell", False))).output


def get_vm_command_error(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: vm_command_error, command, shell?}``: the command's stderr."""
    return ctx.env.execute(config["command"], shell=bool(config.get("shell", False))).error


def get_rule(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: rule, rules}``: the rules, unchanged."""
    return config["rules"]


def get_list_directory(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: list_directory, path}``: the ``/list_directory`` tree (None if not a directory)."""
    try:
        tree = ctx.env.list_directory(config["path"])
    except (FileNotFoundError, NotADirectoryError):
        return None
    if isinstance(tree, dict) and "directory_tree" in tree:
        return tree["directory_tree"]
    return tree


def get_accessibility_tree(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """``{type: accessibility_tree}``: the ``/accessibility`` XML (None without one)."""
    return ctx.env.accessibility_tree()


GETTERS: dict[str, Getter] = {
    "accessibility_tree": get_accessibility_tree,
    "vm_file": get_vm_file,
    "cache_file": get_cache_file,
    "cloud_file": get_cloud_file,
    "vm_command_line": get_vm_command_line,
    "vm_command_error": get_vm_command_error,
    "rule": get_rule,
    "list_directory": get_list_directory,
}


def get_getter(name: str) -> Getter:
    """The getter registered under ``name``.

    Raises:
        UnknownNameError: with the closest known name when there is one.
    """
    try:
        return GETTERS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown OSWorld getter type {name!r}{did_you_mean(str(name), GETTERS)} "
            f"(supported: {', '.join(sorted(GETTERS))})"
        ) from None
