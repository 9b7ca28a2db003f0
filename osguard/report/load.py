"""Reading run directories written by ``osguard run`` (see docs/execution.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from osguard.errors import OsguardError


class ReportError(OsguardError):
    """Raised when a run directory cannot be read (missing, no manifest, bad JSON)."""


@dataclass
class Run:
    """A run directory: its manifest and one results record per finished episode."""

    path: Path
    manifest: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # results lines not counted, and why

    @property
    def label(self) -> str:
        """A short name: the agent, plus the guardrail when there is one."""
        agent = self.manifest.get("agent") or "?"
        guard = self.manifest.get("guardrail")
        return f"{agent} + {guard}" if guard else f"{agent} (unguarded)"

    @property
    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["episode_id"]: r for r in self.results}

    def episode_dir(self, episode_id: str) -> Path:
        return self.path / "episodes" / episode_id

    def outcome_doc(self, episode_id: str) -> dict[str, Any]:
        """The episode's outcome.json ({} when missing)."""
        path = self.episode_dir(episode_id) / "outcome.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def steps(self, episode_id: str) -> Iterator[dict[str, Any]]:
        """The episode's step records, in order (a torn last line is skipped)."""
        path = self.episode_dir(episode_id) / "steps.jsonl"
        if not path.exists():
            return
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue


def load_run(run_dir: str | Path) -> Run:
    """Load a run directory.

    Raises:
        ReportError: when it is not a run directory.
    """
    path = Path(run_dir)
    manifest_path = path / "manifest.json"
    if not path.is_dir():
        raise ReportError(f"{path}: no such run directory")
    if not manifest_path.exists():
        raise ReportError(f"{path}: not a run directory (no manifest.json); expected the --out of `osguard run`")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:  # UnicodeDecodeError is a ValueError
        raise ReportError(f"{manifest_path}: not valid JSON: {exc}") from None
    from osguard.runner.trajectory import check_results

    checked = check_results(path)
    return Run(path=path, manifest=manifest, results=sorted(checked.results, key=lambda r: r["episode_id"]),
               problems=checked.problems)
