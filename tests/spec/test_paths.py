"""Which environment and task paths a spec may name (exact messages)."""

from __future__ import annotations

import pytest

from osguard.spec.paths import check_env_path, check_rel_path, check_tasks_path, needs_root

ROOTS = "/home/user, /home/<name>, /tmp, /var/tmp, /etc, /opt, /srv, /usr/local"


@pytest.mark.parametrize("path", [
    "~", "~/", "~/Desktop/a b.txt", "/home/user", "/home/user/x", "/home/charlie/x", "/tmp", "/tmp/x/y",
    "/var/tmp/z", "/etc/motd", "/opt/app", "/srv/data", "/usr/local/bin/tool", "~/Documents/*.txt",
    "/tmp/./x",
])
def test_allowed_env_paths(path: str) -> None:
    assert check_env_path(path) is None


@pytest.mark.parametrize("path, message", [
    ("../x", "'..' is not allowed in paths: '../x'"),
    ("~/a/../../etc/passwd", "'..' is not allowed in paths: '~/a/../../etc/passwd'"),
    ("/home/user/..", "'..' is not allowed in paths: '/home/user/..'"),
    ("/root/.ssh/id_rsa", f"'/root/.ssh/id_rsa' is outside the environment's allowed roots ({ROOTS})"),
    ("/", f"'/' is outside the environment's allowed roots ({ROOTS})"),
    ("/home", f"'/home' is outside the environment's allowed roots ({ROOTS})"),
    ("/usr/bin/ls", f"'/usr/bin/ls' is outside the environment's allowed roots ({ROOTS})"),
    ("/etcetera", f"'/etcetera' is outside the environment's allowed roots ({ROOTS})"),
    ("/proc/self/environ", f"'/proc/self/environ' is outside the environment's allowed roots ({ROOTS})"),
    ("Desktop/x", "expected an absolute path or one starting with '~/', got 'Desktop/x'"),
    ("~root/.bashrc", "only the environment user's home is allowed: write '~/...' not '~root/.bashrc'"),
    ("~/a\x00b", "a path must not contain a NUL byte"),
    ("  ", "a path must not be empty"),
])
def test_rejected_env_paths(path: str, message: str) -> None:
    assert check_env_path(path) == message


def test_needs_root() -> None:
    assert needs_root("/etc/motd")
    assert needs_root("/home/charlie/x")
    assert not needs_root("/home/user/x")
    assert not needs_root("~/x")
    assert not needs_root("/tmp/x")


@pytest.mark.parametrize("path, message", [
    ("files/a.txt", None),
    ("/etc/shadow", "expected a path relative to tasks/, got '/etc/shadow'"),
    ("~/x", "expected a path relative to tasks/, got '~/x'"),
    ("C:/x", "expected a path relative to tasks/, got 'C:/x'"),
    ("a/../../x", "'..' is not allowed in paths: 'a/../../x'"),
])
def test_tasks_paths(path: str, message: str | None) -> None:
    assert check_tasks_path(path) == message


def test_rel_paths() -> None:
    assert check_rel_path("pkg/util.py") is None
    assert check_rel_path("/abs") == "expected a path relative to the tree's root, got '/abs'"
    assert check_rel_path("a/../b") == "'..' is not allowed in paths: 'a/../b'"
