"""Private host folders and files that a planted symlink cannot redirect.

A folder in a shared place (``/tmp``) made with ``mkdir(exist_ok=True)`` and files opened
by name follow whatever another local user (or an agent that reached the host) planted
there first. These helpers create folders with mode 0700, open every path component
with ``O_NOFOLLOW`` and check that the result is a folder (or regular file) owned by us
and writable by nobody else; anything else is refused with a message naming the path.
Stdlib only: the detached supervisor may import it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A path that is not ours alone (a symlink, another owner, writable by others)."""


def _check(fd: int, path: str, kind: str) -> None:
    info = os.fstat(fd)
    is_kind = stat.S_ISDIR(info.st_mode) if kind == "folder" else stat.S_ISREG(info.st_mode)
    if not is_kind:
        raise UnsafePath(f"{path} is not a {kind}; refusing to use it")
    if info.st_uid != os.geteuid():
        raise UnsafePath(f"{path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}); "
                         "refusing to use it")
    if info.st_mode & 0o022:
        raise UnsafePath(f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
                         "refusing to use it")


def open_private_dir(path: Path) -> int:
    """A descriptor of folder ``path``, created (mode 0700) with its parents if missing.

    Every component is opened with ``O_NOFOLLOW`` below ``/``; the last one must be a
    folder owned by this user and not writable by others (existing parents only must
    not be symlinks: ``~/.cache`` may well be group-readable).

    Raises:
        UnsafePath: a component is a symlink, or the folder is not ours alone.
    """
    path = Path(os.path.abspath(path))
    fd = os.open("/", _DIR_FLAGS)
    try:
        for index, part in enumerate(path.parts[1:], start=2):
            shown = str(Path(*path.parts[:index]))
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if os.path.islink(shown):
                    raise UnsafePath(f"{shown} is a symbolic link; refusing to follow it") from None
                raise UnsafePath(f"cannot open folder {shown}: {exc.strerror}") from None
            os.close(fd)
            fd = child
        _check(fd, str(path), "folder")
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_private_file(dir_fd: int, name: str, flags: int = os.O_RDWR, *, shown: str = "") -> int:
    """Open (creating, mode 0600) the regular file ``name`` in the folder ``dir_fd``.

    Raises:
        UnsafePath: ``name`` is a symlink or not a regular file of ours.
    """
    shown = shown or name
    try:
        fd = os.open(name, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink; a socket or a FIFO without reader
            raise UnsafePath(f"{shown} is a symbolic link or a special file; refusing to open it") from None
        raise
    try:
        _check(fd, shown, "file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_private(dir_fd: int, name: str, limit: int = 1 << 20) -> bytes:
    """The first ``limit`` bytes of ``name`` in ``dir_fd`` (b"" when it does not exist)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise UnsafePath(f"cannot read {name}: {exc.strerror}") from None
    try:
        _check(fd, name, "file")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def write_private(dir_fd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dir_fd`` atomically (a fresh 0600 file renamed over it)."""
    staging = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(staging, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
