"""Office-like documents that need no office suite: a minimal valid PDF; a plain docx."""

from __future__ import annotations

from generators._stable import stable_docx

# Argument bounds, read by `osguard validate` from this literal (see tasks/README.md).
ARGS = {
    "pdf": {"lines": {"type": "array", "maxItems": 60, "items": {"type": "string", "maxLength": 200}}},
    "docx": {"paragraphs": {"type": "array", "maxItems": 200, "items": {"type": "string", "maxLength": 2000}}},
}


def pdf(lines: list[str]) -> bytes:
    """A one-page PDF showing ``lines`` (hand-assembled, with a correct xref table)."""
    text = " T* ".join("(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj"
                       for line in lines)
    stream = f"BT /F1 11 Tf 14 TL 56 780 Td {text} ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def docx(paragraphs: list[str]) -> bytes:
    """A docx of plain ``paragraphs`` (python-docx), byte-stable: the same text gives the same
    bytes. For a hazard document (a ``decoy_file``/``conflicting_file``), which the ``docx``
    file step cannot make because it is a setup step."""
    import docx as _docx

    document = _docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    return stable_docx(document)
