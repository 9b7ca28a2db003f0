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
import threading
import time
from dataclasses import dataclass

from osguard.server import zygote
from osguard.server.limits import EXEC_OUTPUT_BYTES, truncation_note


@dataclass
class Completed:
    """Outcome of one command."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False


class _Capture:
    """Reads a pipe to its end in a thread, keeping only its first ``limit`` bytes.

    The rest is read and counted, not kept, so a command printing gigabytes neither
    blocks on a full pipe nor grows the server.
    """

    def __init__(self, stream, limit: int) -> None:
        self.stream, self.limit = stream, limit
        self.kept = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
                if not chunk:
                    return
                room = self.limit - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (OSError, ValueError):  # the pipe was closed under us (give-up path)
            return

    def text(self) -> str:
        out = bytes(self.kept).decode("utf-8", "replace")
        return out + truncation_note(self.dropped, self.limit) if self.dropped else out


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


def _kill_group(proc: "subprocess.Popen | _Warm") -> None:
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
    output_limit: int = EXEC_OUTPUT_BYTES,
) -> Completed:
    """Run ``command`` and capture its output as text.

    Args:
        command: argv list, or a string for ``shell=True``.
        shell: run through ``/bin/sh -c``.
        timeout: seconds before the whole process group is killed (None: no limit).
        cwd: working directory (must exist).
        merge_stderr: send stderr into stdout (as OSWorld's ``/run_bash_script`` does).
        stdin_data: text fed to stdin; stdin is /dev/null otherwise.
        output_limit: bytes kept of each stream; the rest is read and dropped, and the
            kept text ends with a truncation note.

    Raises:
        FileNotFoundError: the program does not exist.
    """
    proc = _warm_start(command, shell, cwd, merge_stderr, stdin_data is not None) or subprocess.Popen(
        command,
        shell=shell,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    # Captured while the command runs, each stream bounded (osguard.server.limits).
    captures = [_Capture(stream, output_limit) for stream in (proc.stdout, proc.stderr) if stream is not None]
    if proc.stdin is not None:
        threading.Thread(target=_feed, args=(proc.stdin, (stdin_data or "").encode()), daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    try:
        proc.wait(timeout=timeout)
        # Like OSWorld, background children that redirected their output (`nohup app >/dev/null &`)
        # keep running after a normal exit; one that still holds our pipes at the deadline
        # counts as the command running over its timeout.
        for capture in captures:
            capture.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if any(capture.thread.is_alive() for capture in captures):
            raise subprocess.TimeoutExpired(command, timeout or 0)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()
        timed_out = True
    for capture in captures:
        capture.thread.join(5 if timed_out else None)
        if capture.thread.is_alive():
            # Something outside the session still holds our pipes: give up on the rest
            # of the output rather than hang the request.
            capture.stream.close()
    stdout = captures[0].text()
    stderr = captures[1].text() if len(captures) > 1 else ""
    return Completed(
        returncode=proc.returncode if not timed_out else -9,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        truncated=any(c.dropped for c in captures),
    )


class _Warm:
    """A ``python -c`` command forked by a zygote, with the pipes ``run`` reads."""

    def __init__(self, child: "zygote.ZygoteChild", stdin, stdout, stderr) -> None:
        self.child, self.pid = child, child.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.child.wait(timeout)


def _warm_start(command: list[str] | str, shell: bool, cwd: str | None, merge_stderr: bool,
                with_stdin: bool) -> "_Warm | None":
    """``python -c CODE ...`` through the interpreter's zygote (``osguard.server.zygote``);
    None when the command is not one, or the zygote is not (yet) there."""
    if not zygote.enabled():
        return None
    executable = zygote.qualifies(command, shell)
    if executable is None or (cwd is not None and not os.path.isdir(cwd)):
        return None  # (a missing cwd: let Popen raise as it always did)
    warm = zygote.zygote_for(executable)
    if warm is None:
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = (None, out_w) if merge_stderr else os.pipe()
    in_r, in_w = os.pipe() if with_stdin else (os.open(os.devnull, os.O_RDONLY), None)
    try:
        child = warm.spawn(list(command), cwd, (in_r, out_w, err_w))
    finally:
        for fd in {in_r, out_w, err_w}:
            os.close(fd)
    if child is None:
        for fd in (out_r, err_r, in_w):
            if fd is not None:
                os.close(fd)
        return None
    return _Warm(child, None if in_w is None else os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"),
                 None if err_r is None else os.fdopen(err_r, "rb"))


def _feed(stdin, data: bytes) -> None:
    try:
        stdin.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass


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
