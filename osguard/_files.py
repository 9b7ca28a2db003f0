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
