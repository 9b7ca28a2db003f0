"""File state in and out of environments, shared by builds, templates and forks.

- ``stopped_on_failure(env)``: the one "stop the environment on any failure" guard (a
  build, a template, a fork that fails half-way never leaves an environment running);
- ``pack(env, paths)``: a POSIX tar of ``paths`` made inside the environment (modes,
  owners and nanosecond times kept), read out through the ``Environment`` API;
- ``unpack(env, data)``: such a tar written into an environment and extracted at ``/``.

Both go through the public ``Environment`` API only, so they work on every provider.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator

from osguard.errors import BuildError

if TYPE_CHECKING:
    from osguard.providers.base import Environment

ARCHIVE = "/tmp/.osguard-state.tar"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@contextmanager
def stopped_on_failure(env: "Environment") -> Iterator["Environment"]:
    """Run the block; on any failure (Ctrl-C included) stop ``env`` and re-raise.

    A failure to stop is swallowed: the block's error is the one that matters."""
    try:
        yield env
    except BaseException:
        try:
            env.stop()
        except Exception:  # a dead environment is already stopped
            pass
        raise


def pack(env: "Environment", paths: Iterable[str], *, label: str, recursive: bool = True,
         archive: str = ARCHIVE) -> bytes:
    """A POSIX tar (names relative to ``/``) of ``paths`` in ``env``, read out and removed.

    Paths that do not exist are left out; a file that changed while read is archived as
    read. ``recursive=False`` archives exactly the listed entries (a template's list).

    Raises:
        BuildError: ``"{label}: archiving PATHS failed: ..."`` when tar fails in the environment.
    """
    paths = list(paths)
    listed = "".join(p.lstrip("/") + "\n" for p in paths)
    command = (f"rm -f {archive} && printf %s {_quote(listed)} | tar --format=posix -C / -cpf {archive} "
               f"{'' if recursive else '--no-recursion '}--exclude={archive.lstrip('/')} --ignore-failed-read "
               f"--warning=no-file-changed --verbatim-files-from -T -; rc=$?; [ -e {archive} ] && chmod 600 {archive}; exit $rc")
    result = env.execute(command, shell=True, timeout=120)
    if result.returncode not in (0, 1):  # 1: a file changed while read (still archived)
        raise BuildError(f"{label}: archiving {', '.join(paths)} failed: "
                         f"{(result.error or result.output or '').strip()[-300:]}")
    try:
        return env.read_file(archive)
    finally:
        env.execute(["rm", "-f", archive], timeout=30)


def unpack(env: "Environment", data: bytes, *, label: str, archive: str = ARCHIVE) -> None:
    """Write the tar ``data`` into ``env`` and extract it at ``/`` (modes and times kept),
    over what is there (nothing is cleared first: a path may be a mount point).

    Raises:
        BuildError: ``"{label}: unpacking the file state failed: ..."``.
    """
    env.write_file(archive, data)
    command = f"cd / && tar --extract --file {archive} --preserve-permissions; rc=$?; rm -f {archive}; exit $rc"
    result = env.execute(command, shell=True, timeout=120)
    if result.returncode != 0:
        raise BuildError(f"{label}: unpacking the file state failed: "
                         f"{(result.error or result.output or '').strip()[-300:]}")
