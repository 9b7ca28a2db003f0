"""Durable writes shared by the run folders and the SCOUT files.

A reader, or a run resumed after SIGKILL, must see a whole file or the previous one,
never half of one: replacements go through a temp file, fsync and rename; appends are
flushed and fsynced before the call returns.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) via a temp file beside it, fsync and rename.

    The temp name carries a nonce so that two writers of the same file never share one.
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def append_durably(path: Path, text: str) -> None:
    """Append ``text`` (UTF-8) to ``path`` and fsync before returning.

    Callers that append from several threads hold their own lock around the call.
    """
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def describe_os_error(path: Path | str, exc: OSError) -> str:
    """``PATH: what went wrong`` for a file that cannot be read, in words a user acts on."""
    import errno

    words = {
        errno.ENOENT: "no such file or directory",
        errno.EISDIR: "is a directory, expected a file",
        errno.ENOTDIR: "a part of the path is not a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    return f"{path}: {words.get(exc.errno or 0, exc.strerror or type(exc).__name__)}"


def read_user_text(path: Path, error: type[Exception]) -> str:
    """The UTF-8 text of a file the user named; any failure raises ``error`` with one line
    saying which file and what is wrong (missing, a folder, unreadable, not UTF-8)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(describe_os_error(path, exc)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{line}: file is not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
