"""Reference checks: the benchmark checks itself.

Every variant ships reference action lists written as an agent would issue them. For each
reference ``check_variants`` builds the variant in a fresh environment, replays the actions,
ends the episode as the runner does (``finish_episode``: postconfig, final probe, augmented
evaluator), then compares with what the reference promises:

- ``safe``   → ``safe_success`` (task done, every invariant holds);
- ``unsafe`` → ``unsafe_completion`` with EXACTLY the declared invariants violated;
- ``noop``   → ``task_failure`` with every invariant holding;
- ``standard`` → the safe reference on the base task alone (setup, no hazards, judged by
  success only, as ``osguard run --standard`` judges it) → ``safe_success``: the base task
  is solvable;
- each of the variant's ``alternatives`` → its kind's outcome (safe → ``safe_success``;
  unsafe → ``unsafe_completion`` with EXACTLY its ``violates``; overcautious →
  ``task_failure`` with every invariant holding). Their rows are labelled ``KIND:NAME``.

Variants whose ``requires`` the provider lacks are skipped (not passed), with the reason.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from osguard.errors import OsguardError

if TYPE_CHECKING:
    from osguard.actions import Action
    from osguard.evaluators import EvaluationResult
    from osguard.providers.base import Capabilities, Provider
    from osguard.spec.model import Variant

REFERENCES: tuple[str, ...] = ("safe", "unsafe", "noop", "standard", "alternatives")
EXPECTED_OUTCOME = {"safe": "safe_success", "unsafe": "unsafe_completion", "noop": "task_failure",
                    "standard": "safe_success"}


@dataclass(frozen=True)
class CheckRow:
    """The result of replaying one reference of one variant.

    Attributes:
        variant_id: the variant.
        reference: ``safe``, ``unsafe``, ``noop``, ``standard`` or ``KIND:NAME`` (an alternative).
        status: ``pass``, ``fail`` (outcome or violations differ), ``skip`` (requirements
            unmet) or ``error`` (the build or the environment failed).
        expected_outcome / outcome: what the reference promises / what the evaluator said.
        expected_violations / violated: invariant ids promised / found violated.
        detail: one line: the skip reason, the mismatch, or the error.
        evidence: for mismatches, the verdicts and success detail that explain them.
        actions: per replayed action ``{action, returncode, output}`` (output truncated).
        elapsed_s: wall time of build + replay + evaluation.
        first_attempts: with ``retries``, what each earlier attempt of this row gave
            (``status: detail``) before the one reported; empty when the first attempt stands.
        freeze_error: the evaluation ran on an unfrozen commit of the environment (docker:
            the pause was refused every time); why. None when it was frozen or needed no freeze.
    """

    variant_id: str
    reference: str
    status: str
    expected_outcome: str
    outcome: str | None = None
    expected_violations: tuple[str, ...] = ()
    violated: tuple[str, ...] = ()
    detail: str = ""
    evidence: tuple[dict[str, Any], ...] = ()
    actions: tuple[dict[str, Any], ...] = ()
    elapsed_s: float = 0.0
    variant_version: int | None = None
    spec_hash: str = ""
    first_attempts: tuple[str, ...] = ()
    freeze_error: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_json(self) -> dict[str, Any]:
        return {
            "variant_id": self.variant_id,
            "variant_version": self.variant_version,
            "spec_hash": self.spec_hash,
            "reference": self.reference,
            "status": self.status,
            "expected_outcome": self.expected_outcome,
            "outcome": self.outcome,
            "expected_violations": list(self.expected_violations),
            "violated": list(self.violated),
            "detail": self.detail,
            "evidence": list(self.evidence),
            "actions": list(self.actions),
            "elapsed_s": self.elapsed_s,
            "first_attempts": list(self.first_attempts),
            "freeze_error": self.freeze_error,
        }


@dataclass
class _Job:
    variant: "Variant"
    reference: str
    actions: tuple["Action", ...]
    expected_violations: tuple[str, ...] = field(default_factory=tuple)
    expected_outcome: str = ""
    hazards: bool = True  # False: the base task alone (the ``standard`` row)

    def __post_init__(self) -> None:
        if not self.expected_outcome:
            self.expected_outcome = EXPECTED_OUTCOME[self.reference]


def reference_jobs(variant: "Variant", references: Iterable[str] = REFERENCES) -> list[_Job]:
    """What to replay for a variant, in safe/unsafe/noop/standard/alternatives order.

    ``references`` holds selectors: ``safe``, ``unsafe``, ``noop``, ``standard``,
    ``alternatives`` (all of them) or the name of one alternative.
    """
    wanted = set(references)
    jobs: list[_Job] = []
    refs = variant.references
    if "safe" in wanted and refs.safe:
        jobs.append(_Job(variant, "safe", tuple(refs.safe)))
    if "unsafe" in wanted and refs.unsafe is not None:
        jobs.append(_Job(variant, "unsafe", tuple(refs.unsafe.actions), tuple(refs.unsafe.violates)))
    if "noop" in wanted and refs.noop is not None:
        jobs.append(_Job(variant, "noop", tuple(refs.noop)))
    if "standard" in wanted and refs.safe:
        jobs.append(_Job(variant, "standard", tuple(refs.safe), hazards=False))
    for alt in variant.alternatives:
        if "alternatives" in wanted or alt.name in wanted:
            jobs.append(_Job(variant, f"{alt.kind}:{alt.name}", tuple(alt.actions), tuple(alt.violates),
                             expected_outcome=alt.expected_outcome))
    return jobs


def _row(job: _Job, status: str, **fields: Any) -> CheckRow:
    return CheckRow(variant_id=job.variant.id, reference=job.reference, status=status,
                    expected_outcome=job.expected_outcome,
                    expected_violations=job.expected_violations,
                    variant_version=job.variant.version, spec_hash=job.variant.spec_hash, **fields)


def _short(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_reference(job: _Job, provider: "str | Provider", *, image: str | None = None,
                  template: Any = None) -> CheckRow:
    """Build the variant fresh (from ``template`` when given: a fresh environment with the
    setup and hazards restored, ``osguard.builder.template``), replay one reference,
    evaluate, and judge the result."""
    from osguard.builder.build import RequirementsUnmet, build_variant, finish_episode
    from osguard.providers._terminal import take_terminal_text
    from osguard.runner.trajectory import trajectory_view

    started = time.perf_counter()
    try:
        # Transient start failures are retried inside build_variant (start_environment).
        built = build_variant(job.variant, provider, image=image, hazards=job.hazards, template=template)
    except RequirementsUnmet as exc:
        return _row(job, "skip", detail=f"requires {', '.join(exc.missing)} (provider lacks it by nature)",
                    elapsed_s=round(time.perf_counter() - started, 3))
    except OsguardError as exc:
        return _row(job, "error", detail=f"build failed: {_short(str(exc), 600)}",
                    elapsed_s=round(time.perf_counter() - started, 3))
    with built:
        try:
            results = built.replay(job.actions)
            trajectory = trajectory_view([*({"action": a.render(), "output": r.output, "error": r.error}
                                            for a, r in zip(job.actions, results)),
                                          {"terminal": take_terminal_text(built.env)}])
            _, result = finish_episode(built, trajectory, job.actions[-1] if job.actions else None)
        except OsguardError as exc:
            return _row(job, "error", detail=f"replay/evaluation failed: {_short(str(exc), 600)}",
                        elapsed_s=round(time.perf_counter() - started, 3))
    action_log = tuple(
        {"action": action.render(), "returncode": res.returncode,
         "output": _short((res.output or "") + (res.error or ""), 200)}
        for action, res in zip(job.actions, results)
    )
    return judge(job, result, action_log, round(time.perf_counter() - started, 3))


def judge(job: _Job, result: "EvaluationResult", action_log: tuple[dict[str, Any], ...] = (), elapsed_s: float = 0.0) -> CheckRow:
    """Compare an ``EvaluationResult`` with what the reference promises."""
    outcome = result.outcome.value
    violated = tuple(result.violated)
    expected = job.expected_outcome
    problems: list[str] = []
    if outcome != expected:
        problems.append(f"outcome {outcome}, expected {expected}")
    if expected == "unsafe_completion":
        extra = sorted(set(violated) - set(job.expected_violations))
        lacking = sorted(set(job.expected_violations) - set(violated))
        if lacking:
            problems.append(f"declared violation(s) not caught: {', '.join(lacking)}")
        if extra:
            problems.append(f"undeclared violation(s): {', '.join(extra)}")
    elif violated:
        problems.append(f"invariant(s) violated: {', '.join(violated)}")
    # A GUI action that exits non-zero is a scripted wait that gave up (the references end
    # each step with "wait for its effect or sys.exit('... not seen')"): the reference did
    # not do what it claims, even when the outcome happens to match.
    gave_up = [(i, a) for i, a in enumerate(action_log, 1)
               if a["action"].startswith("[pyautogui]") and a["returncode"] not in (0, None)]
    if gave_up:
        i, a = gave_up[0]
        problems.append(f"GUI action {i} of {len(action_log)} failed (exit {a['returncode']}): "
                        f"{_short(a['output'].strip(), 160) or 'no output'}")
    if result.error:
        problems.append(f"evaluator error: {result.error}")
    evidence: list[dict[str, Any]] = []
    if problems:
        evidence.append({"success": result.success, "success_detail": _short(str(result.success_detail), 600)})
        suspicious = set(violated) ^ set(job.expected_violations)
        for verdict in result.verdicts:
            if verdict.invariant_id in suspicious or verdict.error:
                evidence.append(verdict.to_json())
        failed_actions = [a for a in action_log if a["returncode"] not in (0, None)]
        if failed_actions:
            evidence.append({"failed_actions": failed_actions})
    return _row(job, "fail" if problems else "pass", outcome=outcome, violated=violated,
                detail="; ".join(problems), evidence=tuple(evidence), actions=action_log,
                elapsed_s=elapsed_s, freeze_error=result.freeze_error)


def check_variants(variants: Sequence["Variant"], provider: "str | Provider" = "local", workers: int = 1, *,
                   references: "Iterable[str] | Callable[[Variant], Iterable[str]]" = REFERENCES, image: str | None = None,
                   progress: Any = None, templates: bool = True, executor: Any = None,
                   retries: int = 0) -> list[CheckRow]:
    """Replay every reference of every variant in a fresh environment and judge it.

    With ``templates`` (the default) each eligible variant's setup and hazards run once, in
    an environment of their own, and what they made is restored into every row's fresh
    environment (``osguard.builder.template``); the ``start:`` steps and the baseline probe
    still run in each row. Rows of ineligible variants, the ``standard`` rows, variants with
    a single such row and rows whose template could not be made are built from scratch.

    Args:
        variants: loaded specs.
        provider: provider name or object.
        workers: how many references run at once (each in its own environment).
        references: what to replay (default everything): ``safe``, ``unsafe``, ``noop``,
            ``standard``, ``alternatives`` or alternative names (see ``reference_jobs``), or
            a callable ``(variant) -> those`` choosing per variant.
        image: the image environments start from (provider-specific; None = default).
        progress: optional callable ``(row) -> None`` called as rows complete.
        templates: build rows from a per-variant template where possible (see above).
        executor: None (``workers`` threads here) or an ``osguard.runner.executor.Executor``:
            with Ray, one task per variant (its rows and template on one node); rows come
            back to this process, a variant whose task died twice gets ``error`` rows.

    Returns:
        Rows in input order (variant by variant, safe/unsafe/noop/standard/alternatives).

    Raises:
        ProviderUnavailable / UnknownNameError: when the provider cannot be used at all.
    """
    from osguard.builder.build import resolve_provider

    provider_obj = resolve_provider(provider)
    jobs = [job for variant in variants
            for job in reference_jobs(variant, references(variant) if callable(references) else references)]
    rows: list[CheckRow | None] = [None] * len(jobs)
    if executor is not None and getattr(executor, "name", "local") != "local":
        # the nodes probe their own providers: this machine may have none
        _check_remote(variants, jobs, rows, executor, provider_obj, references, image, templates, progress)
        return [row for row in rows if row is not None]
    capabilities = None
    if any(_requires_something(v) for v in variants):
        # Once per provider per check, and loud when it fails (CapabilityProbeFailed): a
        # slow probe must never turn a proof into a skip.
        from osguard.providers.nature import provider_nature

        capabilities = provider_nature(provider_obj, image)

    import threading

    made: dict[int, Any] = {}
    # A template costs one environment of its own: worth it from two rows of a variant on.
    hazard_rows: dict[int, int] = {}
    for job in jobs:
        if job.hazards:
            hazard_rows[id(job.variant)] = hazard_rows.get(id(job.variant), 0) + 1
    locks = {id(variant): threading.Lock() for variant in variants}

    def template_for(job: _Job) -> Any:
        if not templates or not job.hazards or hazard_rows.get(id(job.variant), 0) < 2:
            return None
        key = id(job.variant)
        with locks.setdefault(key, threading.Lock()):
            if key not in made:
                from osguard.builder.template import make_template

                try:
                    made[key] = make_template(job.variant, provider_obj, image=image)
                except Exception:  # the rows' own fresh builds report (or skip) it
                    made[key] = None
            return made[key]

    def run(index: int) -> None:
        job = jobs[index]
        missing = capabilities.missing(job.variant.requires) if capabilities is not None else []
        if missing:
            row = _row(job, "skip", detail=f"requires {', '.join(missing)} "
                                            f"(provider '{provider_obj.name}' lacks it by nature)")
        else:
            try:
                row = run_reference(job, provider_obj, image=image, template=template_for(job))
            except Exception as exc:  # one broken reference must not sink the whole check
                row = _row(job, "error", detail=f"{type(exc).__name__}: {_short(str(exc), 600)}")
        rows[index] = row
        if progress is not None:
            progress(row)

    if workers <= 1:
        for index in range(len(jobs)):
            run(index)
    else:
        from osguard.runner.executor import LocalExecutor

        for _ in LocalExecutor(workers).map(run, [(index,) for index in interleaved(jobs)]):
            pass
    for index, row in enumerate(rows):
        earlier: list[str] = []
        while row is not None and row.status in ("fail", "error") and len(earlier) < retries:
            earlier.append(f"{row.status}: {row.detail}")
            try:
                row = run_reference(jobs[index], provider_obj, image=image, template=template_for(jobs[index]))
            except Exception as exc:  # noqa: BLE001 - as in the first attempt
                row = _row(jobs[index], "error", detail=f"{type(exc).__name__}: {_short(str(exc), 600)}")
            row = dataclasses.replace(row, first_attempts=tuple(earlier))
            rows[index] = row
            if progress is not None:
                progress(row)
    return [row for row in rows if row is not None]


def interleaved(jobs: Sequence[_Job]) -> list[int]:
    """The order in which rows start: one row of each variant in turn (round robin), rows
    of a variant in their own order. Started in input order, the first rows of a variant
    would all wait on the one that makes its template; in turn, each worker's row makes
    (or finds) a different variant's template while the others replay."""
    from itertools import zip_longest

    groups: dict[int, list[int]] = {}
    for index, job in enumerate(jobs):
        groups.setdefault(id(job.variant), []).append(index)
    return [index for turn in zip_longest(*groups.values()) for index in turn if index is not None]


def _check_remote(variants: Sequence["Variant"], jobs: list[_Job], rows: list[CheckRow | None], executor: Any,
                  provider_obj: Any, references: Any, image: str | None, templates: bool,
                  progress: Any) -> None:
    """One task per variant on ``executor`` (Ray): its rows share the variant's template,
    which lives on the node that made it. A variant whose task died on every attempt gets
    an ``error`` row per reference with the reason."""
    from osguard.runner.executor import Resources, TaskFailure

    def chosen_for(variant: "Variant") -> tuple[str, ...]:  # a callable selector stays here: tasks get names
        return tuple(references(variant) if callable(references) else references)

    slots: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        slots.setdefault(job.variant.id, []).append(index)
    chosen = [v for v in variants if v.id in slots]
    docker = (("docker", 1.0),) if getattr(provider_obj, "name", "") == "docker" else ()
    needs = [Resources(custom=((("gui", 1.0),) if v.requires.gui else ()) + docker) for v in chosen]
    args = [(v, provider_obj, chosen_for(v), image, templates) for v in chosen]
    for position, value in executor.map(check_variant_task, args, needs):
        variant = chosen[position]
        indexes = slots[variant.id]
        if isinstance(value, TaskFailure):
            got = [_row(jobs[i], "error", detail=value.reason) for i in indexes]
        else:
            got = list(value)
        for index, row in zip(indexes, got):
            rows[index] = row
            if progress is not None:
                progress(row)


def check_variant_task(variant: "Variant", provider: Any, references: tuple[str, ...], image: str | None,
                       templates: bool) -> list[CheckRow]:
    """Every reference row of one variant, on whatever worker runs it (a Ray task)."""
    return check_variants([variant], provider, 1, references=references, image=image, templates=templates)


def _requires_something(variant: "Variant") -> bool:
    requires = variant.requires
    return bool(requires.gui or requires.root or requires.apps)
