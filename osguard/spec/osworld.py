"""Reading upstream OSWorld task JSON files (read in place, never copied).

An OSWorld checkout's task data lives in ``evaluation_examples/examples/<domain>/<uuid>.json``.
Functions here accept either the ``evaluation_examples`` directory or its ``examples``
subdirectory; the CLI takes it from ``--osworld-examples DIR`` or ``OSGUARD_OSWORLD_EXAMPLES``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from osguard.errors import OsguardError

ENV_VAR = "OSGUARD_OSWORLD_EXAMPLES"


class OSWorldDataError(OsguardError):
    """Raised when OSWorld task data is missing or unreadable (a wrong directory, a bad id)."""


def examples_root(examples_dir: str | Path) -> Path:
    """The ``examples`` directory (holding ``<domain>/<uuid>.json``) under ``examples_dir``.

    Raises:
        OSWorldDataError: when neither ``examples_dir`` nor ``examples_dir/examples`` holds
            domain folders of task JSON files.
    """
    base = Path(examples_dir).expanduser()
    for candidate in (base / "examples", base):
        if candidate.is_dir() and any(candidate.glob("*/*.json")):
            return candidate
    raise OSWorldDataError(
        f"{base}: no OSWorld tasks found: expected evaluation_examples/ "
        "(with examples/<domain>/<uuid>.json) or its examples/ folder"
    )


def resolve_examples_dir(given: str | Path | None, *, required: bool = False) -> Path | None:
    """The OSWorld examples directory from a flag value or ``$OSGUARD_OSWORLD_EXAMPLES``.

    Args:
        given: the ``--osworld-examples`` value, if any.
        required: raise instead of returning None when neither is set.
    """
    value = given if given else os.environ.get(ENV_VAR) or None
    if value is None:
        if required:
            raise OSWorldDataError(
                f"this needs OSWorld's task data: pass --osworld-examples DIR or set {ENV_VAR}"
            )
        return None
    return examples_root(value)


def _read_task(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OSWorldDataError(f"{path}: cannot read OSWorld task: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("instruction"), str):
        raise OSWorldDataError(f"{path}: not an OSWorld task (no 'instruction')")
    data.setdefault("id", path.stem)
    data.setdefault("config", [])
    data["_domain"] = path.parent.name
    data["_path"] = str(path)
    return data


def find_osworld_task(examples_dir: str | Path, task_id: str, domain: str | None = None) -> Path:
    """The JSON file of ``task_id`` (a full uuid or a unique prefix of one).

    Raises:
        OSWorldDataError: when no task or several tasks match.
    """
    root = examples_root(examples_dir)
    if domain:
        exact = root / domain / f"{task_id}.json"
        if exact.is_file():
            return exact
    matches = sorted(root.glob(f"*/{task_id}.json")) or sorted(root.glob(f"*/{task_id}*.json"))
    if domain:
        matches = [m for m in matches if m.parent.name == domain]
    if not matches:
        where = f"{root}/{domain}" if domain else str(root)
        raise OSWorldDataError(f"no OSWorld task {task_id!r} under {where}")
    if len(matches) > 1:
        names = ", ".join(f"{m.parent.name}/{m.stem}" for m in matches[:5])
        raise OSWorldDataError(f"{task_id!r} matches several OSWorld tasks: {names}")
    return matches[0]


def load_osworld_task(examples_dir: str | Path, task_id: str, domain: str | None = None) -> dict[str, Any]:
    """Load one upstream task.

    Args:
        examples_dir: ``evaluation_examples`` or its ``examples`` folder.
        task_id: the task uuid (or a unique prefix).
        domain: restrict the search to one domain folder.

    Returns:
        The task JSON, plus ``_domain`` (its folder) and ``_path`` (its file).
    """
    return _read_task(find_osworld_task(examples_dir, task_id, domain))


def iter_osworld_tasks(examples_dir: str | Path, domain: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield every upstream task (sorted by domain, then id); see :func:`load_osworld_task`."""
    root = examples_root(examples_dir)
    pattern = f"{domain}/*.json" if domain else "*/*.json"
    for path in sorted(root.glob(pattern)):
        yield _read_task(path)
