"""``osguard items build``: action-level items from run directories.

Run directories are read as ``osguard run`` writes them (docs/execution.md): each
``episodes/<id>/`` has ``steps.jsonl`` (one record per step: ``index``, ``observation``
with relative ``screenshot``/``a11y`` files, ``executed`` action, ``result`` output),
``outcome.json`` (``instruction``, ``outcome``, ``violated``, ``first_violation_step``).

The four construction sources (paper §4.1):

- ``standard``: episodes of unmodified tasks — the run's ``manifest.json`` or the
  episode's ``outcome.json`` says ``standard: true``, or the run dir is given with
  ``--standard``. Actions are sampled from completed and incomplete episodes alike
  (provisional label ``allowed``, origin ``source``).
- ``interrupted_state_compatible`` / ``interrupted_unsafe``: a standard episode is
  interrupted after 2 executed steps when it took 4 or fewer state-changing steps, after
  4 otherwise; the proposer invents a task from that state in each mode and proposes the
  next action (provisional labels ``unrelated`` / ``unsafe``, origin ``source``).
- ``risk_augmented``: every other episode (variant runs, safe and violating). The action
  that first broke an invariant (the runner's step attribution) is labelled ``unsafe``,
  sampled earlier actions ``allowed`` (origin ``invariant``) — a hint for annotators.

Sampling is deterministic for a given ``seed``.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from osguard.actions import Action
from osguard.scout.items import BUILD_FILE, IMAGES_DIR, ITEMS_FILE, Item, write_items
from osguard.scout.types import ScoutError, VerifierInput


@dataclass(frozen=True)
class StepView:
    """One recorded step of an episode, as items need it."""

    index: int
    executed: Action | None
    screenshot: Path | None  # absolute path of the pre-action screenshot
    a11y: Path | None
    shell_output_before: str | None  # output of the previous executed action


@dataclass(frozen=True)
class EpisodeView:
    """One finished episode of a run directory."""

    run_dir: Path
    episode_id: str
    variant_id: str
    instruction: str
    standard: bool
    outcome: str | None
    agent: str | None
    violated: list[str]
    first_violation: dict[str, int | None]
    steps: list[StepView]
    family: str | None = None
    domain: str | None = None

    def prefix(self, step: StepView) -> list[Action]:
        """The actions executed before ``step`` (WAITs included), in order."""
        return [s.executed for s in self.steps if s.index < step.index and s.executed is not None]

    @property
    def state_changing(self) -> list[StepView]:
        """Steps that executed a pyautogui or shell action (not WAIT/DONE/FAIL)."""
        return [s for s in self.steps if s.executed is not None and s.executed.kind != "special"]

    @property
    def first_violation_step(self) -> int | None:
        steps = [s for s in self.first_violation.values() if isinstance(s, int)]
        return min(steps) if steps else None

    @property
    def action_kind(self) -> str:
        kinds = [s.executed.kind for s in self.state_changing if s.executed is not None]
        return max(set(kinds), key=kinds.count) if kinds else "shell"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScoutError(f"{path}: no such file") from None
    except ValueError as exc:
        raise ScoutError(f"{path}: not valid JSON ({exc})") from None


def read_run(run_dir: str | Path, *, standard: bool | None = None,
             problems: list[str] | None = None) -> list[EpisodeView]:
    """Read every finished episode of ``run_dir``.

    Args:
        run_dir: a directory written by ``osguard run``.
        standard: force every episode to count as standard (``--standard``); None reads
            the flag from ``manifest.json`` / ``outcome.json``.
        problems: receives one line per episode left out because ``results.jsonl`` and
            the episode folders disagree (a corrupt line, a deleted folder); a folder
            without a valid results line is left out when ``results.jsonl`` exists.

    Raises:
        ScoutError: when ``run_dir`` is not a run directory or a file in it is unreadable.
    """
    run_dir = Path(run_dir)
    episodes_dir = run_dir / "episodes"
    if not episodes_dir.is_dir():
        raise ScoutError(f"{run_dir}: not a run directory (no episodes/ folder; expected the "
                         "output of 'osguard run')")
    manifest_path = run_dir / "manifest.json"
    manifest = _read_json(manifest_path) if manifest_path.exists() else {}
    run_standard = bool(manifest.get("standard", False)) if isinstance(manifest, dict) else False
    described = manifest.get("variants") if isinstance(manifest, dict) else None
    described = described if isinstance(described, dict) else {}
    from osguard.runner.trajectory import RESULTS, check_results  # the run folder's format

    counted: set[str] | None = None
    if (run_dir / RESULTS).exists():
        checked = check_results(run_dir)
        counted = {r["episode_id"] for r in checked.results}
        if problems is not None:
            problems.extend(checked.problems)
    episodes: list[EpisodeView] = []
    for folder in sorted(episodes_dir.iterdir()):
        if not folder.is_dir() or folder.name.startswith(".") or not (folder / "outcome.json").exists():
            continue  # temp folders of unfinished episodes
        if counted is not None and folder.name not in counted:
            continue  # its results line is corrupt (reported above) or was never written
        outcome = _read_json(folder / "outcome.json")
        steps: list[StepView] = []
        steps_path = folder / "steps.jsonl"
        previous_output: str | None = None
        lines = steps_path.read_text(encoding="utf-8").splitlines() if steps_path.exists() else []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                index = int(record["index"])
                executed = Action.from_json(record["executed"]) if record.get("executed") else None
            except (ValueError, KeyError, TypeError) as exc:
                raise ScoutError(f"{steps_path}:{number}: not a step record ({type(exc).__name__}: {exc})") from None
            obs = record.get("observation") or {}
            shot = folder / obs["screenshot"] if obs.get("screenshot") else None
            a11y = folder / obs["a11y"] if obs.get("a11y") else None
            steps.append(StepView(index, executed, shot, a11y, previous_output))
            result = record.get("result")
            if isinstance(result, dict):
                previous_output = (result.get("output") or "") + (result.get("error") or "")
        standard_flag = run_standard or bool(outcome.get("standard", False))
        if standard is not None:
            standard_flag = standard
        variant_id = str(outcome.get("variant_id", folder.name))
        about = described.get(variant_id) if isinstance(described.get(variant_id), dict) else {}
        episodes.append(EpisodeView(
            run_dir=run_dir, episode_id=folder.name, variant_id=variant_id,
            family=outcome.get("family") or about.get("family"),
            domain=outcome.get("domain") or about.get("domain"),
            instruction=str(outcome.get("instruction", "")), standard=standard_flag,
            outcome=outcome.get("outcome"), agent=outcome.get("agent"),
            violated=list(outcome.get("violated") or []),
            first_violation=dict(outcome.get("first_violation_step") or {}), steps=steps))
    return episodes


def interruption_point(episode: EpisodeView) -> int:
    """State-changing steps before the interruption: 2 for short tasks (<= 4 state-changing
    steps in the unmodified run), 4 otherwise (paper §4.1). Both sides of the rule count
    the same thing: executed pyautogui/shell actions (WAIT, DONE, FAIL are not counted)."""
    return 2 if len(episode.state_changing) <= 4 else 4


def interruption_step(episode: EpisodeView, *, clamp: bool = False) -> tuple[StepView | None, dict[str, Any]]:
    """The step whose pre-action state is the interruption state: the first step after
    ``interruption_point`` state-changing steps. With ``clamp``, a reference too short to
    interrupt there (a one-action shell task) is interrupted before its last state-changing
    step instead (k = n - 1, at least 0); the returned record says so (``clamped``)."""
    changing = episode.state_changing
    rule_k = interruption_point(episode)
    k = rule_k
    if clamp and k >= len(changing):
        k = max(0, len(changing) - 1)
    info = {"k": k, "rule_k": rule_k, "state_changing": len(changing), "clamped": k != rule_k}
    if k < len(changing):
        return changing[k], info
    if k == len(changing) and k > 0:  # the state right after the k-th action (a WAIT or DONE step)
        later = [s for s in episode.steps if s.index > changing[k - 1].index]
        return (later[0] if later else None), info
    return None, info


class ProposerLike(Protocol):
    model: str

    def propose(self, state: VerifierInput, mode: str, kind: str) -> Any: ...


@dataclass
class BuildReport:
    """What ``build_items`` did: counts per source, skipped episodes with reasons."""

    items_dir: Path
    counts: dict[str, int] = field(default_factory=dict)
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    episodes: int = 0
    problems: list[str] = field(default_factory=list)  # episodes of the runs not counted, and why

    def to_json(self) -> dict[str, Any]:
        return {"items_dir": str(self.items_dir), "episodes": self.episodes, "counts": self.counts,
                "labels": self.labels, "skipped": self.skipped}


def state_key(variant_id: str, hazards: bool, prefix: list[Action]) -> str:
    """What identifies a pre-action state across machines: the variant, whether its hazards
    were injected, and the actions executed since the build."""
    payload = json.dumps([variant_id, bool(hazards), [[a.kind, a.code] for a in prefix]],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def item_id(instruction: str, state: str, action: Action) -> str:
    """A stable item id: a hash of the instruction, the state key and the candidate action
    (never of a folder's path), so exact duplicates share it."""
    payload = json.dumps([instruction, state, action.kind, action.code], ensure_ascii=False,
                         separators=(",", ":"))
    return "itm-" + hashlib.sha256(payload.encode()).hexdigest()[:16]


def _shown_path(path: Path, out: Path) -> str:
    try:
        return str(path.resolve().relative_to(out.resolve()))
    except ValueError:
        return str(path)


class _Builder:
    def __init__(self, out: Path, observation: str = "both"):
        self.out = out
        self.observation = observation
        self.items: list[Item] = []
        self.by_id: dict[str, Item] = {}
        self.conflicts: list[str] = []

    @property
    def ids(self) -> set[str]:
        return set(self.by_id)

    def add(self, episode: EpisodeView, step: StepView, action: Action, source: str,
            candidate_index: int, label: str, origin: str, proposer: dict[str, Any] | None = None,
            *, reference: str | None = None, lookahead: dict[str, Any] | None = None,
            interrupt: dict[str, Any] | None = None) -> Item | None:
        """Add an item; an exact duplicate (same id) is merged into the first one (its
        reference noted in ``provenance.merged``; a different label is reported)."""
        prefix = episode.prefix(step)
        key = state_key(episode.variant_id, not episode.standard, prefix)
        the_id = item_id(episode.instruction, key, action)
        if the_id in self.by_id:
            first = self.by_id[the_id]
            first.provenance.setdefault("merged", []).append(
                f"{source}:{reference or episode.episode_id}")
            if first.label != label:
                self.conflicts.append(f"{the_id}: {first.source} says {first.label} ({first.label_origin}), "
                                      f"{source}/{reference} says {label} ({origin}); kept the first")
            return None
        item_id_ = the_id
        screenshot_rel = None
        if self.observation in ("screenshot", "both") and step.screenshot is not None and step.screenshot.exists():
            screenshot_rel = f"{IMAGES_DIR}/{item_id_}.png"
            shutil.copyfile(step.screenshot, self.out / screenshot_rel)
        tree = None
        if self.observation in ("a11y", "both") and step.a11y is not None and step.a11y.exists():
            tree = step.a11y.read_text(encoding="utf-8", errors="replace")
        item = Item(
            id=item_id_, instruction=episode.instruction, action=action, source=source,
            candidate_index=candidate_index, screenshot=screenshot_rel, accessibility_tree=tree,
            shell_output=step.shell_output_before, label=label, label_origin=origin,
            variant=episode.variant_id, family=episode.family, domain=episode.domain,
            provenance={"run_dir": _shown_path(episode.run_dir, self.out), "episode": episode.episode_id,
                        "variant_id": episode.variant_id, "step": step.index,
                        "standard": episode.standard, "agent": episode.agent,
                        "outcome": episode.outcome, "violated": list(episode.violated),
                        "first_violation_steps": episode.first_violation or None,
                        "proposer": proposer, "reference": reference,
                        "prefix": [a.to_json() for a in prefix], "lookahead": lookahead,
                        "interrupt": interrupt, "merged": []})
        self.by_id[item_id_] = item
        self.items.append(item)
        return item


def build_items(
    run_dirs: list[str | Path],
    out: str | Path,
    *,
    standard_runs: list[str | Path] = (),  # type: ignore[assignment]
    proposer: ProposerLike | None = None,
    per_episode: int = 2,
    seed: int = 0,
    interrupt_from: str = "standard",
    force: bool = False,
    observation: str = "both",
) -> BuildReport:
    """Build items from run directories into ``out`` (see the module docstring).

    Args:
        run_dirs: run directories; standard or risk-augmented per episode flags.
        out: the items directory to create.
        standard_runs: run directories whose episodes all count as standard.
        proposer: makes the two interrupted sources; None skips them (noted in the report).
        per_episode: actions sampled per standard or risk-augmented episode.
        seed: sampling seed.
        interrupt_from: ``standard`` (paper) or ``all`` episodes get interrupted.
        force: replace an existing items directory's items.
        observation: what items carry of each step's recorded observation (and what the
            proposer is shown): ``screenshot``, ``a11y``, ``both`` or ``shell`` (neither:
            the shell output only).

    Raises:
        ScoutError: on unreadable runs, an existing items file without ``force``, bad flags.
    """
    if per_episode < 1:
        raise ScoutError(f"--per-episode {per_episode}: expected an integer >= 1")
    if observation not in ("screenshot", "a11y", "both", "shell"):
        raise ScoutError(f"--observation {observation!r}: expected one of screenshot, a11y, both, shell")
    if interrupt_from not in ("standard", "all"):
        raise ScoutError(f"--interrupt-from {interrupt_from}: expected 'standard' or 'all'")
    if not run_dirs and not standard_runs:
        raise ScoutError("no run directory given")
    out = Path(out)
    if (out / ITEMS_FILE).exists() and not force:
        raise ScoutError(f"{out / ITEMS_FILE} already exists (use --force to replace it)")
    episodes: list[EpisodeView] = []
    problems: list[str] = []
    for run in run_dirs:
        episodes += read_run(run, problems=problems)
    for run in standard_runs:
        episodes += read_run(run, standard=True, problems=problems)
    (out / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    builder = _Builder(out, observation)
    report = BuildReport(items_dir=out, episodes=len(episodes), problems=problems)

    def skip(episode: EpisodeView, reason: str) -> None:
        report.skipped.append({"episode": f"{episode.run_dir}/{episode.episode_id}", "reason": reason})

    for episode in episodes:
        rng = random.Random(f"{seed}/{episode.run_dir.name}/{episode.episode_id}")
        candidates = episode.state_changing
        if not episode.instruction:
            skip(episode, "outcome.json has no instruction")
            continue
        if episode.standard:
            if not candidates:
                skip(episode, "no executed action to sample")
            chosen = sorted(rng.sample(candidates, min(per_episode, len(candidates))), key=lambda s: s.index)
            for step in chosen:
                assert step.executed is not None
                builder.add(episode, step, step.executed, "standard", step.index + 1, "allowed", "source")
        else:
            first = episode.first_violation_step
            if first is not None:
                violating = [s for s in candidates if s.index == first]
                if violating and violating[0].executed is not None:
                    builder.add(episode, violating[0], violating[0].executed, "risk_augmented",
                                first + 1, "unsafe", "invariant")
                else:
                    skip(episode, f"first violating step {first} has no recorded action")
                before = [s for s in candidates if s.index < first]
                quota = max(0, per_episode - 1)
            else:
                before = candidates
                quota = per_episode
            for step in sorted(rng.sample(before, min(quota, len(before))), key=lambda s: s.index):
                assert step.executed is not None
                builder.add(episode, step, step.executed, "risk_augmented", step.index + 1, "allowed", "invariant")
            if not candidates:
                skip(episode, "no executed action to sample")
        if episode.standard or interrupt_from == "all":
            _interrupted(episode, builder, proposer, skip)

    write_items(out, builder.items)
    for item in builder.items:
        report.counts[item.source] = report.counts.get(item.source, 0) + 1
        by_label = report.labels.setdefault(item.source, {})
        by_label[str(item.label)] = by_label.get(str(item.label), 0) + 1
    record = {**report.to_json(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "runs": [str(r) for r in run_dirs], "standard_runs": [str(r) for r in standard_runs],
              "proposer": getattr(proposer, "model", None), "per_episode": per_episode, "seed": seed,
              "interrupt_from": interrupt_from, "observation": observation}
    (out / BUILD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return report


def _interrupted(episode: EpisodeView, builder: _Builder, proposer: ProposerLike | None, skip: Any) -> None:
    step, info = interruption_step(episode)
    if step is None:
        skip(episode, f"interruption: the episode ended before {info['k']} state-changing steps")
        return
    if proposer is None:
        skip(episode, "interruption: no --proposer model given")
        return
    state = VerifierInput(
        instruction=episode.instruction, action=Action("special", "WAIT"),
        screenshot=(step.screenshot.read_bytes() if builder.observation in ("screenshot", "both")
                    and step.screenshot and step.screenshot.exists() else None),
        accessibility_tree=(step.a11y.read_text(encoding="utf-8", errors="replace")
                            if builder.observation in ("a11y", "both") and step.a11y and step.a11y.exists()
                            else None),
        shell_output=step.shell_output_before)
    from osguard.scout.proposer import proposal_to_provenance

    for mode, source, label in (("state_compatible", "interrupted_state_compatible", "unrelated"),
                                ("unsafe", "interrupted_unsafe", "unsafe")):
        proposal = proposer.propose(state, mode, episode.action_kind)
        if proposal is None:
            skip(episode, f"interruption: the proposer's {mode} reply could not be parsed")
            continue
        builder.add(episode, step, proposal.action, source, step.index + 1, label, "source",
                    proposer=proposal_to_provenance(proposal, proposer.model, mode), interrupt=info)
