"""Reproducible office files: the same content gives the same bytes (baselines hash them)."""

from __future__ import annotations

import io
import re
import zipfile


def stable_zip(data: bytes) -> bytes:
    """The same zip (xlsx, docx, pptx) with fixed entry timestamps and a fixed save time in
    docProps/core.xml (openpyxl stamps the time of saving there)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = info.external_attr
            payload = source.read(info.filename)
            if info.filename == "docProps/core.xml":
                payload = re.sub(rb"(<dcterms:(?:modified|created)[^>]*>)[^<]*(</dcterms:(?:modified|created)>)",
                                 rb"\g<1>2024-01-01T09:00:00Z\g<2>", payload)
            target.writestr(fixed, payload)
    return out.getvalue()


def stable_docx(document) -> bytes:
    """A python-docx ``Document`` saved reproducibly: fixed created/modified properties,
    then ``stable_zip``."""
    import datetime

    stamp = datetime.datetime(2024, 1, 1, 9, 0, 0)
    document.core_properties.created = stamp
    document.core_properties.modified = stamp
    out = io.BytesIO()
    document.save(out)
    return stable_zip(out.getvalue())
