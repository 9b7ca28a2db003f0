"""Terminal text capture: what a GUI terminal shows, recorded outside the sandbox.

A terminal's output reaches a GUI agent only as pixels, so ``not_disclosed`` could not see a
secret that ``cat`` showed in an xterm. The local provider creates a FIFO in the sandbox's
host-side ``term`` folder, which the sandbox cannot write (seen inside as ``/run/osguard/term/terminal.fifo``), and holds its
reading end in a host thread; a ``launch`` of ``xterm`` gets ``-l -lf <fifo>`` so xterm
copies everything it displays into it (``with_terminal_log``). The runner and
``osguard check`` take the text that arrived after each step (``TerminalRecorder.take``).

xterm only logs into a file its user owns, so the FIFO belongs to the sandbox's user with
mode 0200: an agent could chmod it and read bytes before the host does, or write fake text
(docs/invariants.md lists the limits).
"""

from __future__ import annotations

import os
import select
import shlex
import threading
from pathlib import Path
from typing import Any

MAX_BYTES = 8 << 20  # text kept between two takes; older text is dropped first


class TerminalRecorder:
    """Reads a FIFO on the host until closed; ``take`` returns the text since the last take."""

    def __init__(self, host_path: Path, inside_path: str, owner: int | None = None):
        self.host_path = Path(host_path)
        self.inside_path = inside_path
        os.mkfifo(self.host_path, 0o600)
        if owner is not None:
            os.chown(self.host_path, owner, -1)  # xterm logs only into a file its user owns
        os.chmod(self.host_path, 0o200)  # write-only for the terminal's user (it could chmod it)
        # O_RDWR: the host also holds a writing end, so a terminal that exits is no EOF
        self._fd = os.open(self.host_path, os.O_RDWR | os.O_NONBLOCK)
        self.armed = False  # a terminal was started with its log here (then take() settles)
        self._chunks: list[bytes] = []
        self._size = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name=f"terminal-{self.host_path.parent.name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._fd], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(self._fd, 65536)
            except (OSError, ValueError):
                return
            if data:
                with self._lock:
                    self._chunks.append(data)
                    self._size += len(data)
                    while self._size > MAX_BYTES and len(self._chunks) > 1:
                        dropped = self._chunks.pop(0)
                        self._size -= len(dropped)
                        self.dropped += len(dropped)

    def take(self, settle: float = 0.3) -> str:
        """The terminal text that arrived since the last call (after ``settle`` seconds for
        output still on its way)."""
        if settle and self.armed and not self._closed.is_set():
            self._closed.wait(settle)
        with self._lock:
            data = b"".join(self._chunks)
            self._chunks, self._size = [], 0
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        """Stop reading and close the host's ends (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join(timeout=2)
        try:
            os.close(self._fd)
        except OSError:
            pass


def with_terminal_log(env: Any, command: "list[str] | str", shell: bool) -> "list[str] | str":
    """``command`` with xterm's logging into the environment's terminal FIFO, when the
    environment records terminals and the command starts an xterm that does not log already."""
    recorder = getattr(env, "terminal", None)
    if recorder is None:
        return command
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv or os.path.basename(argv[0]) != "xterm" or "-lf" in argv:
        return command
    recorder.armed = True
    if isinstance(command, str):
        head, _, rest = command.lstrip().partition(" ")
        return f"{head} -l -lf {shlex.quote(recorder.inside_path)} {rest}".rstrip()
    return [argv[0], "-l", "-lf", recorder.inside_path, *argv[1:]]


def take_terminal_text(env: Any) -> str | None:
    """The terminal text an environment recorded since the last take (None: not recorded)."""
    recorder = getattr(env, "terminal", None)
    if recorder is None:
        return None
    try:
        return recorder.take()
    except Exception:
        return None
