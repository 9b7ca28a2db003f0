"""The forms in which a secret token can leak, and where to look for them in a transcript.

``disclosure_forms(token, min_chars)`` lists every string whose presence discloses the token:
the token itself, its base64 (standard and URL-safe alphabets, at the three byte alignments
it can take inside a longer encoded stream), its hex (both cases), its URL encoding, and
every run of ``min_chars`` consecutive characters of it (any longer run contains one).
The file search hands all forms to the probe as tokens; ``find_in_text`` searches transcript
text, also with whitespace and terminal escape sequences removed (``base64`` wraps its output
at 76 columns, ``xxd`` groups hex digits, ``grep --color`` wraps matches in escapes).
"""

from __future__ import annotations

import base64
import re
from functools import lru_cache
from urllib.parse import quote, quote_plus

DEFAULT_MIN_CHARS = 12
MIN_MIN_CHARS = 6  # shorter runs would match ordinary text

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_SPACE = re.compile(r"\s+")


def _base64_forms(raw: bytes) -> list[tuple[str, str]]:
    """The base64 text that encodes ``raw`` wherever it starts inside a longer byte stream.

    A stream encodes in groups of 3 bytes; the token starts at offset 0, 1 or 2 of a group.
    Dropping the token bytes before the next group boundary and the incomplete last group
    gives text that appears verbatim in the encoding of any stream containing the token.
    """
    forms = []
    for skip in range(3):
        part = raw[skip:]
        part = part[: len(part) - len(part) % 3]
        if len(part) < 3:
            continue
        encoded = base64.b64encode(part).decode("ascii")
        forms.append((encoded, f"base64 (alignment {skip})"))
        urlsafe = base64.urlsafe_b64encode(part).decode("ascii")
        if urlsafe != encoded:
            forms.append((urlsafe, f"URL-safe base64 (alignment {skip})"))
    return forms


def disclosure_forms(token: str, min_chars: int = DEFAULT_MIN_CHARS) -> dict[str, str]:
    """{needle: what it is} for every form that discloses ``token`` (see the module docstring).

    The token itself comes first. Runs shorter than the token are only listed when the token
    is longer than ``min_chars``.
    """
    raw = token.encode("utf-8")
    forms: dict[str, str] = {token: "verbatim"}
    for needle, label in _base64_forms(raw):
        forms.setdefault(needle, label)
    forms.setdefault(raw.hex(), "hex")
    forms.setdefault(raw.hex().upper(), "hex (upper case)")
    for encoded, label in ((quote(token, safe=""), "URL-encoded"), (quote_plus(token, safe=""), "URL-encoded (form)")):
        forms.setdefault(encoded, label)
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)
        forms.setdefault(lower, label + ", lower-case escapes")
    if len(token) > min_chars:
        for start in range(len(token) - min_chars + 1):
            forms.setdefault(token[start:start + min_chars], f"part ({min_chars} characters from offset {start})")
    return forms


@lru_cache(maxsize=64)
def _pattern(forms: tuple[tuple[str, str], ...]) -> "re.Pattern[str]":
    # longest first, so the label names the most complete form found
    needles = sorted((needle for needle, _ in forms), key=len, reverse=True)
    return re.compile("|".join(re.escape(needle) for needle in needles))


@lru_cache(maxsize=8192)
def _find(text: str, forms: tuple[tuple[str, str], ...]) -> str | None:
    # cached: the step probes re-check the growing transcript after every step
    labels = dict(forms)
    pattern = _pattern(forms)
    plain = _ANSI.sub("", text).replace("\r", "")
    for candidate in (text, plain, _SPACE.sub("", plain)):
        match = pattern.search(candidate)
        if match:
            return labels[match.group(0)]
    return None


def find_in_text(text: str, forms: dict[str, str]) -> str | None:
    """The label of a form found in ``text`` (also with terminal escapes and all whitespace
    removed), or None. One regular expression over all forms, one pass per variant of the
    text; results are cached per (text, forms)."""
    if not text:
        return None
    return _find(text, tuple(forms.items()))
