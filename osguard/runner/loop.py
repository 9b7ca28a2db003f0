"""One episode: the executor's loop, guarded as the OSGuard paper defines it (§6).

At each state the executor proposes an action. With a guardrail, every state-changing
proposal (pyautogui or shell; not WAIT/DONE/FAIL) is judged first, from exactly the
original instruction, the current observation and the action (``VerifierInput``):

- ``allowed``: the action runs and the environment advances;
- ``unrelated`` / ``unsafe`` / ``invalid``: it does not run; the feedback goes back to
  the executor, which proposes a revision from the same state.

At most ``retry_budget`` revisions (``retry_budget + 1`` proposals) are judged per state;
when all are blocked the episode ends as ``retry_termination`` (never a success) and the
final block is recorded. After every executed action a probe records the state and every
invariant is checked against the baseline, so each invariant's first violating step is
known. The episode ends through ``osguard.builder.finish_episode`` (postconfig, final
probe, evaluation), as the reference checks do.

Timeouts: every call into the agent (``reset``, ``propose``) and the guardrail (``judge``)
runs in a daemon worker thread and must return within ``step_timeout`` seconds, else the
episode ends as ``agent_error`` ("agent proposal timed out after N s at step K"). Python
cannot kill a thread: a stuck plug-in thread is *abandoned*, not killed (it keeps running
in the background until it returns or the process exits; its result is ignored). The
episode also has a wall-clock limit, ``episode_timeout``, checked between steps and
bounding every wait above (and each action's timeout); on expiry the episode ends as
``agent_error`` ("episode timed out after N s") *without* evaluation, since the state may
be mid-action.

A *standard* episode (``standard=True``) runs the variant's base task: setup steps only, no
hazards, judged by the success check alone (``safe_success`` / ``task_failure``); these
are SCOUT's "standard OSWorld executions".
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osguard.actions import Action
from osguard.errors import EnvironmentError_, ModelError, OsguardError
from osguard.outcomes import Outcome
from osguard.runner import _deps
from osguard.runner.agents import Agent, AgentError, Observation
from osguard.runner.trajectory import EpisodeWriter

if TYPE_CHECKING:
    from osguard.providers.base import Environment
    from osguard.scout.types import Verifier
    from osguard.spec.model import Variant

OUTPUT_LIMIT = 20000  # characters of command output kept per step record
_POLL = 0.2  # seconds between cancel checks while waiting for an agent or guardrail call


class Interrupted(Exception):
    """Raised inside an episode when the run is being cancelled (Ctrl-C, SIGTERM); the
    episode is discarded and runs again on resume."""


@dataclass
class EpisodeResult:
    """How one episode ended; the line written to results.jsonl (``to_json``)."""

    episode_id: str
    variant_id: str
    outcome: Outcome
    reason: str = ""
    steps: int = 0
    proposals: int = 0
    blocked: int = 0
    violated: list[str] = field(default_factory=list)
    first_violation_step: dict[str, int | None] = field(default_factory=dict)
    duration_s: float = 0.0
    agent_tokens: dict[str, int] = field(default_factory=dict)
    guardrail_tokens: dict[str, int] = field(default_factory=dict)
    guardrail_latency_s: float = 0.0
    spec_hash: str = ""
    family: str = ""
    domain: str = ""
    episode_dir: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id, "variant_id": self.variant_id,
            "outcome": self.outcome.value, "reason": self.reason, "steps": self.steps,
            "proposals": self.proposals, "blocked": self.blocked, "violated": list(self.violated),
            "first_violation_step": dict(self.first_violation_step),
            "duration_s": round(self.duration_s, 3), "agent_tokens": dict(self.agent_tokens),
            "guardrail_tokens": dict(self.guardrail_tokens),
            "guardrail_latency_s": round(self.guardrail_latency_s, 4),
            "spec_hash": self.spec_hash, "family": self.family, "domain": self.domain,
            "episode_dir": self.episode_dir,
        }


def _add_usage(total: dict[str, int], usage: dict[str, int] | None) -> None:
    for key, value in (usage or {}).items():
        try:
            total[key] = total.get(key, 0) + int(value)
        except (TypeError, ValueError):
            continue


def _judged(action: Action) -> bool:
    """Only state-changing actions are judged: WAIT/DONE/FAIL change nothing, and blocking
    DONE would only keep an agent in an episode it believes finished."""
    return action.kind != "special"


class _Episode:
    """State of one running episode (kept together so error paths can still report it)."""

    def __init__(self, variant: "Variant", writer: EpisodeWriter, standard: bool = False):
        self.variant = variant
        self.writer = writer
        self.executed: list[str] = []  # executed action codes (TrajectoryView.actions)
        self.agent_outputs: list[str] = []
        # a standard episode has no hazards, so its invariants are not evaluated at all
        self.first_violation: dict[str, int | None] = {} if standard else {inv.id: None for inv in variant.invariants}
        self.steps = 0
        self.proposals = 0
        self.blocked = 0
        self.agent_tokens: dict[str, int] = {}
        self.guardrail_tokens: dict[str, int] = {}
        self.guardrail_latency = 0.0
        self.safe_reference = {(a.kind, a.code) for a in variant.references.safe}

    def traj(self) -> Any:
        from osguard.invariants.types import TrajectoryView

        return TrajectoryView(actions=tuple(self.executed), agent_outputs=tuple(self.agent_outputs))


def _observe(env: "Environment", shell_output: str | None, step: int,
             observation: str = "both") -> tuple[Observation, list[str]]:
    """The pre-action observation: only what ``observation`` (screenshot | a11y | both |
    shell) asks for, so a screenshot-only agent never pays for a tree. A screenshot or tree
    that fails while the environment still answers is left out (and noted) rather than
    ending the episode."""
    from osguard.errors import EnvironmentDead

    caps = env.capabilities
    notes: list[str] = []
    shot = tree = None
    if caps.gui and observation in ("screenshot", "both"):
        try:
            shot = env.screenshot()
        except EnvironmentDead:
            raise
        except Exception as exc:
            notes.append(f"screenshot failed: {type(exc).__name__}: {exc}")
    if caps.accessibility and observation in ("a11y", "both"):
        try:
            tree = env.accessibility_tree()
        except EnvironmentDead:
            raise
        except Exception as exc:
            notes.append(f"accessibility tree failed: {type(exc).__name__}: {exc}")
    return Observation(screenshot=shot, accessibility_tree=tree, shell_output=shell_output, step=step), notes


def run_episode(
    variant: "Variant",
    agent: Agent,
    guardrail: "Verifier | None" = None,
    *,
    provider: Any,
    run_dir: Path,
    episode_id: str | None = None,
    max_steps: int = 15,
    retry_budget: int = 2,
    step_probe: bool = True,
    action_timeout: float = 60.0,
    wait_seconds: float = 1.0,
    cancel: threading.Event | None = None,
    standard: bool = False,
    step_timeout: float | None = 300.0,
    episode_timeout: float | None = 1800.0,
    observation: str = "both",
) -> EpisodeResult:
    """Run one episode of ``variant`` and write its folder under ``run_dir/episodes``.

    Never raises for a failing environment, agent or guardrail: those end the episode as
    ``env_error`` / ``agent_error`` with the reason. Raises ``Interrupted`` when ``cancel``
    is set (the episode folder is discarded).

    Args:
        variant: the variant to run.
        agent: a fresh agent for this episode.
        guardrail: the verifier judging proposals, or None for unguarded execution.
        provider: a Provider; the builder starts one environment from it.
        run_dir: the run directory (the episode folder goes in ``episodes/``).
        episode_id: folder name and results key (default: the variant id).
        max_steps: executed steps (WAIT included) before the episode is evaluated as is.
        retry_budget: revisions allowed after a block at one state (paper: 2).
        step_probe: probe and check invariants after every executed action.
        action_timeout: seconds one action may run in the environment.
        wait_seconds: how long WAIT pauses.
        cancel: set by the run to stop early.
        standard: run the base task (no hazards) judged by success alone; outcome.json
            says ``"standard": true`` and no invariant is probed or checked.
        step_timeout: seconds each agent call (reset, propose) and each guardrail verdict
            may take; a late call ends the episode as ``agent_error`` and its thread is
            abandoned (not killed). None: no limit.
        episode_timeout: wall-clock seconds for the whole episode (build included),
            checked between steps and bounding every wait; on expiry ``agent_error``
            "episode timed out after N s", not evaluated. None: no limit.
        observation: what each step observes for the agent and the guardrail:
            ``screenshot``, ``a11y`` (the accessibility tree), ``both`` or ``shell`` (neither).
    """
    if retry_budget < 0:
        raise OsguardError(f"retry budget {retry_budget}: expected an integer >= 0")
    for flag, value in (("--step-timeout", step_timeout), ("--episode-timeout", episode_timeout)):
        if value is not None and not value > 0:
            raise OsguardError(f"{flag} {value:g}: expected a number of seconds > 0")
    episode_id = episode_id or variant.id
    writer = EpisodeWriter(Path(run_dir), episode_id)
    ep = _Episode(variant, writer, standard)
    start = time.monotonic()
    env: "Environment | None" = None
    built: _deps.Built | None = None
    outcome: Outcome | None = None
    reason = ""
    evaluation: dict[str, Any] | None = None
    final_block: dict[str, Any] | None = None
    env_info: dict[str, Any] = {}
    pending: dict[str, Any] | None = None
    timeout_info: dict[str, Any] | None = None  # outcome.json "timeout" when a limit ended it
    deadline = start + episode_timeout if episode_timeout is not None else None

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise Interrupted()

    def check_deadline(step: int | None) -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise _Timeout(f"episode timed out after {episode_timeout:g} s", "episode", episode_timeout, step)

    def bounded(fn: Any, what: str, kind: str, step: int) -> Any:
        """``fn()`` within the step timeout and the episode's deadline."""
        return _call_with_timeout(fn, what=what, kind=kind, step=step, step_timeout=step_timeout,
                                  deadline=deadline, episode_timeout=episode_timeout, cancel=cancel)

    try:
        check_cancel()
        try:
            built = _deps.build(variant, provider, hazards=not standard)
        except OsguardError as exc:
            raise _EnvFailure(f"build failed: {exc}") from exc
        env = built.env
        env_info = {"id": env.info.id, "provider": env.info.provider, "image": env.info.image,
                    "capabilities": env.capabilities.to_json()}
        check_cancel()
        check_deadline(None)
        request = built.request if step_probe and not standard else None
        try:
            bounded(lambda: agent.reset(variant.base.instruction, variant), "agent reset", "agent", 0)
        except (_Timeout, Interrupted):
            raise
        except Exception as exc:
            raise _AgentFailure(str(exc) if isinstance(exc, OsguardError) else f"{agent.name}: {type(exc).__name__}: {exc}") from exc
        shell_output: str | None = None
        last_action: Action | None = None
        while True:
            check_cancel()
            check_deadline(ep.steps)
            if ep.steps >= max_steps:
                reason = f"reached the step limit ({max_steps})"
                break
            step = ep.steps
            t_obs = time.monotonic()
            obs, obs_notes = _observe(env, shell_output, step, observation)
            refs: dict[str, Any] = writer.save_observation(step, obs.screenshot, obs.accessibility_tree)
            refs["observe_s"] = round(time.monotonic() - t_obs, 4)
            if obs_notes:
                refs["errors"] = obs_notes
            feedback: str | None = None
            attempts: list[dict[str, Any]] = []
            chosen: Action | None = None
            step_record: dict[str, Any] = {"index": step, "observation": refs, "proposals": attempts}
            pending = step_record  # written by the error paths if the step does not complete
            for attempt in range(retry_budget + 1):
                check_cancel()
                check_deadline(step)
                t0 = time.monotonic()
                try:
                    proposal = bounded(lambda: agent.propose(obs, feedback), "agent proposal", "agent", step)
                except (AgentError, ModelError) as exc:
                    raise _AgentFailure(str(exc)) from exc
                except (Interrupted, _Timeout):
                    raise
                except Exception as exc:  # a plug-in's bug is still the agent's failure
                    raise _AgentFailure(f"{agent.name}: {type(exc).__name__}: {exc}") from exc
                ep.proposals += 1
                _add_usage(ep.agent_tokens, proposal.usage)
                action = proposal.action
                record: dict[str, Any] = {
                    "attempt": attempt, "action": action.to_json(), "raw_output": proposal.raw_output,
                    "usage": dict(proposal.usage), "agent_latency_s": round(time.monotonic() - t0, 4),
                    "feedback_in": feedback,
                    "in_safe_reference": (action.kind, action.code) in ep.safe_reference,
                    "verdict": None,
                }
                attempts.append(record)
                if guardrail is None or not _judged(action):
                    chosen = action
                    break
                verdict = _judge(guardrail, variant.base.instruction, action, obs,
                                 lambda fn: bounded(fn, "guardrail verdict", "guardrail", step))
                _add_usage(ep.guardrail_tokens, verdict.usage)
                ep.guardrail_latency += verdict.latency_s
                record["verdict"] = verdict.to_json()
                if not verdict.blocks:
                    chosen = action
                    break
                ep.blocked += 1
                feedback = verdict.feedback or f"The action was judged {verdict.label}."
            if chosen is None:
                last = attempts[-1]
                final_block = {"step": step, "action": last["action"], "verdict": last["verdict"]}
                step_record.update({"executed": None, "terminated": "retry_termination"})
                writer.write_step(step_record)
                pending = None
                outcome = Outcome.RETRY_TERMINATION
                reason = (f"step {step}: {len(attempts)} proposals blocked "
                          f"(last: {last['verdict']['label']}: {last['verdict']['feedback']})")
                break
            step_record["executed"] = chosen.to_json()
            if attempts[-1]["raw_output"]:
                # only the output behind an action that went through counts as said (not_disclosed)
                ep.agent_outputs.append(attempts[-1]["raw_output"])
            if chosen.is_terminal:
                step_record["terminated"] = chosen.code
                writer.write_step(step_record)
                pending = None
                reason = f"agent said {chosen.code} at step {step}"
                last_action = chosen
                break
            t0 = time.monotonic()
            if chosen.kind == "special":  # WAIT
                time.sleep(wait_seconds)
                last_action = chosen
                step_record["result"] = None
            else:
                timeout = action_timeout
                if deadline is not None:
                    # an action may not outlive the episode (a minimum so it can still start)
                    timeout = min(action_timeout, max(deadline - time.monotonic(), 1.0))
                result = env.run_action(chosen, workdir=built.workdir, timeout=timeout)
                ep.executed.append(chosen.render())
                last_action = chosen
                shell_output = (result.output or "") + (result.error or "")
                step_record["result"] = {"returncode": result.returncode, "output": result.output[-OUTPUT_LIMIT:],
                                         "error": result.error[-OUTPUT_LIMIT:], "timed_out": result.timed_out}
            step_record["exec_s"] = round(time.monotonic() - t0, 4)
            if request is not None:
                t0 = time.monotonic()
                state = _deps.probe(env, request)
                held = _deps.check_invariants(variant, built.baseline, state, ep.traj())
                step_record["invariants"] = held
                step_record["probe_s"] = round(time.monotonic() - t0, 4)
                for inv_id, ok in held.items():
                    if not ok and ep.first_violation.get(inv_id) is None:
                        ep.first_violation[inv_id] = step
            writer.write_step(step_record)
            pending = None
            ep.steps += 1
        check_cancel()
        evaluation = _deps.evaluate(built, ep.traj(), last_action)
        if outcome is None:
            outcome = Outcome(evaluation["outcome"])
            if outcome is Outcome.ENV_ERROR:
                reason = f"evaluation: {evaluation.get('error')}"

    except Interrupted:
        writer.discard()
        _stop(env)
        raise
    except _Timeout as exc:
        # not evaluated: the state may be mid-action, and a stuck call may still act on it
        outcome, reason = Outcome.AGENT_ERROR, str(exc)
        timeout_info = {"kind": exc.kind, "limit_s": exc.limit_s, "step": exc.step}
    except _AgentFailure as exc:
        outcome, reason = Outcome.AGENT_ERROR, str(exc)
    except _EnvFailure as exc:
        outcome, reason = Outcome.ENV_ERROR, str(exc)
    except EnvironmentError_ as exc:
        outcome, reason = Outcome.ENV_ERROR, f"environment: {exc}"
    except Exception as exc:
        if cancel is not None and cancel.is_set():
            # the run stopped this episode's environment under it: not a real failure
            writer.discard()
            _stop(env)
            raise Interrupted() from exc
        outcome = Outcome.ENV_ERROR
        reason = f"{type(exc).__name__}: {exc}"
        evaluation = evaluation or {"traceback": traceback.format_exc(limit=8)}
    finally:
        _stop(env)

    assert outcome is not None
    if pending is not None and outcome in (Outcome.ENV_ERROR, Outcome.AGENT_ERROR):
        pending.update({"terminated": outcome.value, "error": reason})
        pending.setdefault("executed", None)
        try:
            writer.write_step(pending)
        except Exception:
            pass
    duration = time.monotonic() - start
    violated = list((evaluation or {}).get("violated", []))
    result = EpisodeResult(
        episode_id=episode_id, variant_id=variant.id, outcome=outcome, reason=reason,
        steps=ep.steps, proposals=ep.proposals, blocked=ep.blocked, violated=violated,
        first_violation_step=dict(ep.first_violation), duration_s=duration,
        agent_tokens=ep.agent_tokens, guardrail_tokens=ep.guardrail_tokens,
        guardrail_latency_s=ep.guardrail_latency, spec_hash=variant.spec_hash,
        family=variant.family, domain=variant.base.domain,
        episode_dir=f"episodes/{episode_id}",
    )
    states: dict[str, str] = {}
    if built is not None:
        # the probed states, so invariants can be re-checked later without any environment
        try:
            states["baseline"] = writer.save_json("baseline_state.json", built.baseline)
            if built.final is not None:
                states["final"] = writer.save_json("final_state.json", built.final)
        except (OSError, TypeError, ValueError):
            pass
    record: dict[str, Any] | None = None
    if built is not None:
        # the build record without the baseline State itself (saved on its own above)
        record = {**built.record, "baseline": {k: v for k, v in built.record["baseline"].items() if k != "state"}}
    outcome_doc = {
        **result.to_json(),
        "standard": standard,
        "instruction": variant.base.instruction,
        "agent": agent.name,
        "guardrail": getattr(guardrail, "name", None),
        "retry_budget": retry_budget,
        "max_steps": max_steps,
        "final_block": final_block,
        "timeout": timeout_info,
        "step_timeout": step_timeout,
        "episode_timeout": episode_timeout,
        "evaluation": evaluation,
        "environment": env_info,
        "build": record,
        "states": states,
    }
    check = cancel is not None and cancel.is_set() and outcome in (Outcome.ENV_ERROR, Outcome.AGENT_ERROR)
    if check:
        writer.discard()
        raise Interrupted()
    writer.commit(outcome_doc)
    return result


class _AgentFailure(Exception):
    pass


class _EnvFailure(Exception):
    pass


class _Timeout(Exception):
    """A step or episode limit ran out (ends the episode as agent_error, not evaluated)."""

    def __init__(self, message: str, kind: str, limit_s: float | None, step: int | None):
        super().__init__(message)
        self.kind = kind  # "agent" | "guardrail" | "episode"
        self.limit_s = limit_s
        self.step = step


class _Call:
    """One call run in a daemon thread; the waiter reads ``result``/``error`` once ``done``."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # handed to the waiter (or dropped if it gave up)
            self.error = exc
        finally:
            self.done.set()


def _call_with_timeout(fn: Any, *, what: str, kind: str, step: int, step_timeout: float | None,
                       deadline: float | None, episode_timeout: float | None,
                       cancel: threading.Event | None) -> Any:
    """Run ``fn()`` in a daemon thread and wait at most ``step_timeout`` seconds (and never
    past the episode's ``deadline``), checking ``cancel`` while waiting.

    Python cannot kill a thread, so on timeout the call is abandoned: its daemon thread
    keeps running until ``fn`` returns (or the process exits) and its result is dropped.

    Raises:
        _Timeout: the step timeout or the episode deadline ran out first.
        Interrupted: ``cancel`` was set while waiting.
        whatever ``fn`` raised.
    """
    call = _Call(fn)
    worker = threading.Thread(target=call.run, name=f"osguard-{kind}-call", daemon=True)
    started = time.monotonic()
    worker.start()
    step_end = started + step_timeout if step_timeout is not None else None
    while True:
        now = time.monotonic()
        ends = [t for t in (step_end, deadline) if t is not None]
        wait_s = min([*(t - now for t in ends), _POLL]) if cancel is not None else (min(ends) - now if ends else None)
        if call.done.wait(timeout=max(wait_s, 0.0) if wait_s is not None else None):
            break
        if cancel is not None and cancel.is_set():
            raise Interrupted()
        now = time.monotonic()
        if deadline is not None and now >= deadline and (step_end is None or deadline <= step_end):
            raise _Timeout(f"episode timed out after {episode_timeout:g} s", "episode", episode_timeout, step)
        if step_end is not None and now >= step_end:
            raise _Timeout(f"{what} timed out after {step_timeout:g} s at step {step}", kind, step_timeout, step)
    if call.error is not None:
        raise call.error
    return call.result


def _judge(guardrail: "Verifier", instruction: str, action: Action, obs: Observation,
           bounded: Any = None) -> Any:
    """Ask the guardrail about one proposal, from the allowlisted input only (through
    ``bounded(fn)``, the step-timeout wrapper, when given)."""
    from osguard.scout.types import Verdict, VerifierInput

    item = VerifierInput(instruction=instruction, action=action, screenshot=obs.screenshot,
                         accessibility_tree=obs.accessibility_tree, shell_output=obs.shell_output)
    t0 = time.monotonic()
    try:
        verdict = bounded(lambda: guardrail.judge(item)) if bounded is not None else guardrail.judge(item)
    except (_Timeout, Interrupted):
        raise
    except Exception as exc:
        raise _AgentFailure(f"guardrail {getattr(guardrail, 'name', '?')}: {type(exc).__name__}: {exc}") from exc
    if not verdict.latency_s:
        # some verifiers do not time themselves; the overhead report needs it
        verdict = Verdict(label=verdict.label, feedback=verdict.feedback, raw=verdict.raw,
                          latency_s=time.monotonic() - t0, usage=dict(verdict.usage))
    return verdict


def _stop(env: "Environment | None") -> None:
    if env is None:
        return
    try:
        env.stop()
    except Exception:
        pass
