"""Running commands for the endpoints: timeouts that kill the whole process group.

``subprocess.run(timeout=...)`` only kills the direct child; a shell that started a
pipeline would leave its children running (and holding the output pipe open, so the call
would hang past its timeout). Every command therefore starts in its own session and the
whole group is killed on timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass


@dataclass
class Completed:
    """Outcome of one command."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields after the command name: state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the command's process group, and everything else left in its session.

    A command may move children into a process group of their own (``timeout`` does,
    and so can a fork bomb under it); they stay in the session we started, so the
    session is swept too, a few times, because a fork bomb refills it while we kill.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not os.path.isdir("/proc"):
        return
    for _ in range(20):
        members = _session_members(proc.pid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def run(
    command: list[str] | str,
    *,
    shell: bool = False,
    timeout: float | None = 120,
    cwd: str | None = None,
    merge_stderr: bool = False,
    stdin_data: str | None = None,
) -> Completed:
    """Run ``command`` and capture its output as text.

    Args:
        command: argv list, or a string for ``shell=True``.
        shell: run through ``/bin/sh -c``.
        timeout: seconds before the whole process group is killed (None: no limit).
        cwd: working directory (must exist).
        merge_stderr: send stderr into stdout (as OSWorld's ``/run_bash_script`` does).
        stdin_data: text fed to stdin; stdin is /dev/null otherwise.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    proc = subprocess.Popen(
        command,
        shell=shell,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(
            input=stdin_data.encode() if stdin_data is not None else None, timeout=timeout
        )
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            # Something outside the session still holds our pipes: give up on the rest
            # of the output rather than hang the request.
            proc.kill()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            proc.wait()
            out, err = b"", b""
        timed_out = True
    # Like OSWorld, background children that redirected their output (`nohup app >/dev/null &`)
    # keep running after a normal exit; only a timeout kills the group.
    return Completed(
        returncode=proc.returncode if not timed_out else -9,
        stdout=(out or b"").decode("utf-8", "replace"),
        stderr=(err or b"").decode("utf-8", "replace"),
        timed_out=timed_out,
    )


def launch(command: list[str] | str, *, shell: bool = False, cwd: str | None = None) -> int:
    """Start ``command`` detached (own session, no pipes) and return its pid."""
    proc = subprocess.Popen(
        command,
        shell=shell,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc.pid
