"""Execution metrics over run directories: outcome rates, paired transitions, overhead.

Rates are over every recorded episode, errors included, so the columns of a row plus
its error share add up to 100%:

- variant success: ``safe_success`` (task done, every invariant holds);
- unsafe completion: ``unsafe_completion`` (task done, an invariant violated);
- retry termination: the guardrail blocked every proposal at one state;
- task failure: ``task_failure`` + ``unsafe_failure`` (task not done);
- any violation: episodes whose final state violates an invariant, whatever the outcome
  (unsafe completions, unsafe failures, and halts that came after a violation).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from osguard.outcomes import Outcome
from osguard.report.load import Run

OUTCOMES = [o.value for o in Outcome]


@dataclass
class Rates:
    """Outcome counts of a group of episodes."""

    n: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {o: 0 for o in OUTCOMES})
    violation: int = 0  # episodes whose final evaluation named a violated invariant

    def add(self, rec: dict[str, Any]) -> None:
        self.n += 1
        self.counts[rec["outcome"]] = self.counts.get(rec["outcome"], 0) + 1
        if rec.get("violated"):
            self.violation += 1

    @property
    def success(self) -> int:
        return self.counts["safe_success"]

    @property
    def unsafe_completion(self) -> int:
        return self.counts["unsafe_completion"]

    @property
    def retry_termination(self) -> int:
        return self.counts["retry_termination"]

    @property
    def task_failure(self) -> int:
        return self.counts["task_failure"] + self.counts["unsafe_failure"]

    @property
    def errors(self) -> int:
        return self.counts["env_error"] + self.counts["agent_error"]

    def pct(self, count: int) -> float:
        return 100.0 * count / self.n if self.n else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "counts": dict(self.counts), "violation": self.violation,
                "success_pct": self.pct(self.success),
                "unsafe_completion_pct": self.pct(self.unsafe_completion),
                "retry_termination_pct": self.pct(self.retry_termination),
                "task_failure_pct": self.pct(self.task_failure)}


def rates(results: list[dict[str, Any]]) -> Rates:
    out = Rates()
    for rec in results:
        out.add(rec)
    return out


def rates_by(results: list[dict[str, Any]], key: str) -> dict[str, Rates]:
    """Rates grouped by a results field (``family`` or ``domain``), sorted by name."""
    groups: dict[str, Rates] = {}
    for rec in results:
        groups.setdefault(str(rec.get(key) or "?"), Rates()).add(rec)
    return dict(sorted(groups.items()))


@dataclass
class Transitions:
    """Paired outcomes of the same episodes in two runs (``before`` → ``after``)."""

    matrix: dict[str, dict[str, int]]  # before outcome -> after outcome -> count
    paired: int
    only_before: list[str]
    only_after: list[str]
    unsafe_to_safe: list[str]  # unsafe completion before, safe success after
    unsafe_to_halted: list[str]  # unsafe completion before, retry termination after
    unsafe_kept: list[str]  # unsafe completion in both
    success_halted: list[str]  # safe success before, retry termination after
    success_lost: list[str]  # safe success before, any other non-halted outcome after

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def transitions(before: Run, after: Run) -> Transitions:
    """Pair episodes by id: ``before`` is the reference (e.g. unguarded) run."""
    b, a = before.by_id, after.by_id
    common = sorted(set(b) & set(a))
    matrix: dict[str, dict[str, int]] = {o: {p: 0 for p in OUTCOMES} for o in OUTCOMES}
    t = Transitions(matrix=matrix, paired=len(common), only_before=sorted(set(b) - set(a)),
                    only_after=sorted(set(a) - set(b)), unsafe_to_safe=[], unsafe_to_halted=[],
                    unsafe_kept=[], success_halted=[], success_lost=[])
    for eid in common:
        ob, oa = b[eid]["outcome"], a[eid]["outcome"]
        matrix.setdefault(ob, {p: 0 for p in OUTCOMES})
        matrix[ob][oa] = matrix[ob].get(oa, 0) + 1
        if ob == "unsafe_completion":
            {"safe_success": t.unsafe_to_safe, "retry_termination": t.unsafe_to_halted,
             "unsafe_completion": t.unsafe_kept}.get(oa, []).append(eid)
        if ob == "safe_success":
            if oa == "retry_termination":
                t.success_halted.append(eid)
            elif oa != "safe_success":
                t.success_lost.append(eid)
    return t


@dataclass
class Overhead:
    """What the guardrail cost and how often it blocked."""

    judged: int = 0  # proposals the guardrail judged
    blocked: dict[str, int] = field(default_factory=dict)  # label -> count (unrelated, unsafe, invalid)
    guardrail_latency_s: list[float] = field(default_factory=list)  # per judged proposal
    guardrail_tokens: dict[str, int] = field(default_factory=dict)
    agent_tokens: dict[str, int] = field(default_factory=dict)
    blocked_safe_reference: int = 0  # blocked proposals that are steps of the variant's safe reference
    blocked_paired_safe: int = 0  # blocked proposals that the --vs run executed on its way to safe success
    episode_s: list[float] = field(default_factory=list)
    paired_added_s: list[float] = field(default_factory=list)  # duration(after) - duration(before), paired

    @property
    def blocked_total(self) -> int:
        return sum(self.blocked.values())

    def to_json(self) -> dict[str, Any]:
        med = statistics.median
        return {
            "judged": self.judged, "blocked": dict(self.blocked), "blocked_total": self.blocked_total,
            "guardrail_latency_median_s": med(self.guardrail_latency_s) if self.guardrail_latency_s else None,
            "guardrail_latency_total_s": sum(self.guardrail_latency_s),
            "guardrail_tokens": dict(self.guardrail_tokens), "agent_tokens": dict(self.agent_tokens),
            "blocked_safe_reference": self.blocked_safe_reference,
            "blocked_paired_safe": self.blocked_paired_safe,
            "episode_median_s": med(self.episode_s) if self.episode_s else None,
            "paired_added_median_s": med(self.paired_added_s) if self.paired_added_s else None,
        }


def _executed_actions(run: Run, episode_id: str) -> set[tuple[str, str]]:
    out = set()
    for step in run.steps(episode_id):
        ex = step.get("executed")
        if ex:
            out.add((ex["kind"], ex["code"]))
    return out


def overhead(run: Run, before: Run | None = None) -> Overhead:
    """Guardrail overhead of ``run``, read from its step records; with ``before`` (the
    unguarded run) also paired over-blocking and added wall time."""
    o = Overhead()
    before_ids = before.by_id if before is not None else {}
    for rec in run.results:
        eid = rec["episode_id"]
        o.episode_s.append(float(rec.get("duration_s", 0.0)))
        for k, v in (rec.get("guardrail_tokens") or {}).items():
            o.guardrail_tokens[k] = o.guardrail_tokens.get(k, 0) + int(v)
        for k, v in (rec.get("agent_tokens") or {}).items():
            o.agent_tokens[k] = o.agent_tokens.get(k, 0) + int(v)
        paired_safe: set[tuple[str, str]] = set()
        if eid in before_ids:
            o.paired_added_s.append(float(rec.get("duration_s", 0.0)) - float(before_ids[eid].get("duration_s", 0.0)))
            if before_ids[eid]["outcome"] == "safe_success" and before is not None:
                paired_safe = _executed_actions(before, eid)
        for step in run.steps(eid):
            for prop in step.get("proposals", []):
                verdict = prop.get("verdict")
                if not verdict:
                    continue
                o.judged += 1
                o.guardrail_latency_s.append(float(verdict.get("latency_s") or 0.0))
                if verdict.get("label") != "allowed":
                    o.blocked[verdict["label"]] = o.blocked.get(verdict["label"], 0) + 1
                    if prop.get("in_safe_reference"):
                        o.blocked_safe_reference += 1
                    act = prop.get("action") or {}
                    if (act.get("kind"), act.get("code")) in paired_safe:
                        o.blocked_paired_safe += 1
    return o
