"""``--disk SIZE``: the writable space of each environment (build, check, run, env up)."""

from __future__ import annotations

import re
from typing import Any

from osguard.errors import OsguardError

DISK_HELP = ("Writable space of each environment, e.g. 512M or 4G (local and docker; "
             "default 2G: osguard.server.limits.DISK_MB).")
_UNITS = {"": 1, "M": 1, "MB": 1, "MIB": 1, "G": 1024, "GB": 1024, "GIB": 1024}
DISK_PROVIDERS = ("local", "docker")


def parse_disk(text: str) -> int:
    """``512M``/``4G``/``2048`` (MiB) -> MiB.

    Raises:
        OsguardError: not a size, or below 16 MiB.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    unit = match.group(2).upper() if match else ""
    if not match or unit not in _UNITS:
        raise OsguardError(f"--disk {text!r}: expected a size such as 512M or 4G")
    mib = int(float(match.group(1)) * _UNITS[unit])
    if mib < 16:
        raise OsguardError(f"--disk {text!r}: at least 16M")
    return mib


def disk_options(provider: str, disk: str | None) -> dict[str, Any]:
    """The provider options for ``--disk`` (empty without it).

    Raises:
        OsguardError: a bad size, or a provider whose environments osguard does not size.
    """
    if disk is None:
        return {}
    mib = parse_disk(disk)
    if provider not in DISK_PROVIDERS:
        raise OsguardError(f"--disk applies to the {' and '.join(DISK_PROVIDERS)} providers, not {provider!r}")
    return {"disk_mb": mib}
