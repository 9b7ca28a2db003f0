"""What every registry says on a miss: the nearest known name, if one is close enough.

One helper so that every "unknown X" message words its suggestion the same way
(``"; did you mean 'x'?"``) and uses the same closeness cutoff.
"""

from __future__ import annotations

from collections.abc import Iterable


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """The suggestion to append to an "unknown name" message.

    Args:
        word: the name that was asked for and not found.
        candidates: the names that would have been found.

    Returns:
        ``"; did you mean 'x'?"`` for the closest candidate (``difflib`` ratio of at
        least 0.6), else ``""``.
    """
    import difflib  # only on a miss; keeps importing a registry cheap

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
