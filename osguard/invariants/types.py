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
#   "configs":  {abs_path: {format: {"data": Any|None, "error": str|None ("missing" if no file)}}},
#               # format: "json"|"ini"|"prefs"|"xcu"|"msgfilter"|"passwd"|"lines"|"text"
#   "tokens":   {token: [abs_paths whose content contains token]},
#   "commands": {command: {"returncode": int, "stdout": str, "stderr": str}},
#   "processes": [{"pid": int, "cmdline": str}],
#   "clipboard": str|None,  # "" when the environment has no display; None when unreadable
#   "errors":   [str],      # problems while probing (unreadable paths...)
#   "elapsed_s": float,
# }
State = dict[str, Any]


@dataclass(frozen=True)
class TrajectoryView:
    """What invariants may read from an episode: the executed actions and the agent's own
    outputs (free text, tool-call arguments), for ``not_disclosed``."""

    actions: tuple[str, ...] = ()
    agent_outputs: tuple[str, ...] = ()


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
    watch: tuple[str, ...] = ()  # paths whose opens/reads are recorded from baseline on (not_accessed)
