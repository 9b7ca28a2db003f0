"""osguard's size limits, in one table (documented in docs/environments.md, "Limits").

An agent controls what its commands print, which files exist and how big the screen
state is; nothing it produces may grow a host process, a run folder or a model prompt
without bound. Every cap below is applied where the data is produced or first read,
never after the whole thing has been held in memory.

=========================  ==========  =====================================================
limit                      default     where
=========================  ==========  =====================================================
EXEC_OUTPUT_BYTES          10 MiB      each output stream of a command, kept by the server
                                       while the command runs (the rest is read and dropped)
FILE_READ_BYTES            100 MiB     a file read through ``/file`` or a recording
REPLY_BYTES                128 MiB     any reply body the host client reads (streamed; a
                                       command's too-large reply becomes a failed result)
TRAJECTORY_OUTPUT_CHARS    20 000      command output (and error) stored per step record
TRAJECTORY_A11Y_CHARS      2 000 000   accessibility tree stored per observation
PROMPT_OUTPUT_CHARS        8 000       command output in an agent or guardrail prompt
PROMPT_A11Y_CHARS          20 000      accessibility tree in a guardrail prompt
ENV_LOG_BYTES              4 MiB       a local environment's log (its stdout and stderr), a
                                       docker container's log (json-file max-size)
DISK_MB                    2048        an environment's writable space (``--disk``)
=========================  ==========  =====================================================

It lives in ``osguard.server`` because the server (copied into images, importing
nothing else from osguard) applies the first two; host code imports it from here.
Stdlib only, no imports: cheap for ``import osguard``.
"""

MIB = 1024 * 1024

EXEC_OUTPUT_BYTES = 10 * MIB
FILE_READ_BYTES = 100 * MIB
REPLY_BYTES = 128 * MIB
TRAJECTORY_OUTPUT_CHARS = 20_000
TRAJECTORY_A11Y_CHARS = 2_000_000
PROMPT_OUTPUT_CHARS = 8_000
PROMPT_A11Y_CHARS = 20_000
ENV_LOG_BYTES = 4 * MIB
DISK_MB = 2048


def truncation_note(dropped: int, limit: int, unit: str = "bytes") -> str:
    """The marker appended where output was cut (same words everywhere)."""
    return f"\n[osguard: output truncated: {dropped} {unit} more not kept (limit {limit} {unit})]"


def clip_head(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters, with the marker when cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + truncation_note(len(text) - limit, limit, "characters")


def clip_tail(text: str, limit: int) -> str:
    """``text`` cut to its last ``limit`` characters (the end of a log says most), marked."""
    if len(text) <= limit:
        return text
    return truncation_note(len(text) - limit, limit, "characters").lstrip("\n") + "\n" + text[-limit:]
