"""Data types of invariant checks: state snapshots, trajectories and verdicts.

A ``State`` is what the probe (``osguard.builder.probe``) returns, as plain JSON-able data.
Checks are pure functions of (baseline State, final State, Trajectory); they never touch an
environment and never mutate their inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A probe result. Shape (all keys always present; see osguard.builder.probe for the details):
# {
#   "hash_algo": "xxh3_128" | "sha256" | ...,
#   "home":     str (what `~` expanded to inside the environment),
#   "roots":    {abs_root: bool (existed)}   # which roots were walked: a path under a walked
#                                            # root and missing from "files" is absent
#   "files":    {abs_path: {"type": "file"|"dir"|"symlink"|"other", "mode": int (st_mode & 0o7777),
#                            "uid": int, "gid": int, "size": int, "hash": str|None,
#                            "target": str|None (symlink target)}},
#   "configs":  {abs_path: {format: {"data": Any|None, "error": None | "missing" | "unreadable: ..." |
#                                    "unparseable: ..." | "not a regular file: symlink|dir|..."}}},
#               # format: "json"|"ini"|"prefs"|"xcu"|"msgfilter"|"passwd"|"lines"|"text"
#               # typed data: JSON native; prefs {name: bool|int|str}; ini {section: {key: str}};
#               # xcu {"/path/prop": {"value": str|[str]|None, "type": "xs:int"|...|None}}
#   "tokens":   {token: [abs_paths whose content contains token]},
#   "lines":    {abs_path: [[line_number, line_hash], ...]}  # line index of text files under
#               # ProbeRequest.lines roots (blank lines left out), for content_retained
#   "lines_truncated": bool,  # the line index hit its bound (then it is incomplete)
#   "git":      {repo_path: {"objects": int, "hits": {token: [object ids]}, "error": str|None,
#                            "truncated": bool}}  # every object (loose + packed, deltas resolved)
#   "accesses": {abs_path: [{"event": "open"|"read", "by": str|None}]}  # only for watched paths
#               # (ProbeRequest.watch); a watched path with no access maps to []
#   "accesses_error": str|None,  # the access watcher failed or died ("inside" view: violation)
#   "commands": {command: {"returncode": int, "stdout": str, "stderr": str}},
#   "processes": [{"pid": int, "cmdline": str}],
#   "clipboard": str|None,  # "" when the environment has no display; None when unreadable
#   "errors":   [str],      # problems while probing (unreadable paths...)
#   "elapsed_s": float,
# }
State = dict[str, Any]


@dataclass(frozen=True)
class TrajectoryView:
    """The whole transcript invariants may read from an episode (``not_disclosed``).

    Attributes:
        actions: the executed action codes.
        agent_outputs: the agent's own messages (free text, tool-call arguments) behind
            actions that went through.
        outputs: what the agent could read back from its actions: stdout and stderr of each
            executed action, and the terminal text captured after each step (GUI terminals).
        observations: text observations the agent received (accessibility trees, shell
            output shown as an observation).
        clipboard: clipboard contents seen during the episode, the final one included.
    """

    actions: tuple[str, ...] = ()
    agent_outputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    observations: tuple[str, ...] = ()
    clipboard: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """One concrete reason for a verdict: which path or key, what was expected, what is."""

    path: str
    expected: Any
    actual: Any
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "expected": self.expected, "actual": self.actual, "detail": self.detail}


@dataclass(frozen=True)
class Verdict:
    """Result of one check. ``held`` is False for violations AND for checks that could not be
    decided (``error`` set): a missing or failing check never counts as held."""

    invariant_id: str
    kind: str
    held: bool
    evidence: tuple[Evidence, ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant_id": self.invariant_id,
            "kind": self.kind,
            "held": self.held,
            "evidence": [e.to_json() for e in self.evidence],
            "error": self.error,
        }


@dataclass(frozen=True)
class ProbeRequest:
    """What a probe must collect; built from a variant's invariants (each kind declares its
    needs) and merged across kinds."""

    roots: tuple[str, ...] = ()  # directory trees (or files) to manifest, with hashes
    configs: tuple[tuple[str, str], ...] = ()  # (path, format) to parse
    tokens: tuple[str, ...] = ()  # distinctive strings to search for under ``roots``
    commands: tuple[str, ...] = ()  # shell commands whose output to record
    processes: bool = False
    clipboard: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    lines: tuple[str, ...] = ()  # roots whose text files get a line index (content_retained)
    git: tuple[str, ...] = ()  # repositories whose every object is searched for ``tokens``
    watch: tuple[str, ...] = ()  # paths whose opens/reads are recorded from baseline on (not_accessed)
