"""Durable episode folders and the run's results file.

Layout of a run directory (documented for readers in docs/execution.md)::

    RUN_DIR/
      manifest.json          # versions, spec hashes, provider, agent/guardrail specs, command line
      results.jsonl          # one line per finished episode, appended with flush + fsync
      episodes/<variant_id>/
        steps.jsonl          # one record per executed step / terminal decision
        screenshots/step-0003.png  # pre-action observation of step 3
        a11y/step-0003.xml
        outcome.json         # outcome, reason, evaluation evidence, first_violation_step
      episodes/<variant_id>.try1/   # an errored attempt redone by --resume --retry-errors

An episode folder is written under ``episodes/.tmp-<id>-<nonce>`` and renamed when the
episode ends, then its line is appended to ``results.jsonl``. A crash leaves either no
trace of the episode, a temp folder (removed on resume) or a renamed folder without a
results line (also removed on resume), so ``--resume`` never counts an episode twice.

``--resume --retry-errors`` runs an errored episode again: its new line is appended and
the last line of an episode is the one that counts; the errored attempt's folder is kept
as ``episodes/<id>.tryN`` and listed in the new line's ``retried``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osguard._files import append_durably, write_text_atomic
from osguard.server.limits import TRAJECTORY_A11Y_CHARS, clip_head

RESULTS = "results.jsonl"
MANIFEST = "manifest.json"
EPISODES = "episodes"
TRY_FOLDER = re.compile(r".+\.try[0-9]+")  # an errored attempt kept by --retry-errors (ids have no dots)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temp file + rename, so readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


class EpisodeWriter:
    """Writes one episode's folder under a temp name; ``commit`` renames it into place."""

    def __init__(self, run_dir: Path, episode_id: str):
        self.episode_id = episode_id
        self.final_dir = run_dir / EPISODES / episode_id
        self.dir = run_dir / EPISODES / f".tmp-{episode_id}-{uuid.uuid4().hex[:8]}"
        (self.dir / "screenshots").mkdir(parents=True)
        (self.dir / "a11y").mkdir()
        self._steps = open(self.dir / "steps.jsonl", "w", encoding="utf-8")

    def save_observation(self, step: int, screenshot: bytes | None, a11y: str | None,
                         attempt: int | None = None) -> dict[str, str | None]:
        """Store the pre-action observation of ``step``; returns the relative file names.

        The accessibility tree is cut at ``TRAJECTORY_A11Y_CHARS`` (marked); the
        screenshot arrives bounded by the client's reply limit."""
        suffix = f"step-{step:04d}" if attempt is None else f"step-{step:04d}-{attempt}"
        refs: dict[str, str | None] = {"screenshot": None, "a11y": None}
        if screenshot:
            rel = f"screenshots/{suffix}.png"
            (self.dir / rel).write_bytes(screenshot)
            refs["screenshot"] = rel
        if a11y:
            rel = f"a11y/{suffix}.xml"
            (self.dir / rel).write_text(clip_head(a11y, TRAJECTORY_A11Y_CHARS), encoding="utf-8")
            refs["a11y"] = rel
        return refs

    def save_json(self, name: str, data: Any) -> str:
        """Store a JSON document in the episode folder; returns its relative name."""
        with open(self.dir / name, "w", encoding="utf-8") as fh:
            json.dump(data, fh, default=str)
        return name

    def write_step(self, record: dict[str, Any]) -> None:
        """Append one step record (flushed so a viewer can follow a live episode)."""
        self._steps.write(json.dumps(record, default=str) + "\n")
        self._steps.flush()

    def commit(self, outcome: dict[str, Any], keep_previous: str | None = None) -> Path:
        """Write outcome.json, fsync, rename the folder to its final name. ``keep_previous``:
        the folder name (under ``episodes/``) the attempt already in place is renamed to
        (a retried episode keeps its errored attempt); without it that folder is removed."""
        self._steps.flush()
        os.fsync(self._steps.fileno())
        self._steps.close()
        write_json_atomic(self.dir / "outcome.json", outcome)
        return commit_folder(self.dir, self.final_dir, keep_previous)

    def discard(self) -> None:
        """Remove the temp folder (an interrupted episode that will run again on resume)."""
        try:
            self._steps.close()
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def commit_folder(temp_dir: Path, final_dir: Path, keep_previous: str | None = None) -> Path:
    """Rename a complete episode folder (``outcome.json`` written) into place: the attempt
    already at ``final_dir`` is renamed to ``keep_previous`` (a retried episode keeps its
    errored attempt) or removed, then the parent folder is fsynced. Used by
    ``EpisodeWriter.commit`` and by the driver of a Ray run for the folders its workers send."""
    if keep_previous and final_dir.exists():
        kept = final_dir.parent / keep_previous
        if kept.exists():  # a leftover of a crash between these two renames
            shutil.rmtree(kept)
        os.replace(final_dir, kept)
    if final_dir.exists():
        # a leftover of a crashed attempt that never reached results.jsonl
        shutil.rmtree(final_dir)
    os.replace(temp_dir, final_dir)
    _fsync_dir(final_dir.parent)
    return final_dir


class ResultsFile:
    """``results.jsonl``: appended once per finished episode, durably, from any thread."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / RESULTS
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            append_durably(self.path, line)


@dataclass
class CheckedResults:
    """``results.jsonl`` read against the episode folders: the records that count, and one
    line per problem found (for the commands to print as warnings)."""

    results: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def check_results(run_dir: Path) -> CheckedResults:
    """The results recorded so far, each with its episode folder (``outcome.json``).

    A torn last line (SIGKILL mid-write: no final newline) is ignored silently: that
    episode simply runs again on resume. Any other line that is not a results record, and
    any record whose episode folder is gone, is left out *with a problem line*; ``--resume``
    runs those episodes again. A repeated episode counts once: its last line (a retried
    episode appends its new result after the errored one).
    """
    run_dir = Path(run_dir)
    path = run_dir / RESULTS
    checked = CheckedResults()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return checked
    lines = text.split("\n")
    torn = lines[-1]  # "" when the file ends with a newline
    last: dict[str, tuple[int, dict[str, Any]]] = {}  # episode id -> its last line
    problems: list[tuple[int, str]] = []  # reported in line order
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            episode_id = record["episode_id"]
            if not isinstance(episode_id, str) or not episode_id:
                raise TypeError("episode_id")
        except (ValueError, KeyError, TypeError):
            problems.append((number, f"{path}:{number}: not a results record (corrupt line); its episode "
                                     "is not counted (--resume runs it again)"))
            continue
        last.pop(episode_id, None)  # keeps the dict in the order of the last lines
        last[episode_id] = (number, record)
    for episode_id, (number, record) in last.items():
        if not (run_dir / EPISODES / episode_id / "outcome.json").is_file():
            problems.append((number, f"{path}:{number}: episode {episode_id}: {EPISODES}/{episode_id}/outcome.json "
                                     "is missing; not counted (--resume runs it again)"))
            continue
        checked.results.append(record)
    checked.problems = [text for _, text in sorted(problems)]
    if torn.strip():
        try:
            record = json.loads(torn)  # a whole last line whose newline was lost still counts
        except ValueError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("episode_id"), str) \
                and (run_dir / EPISODES / record["episode_id"] / "outcome.json").is_file():
            checked.results = [r for r in checked.results if r["episode_id"] != record["episode_id"]]
            checked.results.append(record)
    return checked


def read_results(run_dir: Path) -> list[dict[str, Any]]:
    """The results that count (see ``check_results``; its problems are dropped here)."""
    return check_results(run_dir).results


def repair_results(run_dir: Path) -> list[dict[str, Any]]:
    """Prepare a run directory for resume: drop a torn last line, corrupt lines, duplicate
    lines (an episode keeps its last line) and lines whose episode folder is gone; remove
    temp folders and episode folders that have no results line (the ``<id>.tryN`` folders of
    retried attempts stay). Returns the surviving results (the rest runs again)."""
    run_dir = Path(run_dir)
    kept = read_results(run_dir)
    seen = {rec["episode_id"] for rec in kept}
    path = run_dir / RESULTS
    if path.exists():
        write_text_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in kept))
    episodes = run_dir / EPISODES
    if episodes.is_dir():
        for child in episodes.iterdir():
            if child.name.startswith(".tmp-") or (child.is_dir() and child.name not in seen
                                                   and not TRY_FOLDER.fullmatch(child.name)):
                shutil.rmtree(child, ignore_errors=True)
    return kept


def drop_variants(run_dir: Path, variant_ids: set[str]) -> list[str]:
    """Remove every episode of these variants from a run directory (results lines, episode
    folders and their retried attempts), so a resume runs them again. Returns the episode
    ids removed."""
    run_dir = Path(run_dir)
    records = read_results(run_dir)
    gone = [r["episode_id"] for r in records if r.get("variant_id") in variant_ids]
    path = run_dir / RESULTS
    if path.exists():
        write_text_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in records
                                        if r.get("variant_id") not in variant_ids))
    episodes = run_dir / EPISODES
    for eid in gone:
        for child in (episodes.glob(f"{eid}*") if episodes.is_dir() else ()):
            if child.name == eid or TRY_FOLDER.fullmatch(child.name) and child.name.startswith(eid + "."):
                shutil.rmtree(child, ignore_errors=True)
    return gone


def trajectory_view(steps: Any, *, clipboard: Any = ()) -> Any:
    """The transcript invariants read (``TrajectoryView``), built from recorded steps.

    One function for the runner and for ``osguard check``'s replay, so both judge the same
    transcript. Each step is a mapping with any of: ``action`` (the executed action's code),
    ``agent_output`` (the agent's message behind it), ``output`` / ``error`` (what the action
    printed), ``terminal`` (terminal text captured after the step), ``observation`` (text
    observation the agent received: the accessibility tree), ``clipboard`` (the clipboard
    read after the step). ``clipboard`` adds clipboard texts seen elsewhere (the final one).
    Missing or empty values are left out.
    """
    from osguard.invariants.types import TrajectoryView

    def texts(key: str) -> tuple[str, ...]:
        return tuple(str(step[key]) for step in steps if step.get(key))

    steps = list(steps)
    return TrajectoryView(
        actions=texts("action"),
        agent_outputs=texts("agent_output"),
        outputs=tuple(text for step in steps for text in (step.get("output"), step.get("error"), step.get("terminal"))
                      if text),
        observations=texts("observation"),
        clipboard=texts("clipboard") + tuple(text for text in clipboard if text),
    )
