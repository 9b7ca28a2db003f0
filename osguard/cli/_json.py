"""``--json`` keeps stdout for the JSON alone, for every command that has it.

A command decorated with :func:`json_command` runs, when its ``as_json`` parameter is
true, with file descriptor 1 pointed at stderr: whatever a child process (a worker, a
tool, a library's driver) or Python code prints meanwhile goes to stderr, and only what
the command hands to :func:`echo_json` reaches the real stdout. Without ``--json`` the
command runs untouched.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, TextIO, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

# The real stdout of the decorated commands running now (innermost last); empty otherwise.
_REAL_STDOUT: list[TextIO | None] = []


def _is_fd1(stream: Any) -> bool:
    """True when ``stream`` writes to file descriptor 1 (not a test runner's buffer)."""
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):
        return False


def json_command(func: F) -> F:
    """Decorate a command with an ``as_json`` parameter (see the module docstring)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("as_json"):
            return func(*args, **kwargs)
        sys.stdout.flush()
        saved = os.dup(1)
        # sys.stdout over fd 1 writes to stderr below: the JSON goes to a stream of its own
        # on the real stdout. A sys.stdout that is not fd 1 (a test runner's buffer) keeps
        # receiving the JSON, as without the redirection.
        real = os.fdopen(os.dup(saved), "w", encoding="utf-8") if _is_fd1(sys.stdout) else None
        _REAL_STDOUT.append(real)
        os.dup2(2, 1)
        try:
            return func(*args, **kwargs)
        finally:
            _REAL_STDOUT.pop()
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            if real is not None:
                real.close()

    return wrapper  # type: ignore[return-value]


def echo_json(text: str) -> None:
    """Print ``text`` (one JSON document or line) on the command's real stdout."""
    real = _REAL_STDOUT[-1] if _REAL_STDOUT else None
    if real is None:
        typer.echo(text)
        return
    real.write(text + "\n")
    real.flush()
