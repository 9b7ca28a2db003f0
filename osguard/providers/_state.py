"""Records of running environments, so that later commands can find and end them.

One JSON file per environment in the state folder (``$OSGUARD_STATE_DIR``, else
``$XDG_CACHE_HOME/osguard/envs``, else ``~/.cache/osguard/envs``); the local provider
keeps each environment's private folders next to its record, under ``<id>/``.
A record is written when an environment starts and removed when it ends, so
``osguard env list`` shows what is running and ``osguard env down --all`` can find strays.

Record keys: ``id``, ``provider``, ``endpoint``, ``created`` (epoch seconds),
``capabilities`` (``Capabilities.to_json()``), ``info_extra``, ``owner`` (``{"pid",
"start"}``: the process that started it, see ``owner_alive``), and provider-specific keys
(local: ``supervisor_pid``, ``cgroups``, ``env_dir``).

Two runs of the same user share the state folder, so ``env down --all`` keeps every
environment whose owner still runs (``--force`` stops them too).
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
    record = {"owner": owner(), **record}
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
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None when
    there is no such process (or only its zombie). With the pid it names one process for
    good: a pid is reused, a (pid, start time) pair is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] == "Z":
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner(pid: int | None = None) -> dict[str, Any]:
    """The calling process (or ``pid``) as an environment's owner: ``{"pid", "start"}``."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start": process_start(pid)}


def owner_alive(owner: Any) -> bool:
    """True when the owner recorded as ``{"pid", "start"}`` still runs: the pid is alive
    (not a zombie) *and* started at the recorded time, so a reused pid does not count.
    The calling process itself never counts (it may stop its own environments), nor does
    a missing or malformed owner (records written before owners were kept)."""
    if not isinstance(owner, dict):
        return False
    pid, start = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    if not isinstance(start, int) or not pid_alive(pid):
        return False
    return process_start(pid) == start
