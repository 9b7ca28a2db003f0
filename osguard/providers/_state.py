"""Records of running environments, so that later commands can find and end them.

One JSON file per environment in the state folder (``$OSGUARD_STATE_DIR``, else
``$XDG_CACHE_HOME/osguard/envs``, else ``~/.cache/osguard/envs``); the local provider
keeps each environment's private folders next to its record, under ``<id>/``.
A record is written when an environment starts and removed when it ends, so
``osguard env list`` shows what is running and ``osguard env down --all`` can find strays.

Record keys: ``id``, ``provider``, ``endpoint``, ``created`` (epoch seconds),
``capabilities`` (``Capabilities.to_json()``), ``info_extra``, and provider-specific keys
(local: ``supervisor_pid``, ``cgroups``, ``env_dir``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def state_dir() -> Path:
    """Folder of the environment records (created on demand)."""
    override = os.environ.get("OSGUARD_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "osguard" / "envs"


def record_path(env_id: str) -> Path:
    """Where the record of ``env_id`` lives."""
    return state_dir() / f"{env_id}.json"


def write_record(record: dict[str, Any]) -> Path:
    """Write (atomically) the record of a started environment."""
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = record_path(record["id"])
    staging = path.with_suffix(f".tmp{os.getpid()}")
    staging.write_text(json.dumps(record, indent=2, sort_keys=True))
    staging.replace(path)
    return path


def read_records() -> list[dict[str, Any]]:
    """All records, oldest first (unreadable files are skipped)."""
    folder = state_dir()
    if not folder.is_dir():
        return []
    records = []
    for path in folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "id" in record:
            records.append(record)
    return sorted(records, key=lambda r: (r.get("created", 0), r["id"]))


def remove_record(env_id: str) -> None:
    """Forget ``env_id`` (no error when already gone)."""
    try:
        record_path(env_id).unlink()
    except FileNotFoundError:
        pass


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), None when it does not run.

    With the pid it names one process for good: a recycled pid has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_token(pid: int | None = None) -> dict[str, int]:
    """``{"pid", "start"}`` of this process (or ``pid``): an environment's owner."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start": process_start(pid) or 0}


def owner_alive(token: Any) -> bool:
    """True while the owner named by ``token`` runs (a malformed token counts as alive:
    what cannot be proved dead is never cleaned)."""
    if not isinstance(token, dict) or not isinstance(token.get("pid"), int):
        return True
    start = process_start(token["pid"])
    return start is not None and start == token.get("start")
