"""Archives with fixed timestamps, so their bytes (and hashes) are reproducible."""

from __future__ import annotations

import gzip
import io
import tarfile

# Argument bounds, read by `osguard validate` from this literal (see tasks/README.md).
ARGS = {
    "targz": {
        "files": {"type": "object", "maxProperties": 1000,
                  "additionalProperties": {"type": "string", "maxLength": 1_000_000}},
        "mtime": {"type": "integer", "minimum": 0, "maximum": 4_102_444_800},
    },
}


def targz(files: dict[str, str], mtime: int = 1_672_531_200) -> bytes:
    """A .tar.gz holding ``files`` ({name: text}); every timestamp is ``mtime`` (2023-01-01)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(files):
            data = files[name].encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime
            info.mode = 0o644
            info.uname = info.gname = "user"
            archive.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    # gzip's own header carries a timestamp too: pin it.
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=mtime) as compressed:
        compressed.write(raw.getvalue())
    return out.getvalue()
