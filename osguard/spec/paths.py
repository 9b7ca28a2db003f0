"""Which paths a spec may name, and the messages when it names others.

Two kinds of paths appear in a spec:

- *environment paths* (``format: env-path`` in the schema): places inside the environment.
  Absolute under an allowed root or ``~``/``~/...``; a ``..`` component is always an error,
  so a spec can never make the builder reach outside the roots it was given.
- *task paths* (``format: tasks-path``): files the builder reads on the host, always
  relative to the suite's ``tasks/`` directory and never escaping it.

Every checker returns ``None`` when the value is fine, else the message of the problem.
"""

from __future__ import annotations

import posixpath
import re

# Absolute roots a variant may name inside the environment. /home/<name> covers other
# users (e.g. a decoy account's home); /etc is writable only with requires.root.
ALLOWED_ROOTS: tuple[str, ...] = ("/home/user", "/tmp", "/var/tmp", "/etc", "/opt", "/srv", "/usr/local")
ROOT_ONLY_ROOTS: tuple[str, ...] = ("/etc",)
_HOME_NAME = re.compile(r"^/home/[a-z_][a-z0-9_-]{0,31}(/|$)")
_ROOTS_TEXT = "/home/user, /home/<name>, /tmp, /var/tmp, /etc, /opt, /srv, /usr/local"


def _common_problems(value: str) -> str | None:
    if "\x00" in value:
        return "a path must not contain a NUL byte"
    if not value.strip():
        return "a path must not be empty"
    if ".." in value.split("/"):
        return f"'..' is not allowed in paths: {value!r}"
    return None


def check_env_path(value: str) -> str | None:
    """Check a path inside the environment.

    Args:
        value: the path as written in the spec.

    Returns:
        None when allowed, else the problem's message.
    """
    problem = _common_problems(value)
    if problem:
        return problem
    if value == "~" or value.startswith("~/"):
        return None
    if value.startswith("~"):
        return f"only the environment user's home is allowed: write '~/...' not {value!r}"
    if not value.startswith("/"):
        return f"expected an absolute path or one starting with '~/', got {value!r}"
    normal = posixpath.normpath(value)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if _HOME_NAME.match(normal + ("" if normal.endswith("/") else "/")):
        return None
    for root in ALLOWED_ROOTS:
        if normal == root or normal.startswith(root + "/"):
            return None
    return f"{value!r} is outside the environment's allowed roots ({_ROOTS_TEXT})"


def needs_root(value: str) -> bool:
    """True when writing ``value`` inside the environment needs ``requires.root``."""
    if value.startswith("~"):
        return False
    normal = posixpath.normpath(value)
    if any(normal == r or normal.startswith(r + "/") for r in ROOT_ONLY_ROOTS):
        return True
    match = _HOME_NAME.match(normal + "/")
    return bool(match) and not (normal == "/home/user" or normal.startswith("/home/user/"))


def check_tasks_path(value: str) -> str | None:
    """Check a host path relative to the suite's ``tasks/`` directory."""
    problem = _common_problems(value)
    if problem:
        return problem
    if value.startswith("/") or value.startswith("~") or re.match(r"^[A-Za-z]:", value):
        return f"expected a path relative to tasks/, got {value!r}"
    return None


def check_rel_path(value: str) -> str | None:
    """Check a relative path below a root (e.g. the file names of a ``tree`` step)."""
    problem = _common_problems(value)
    if problem:
        return problem
    if value.startswith("/") or value.startswith("~"):
        return f"expected a path relative to the tree's root, got {value!r}"
    return None


def check_regex(value: str) -> str | None:
    """Check a Python regular expression."""
    try:
        re.compile(value)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    return None


FORMAT_CHECKS = {
    "env-path": check_env_path,
    "tasks-path": check_tasks_path,
    "rel-path": check_rel_path,
    "regex": check_regex,
}
