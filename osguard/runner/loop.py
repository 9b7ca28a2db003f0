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
from osguard.providers._terminal import take_terminal_text
from osguard.runner import _deps
from osguard.runner.agent_types import Agent, AgentError, Observation
from osguard.runner.trajectory import EpisodeWriter
from osguard.server.limits import PROMPT_OUTPUT_CHARS, TRAJECTORY_OUTPUT_CHARS, clip_tail

if TYPE_CHECKING:
    from osguard.providers.base import Environment
    from osguard.scout.types import Verifier
    from osguard.spec.model import Variant

# Characters of command output kept per step record, and passed on to the agent and the
# guardrail (one table: osguard.server.limits).
OUTPUT_LIMIT = TRAJECTORY_OUTPUT_CHARS
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
    start_retries: int = 0  # environment starts that failed before the one used (build record)
    retried: list[dict[str, Any]] = field(default_factory=list)  # earlier errored attempts (--retry-errors)
    env_source: str = ""  # "pool" (prepared ahead, --pool) or "fresh" (built for the episode); "": no build
    reset_s: float | None = None  # seconds from asking for the environment to having it ready

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
            "episode_dir": self.episode_dir, "start_retries": self.start_retries,
            "retried": [dict(a) for a in self.retried],
            "env_source": self.env_source,
            "reset_s": None if self.reset_s is None else round(self.reset_s, 4),
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


@dataclass(frozen=True)
class _Settings:
    """The per-episode limits and switches of ``run_episode`` (see its Args)."""

    max_steps: int
    retry_budget: int
    step_probe: bool
    action_timeout: float
    wait_seconds: float
    standard: bool
    step_timeout: float | None
    episode_timeout: float | None
    observation: str = "both"


class _Clock:
    """The episode's cancel flag and wall-clock deadline, and the step-timeout wrapper
    every agent and guardrail call goes through."""

    def __init__(self, cancel: threading.Event | None, step_timeout: float | None,
                 episode_timeout: float | None):
        self.cancel = cancel
        self.step_timeout = step_timeout
        self.episode_timeout = episode_timeout
        self.start = time.monotonic()
        self.deadline = self.start + episode_timeout if episode_timeout is not None else None

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def check_cancel(self) -> None:
        if self.cancelled():
            raise Interrupted()

    def check_deadline(self, step: int | None) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _Timeout(f"episode timed out after {self.episode_timeout:g} s", "episode",
                           self.episode_timeout, step)

    def check(self, step: int | None) -> None:
        """Between steps and proposals: stop on cancel, then on the episode deadline."""
        self.check_cancel()
        self.check_deadline(step)

    def bounded(self, fn: Any, what: str, kind: str, step: int) -> Any:
        """``fn()`` within the step timeout and the episode's deadline."""
        return _call_with_timeout(fn, what=what, kind=kind, step=step, step_timeout=self.step_timeout,
                                  deadline=self.deadline, episode_timeout=self.episode_timeout,
                                  cancel=self.cancel)

    def action_timeout(self, limit: float) -> float:
        """An action may not outlive the episode (with a minimum so it can still start)."""
        if self.deadline is None:
            return limit
        return min(limit, max(self.deadline - time.monotonic(), 1.0))

    def elapsed(self) -> float:
        return time.monotonic() - self.start


class _Episode:
    """One running episode: its inputs, its state so far, and the named steps of the
    loop (kept together so error paths can still report it).

    ``run_episode`` calls ``build``, ``reset_agent``, ``step`` until it says stop, then
    ``evaluate``; failures raise and are turned into an outcome by ``run_episode``.
    """

    def __init__(self, variant: "Variant", agent: Agent, guardrail: "Verifier | None",
                 writer: EpisodeWriter, settings: _Settings, clock: _Clock):
        self.variant = variant
        self.agent = agent
        self.guardrail = guardrail
        self.writer = writer
        self.settings = settings
        self.clock = clock
        self.executed: list[str] = []  # executed action codes (TrajectoryView.actions)
        self.executed_actions: list[Action] = []  # the same, as actions (a guardrail's replay fork)
        self.provider: Any = None
        self.agent_outputs: list[str] = []
        # one record per step for trajectory_view: action, agent_output, output, error,
        # observation (accessibility text), clipboard (read by the step probe)
        self.transcript: list[dict[str, Any]] = []
        # a standard episode has no hazards, so its invariants are not evaluated at all
        self.first_violation: dict[str, int | None] = (
            {} if settings.standard else {inv.id: None for inv in variant.invariants})
        self.steps = 0
        self.proposals = 0
        self.blocked = 0
        self.agent_tokens: dict[str, int] = {}
        self.guardrail_tokens: dict[str, int] = {}
        self.guardrail_latency = 0.0
        self.safe_reference = {(a.kind, a.code) for a in variant.references.safe}
        self.env: "Environment | None" = None
        self.built: _deps.Built | None = None
        self.request: Any = None  # the per-step probe request (None: no step probe)
        self.env_info: dict[str, Any] = {}
        self.outcome: Outcome | None = None
        self.reason = ""
        self.evaluation: dict[str, Any] | None = None
        self.final_block: dict[str, Any] | None = None
        self.timeout_info: dict[str, Any] | None = None  # outcome.json "timeout" when a limit ended it
        self.pending: dict[str, Any] | None = None  # the step record the error paths still write
        self.shell_output: str | None = None
        self.last_action: Action | None = None
        self.last_obs: Observation | None = None
        self.said: dict[str, Any] = {}  # the current step's transcript record
        self.env_source = ""  # how the environment was obtained (EpisodeResult.env_source)
        self.reset_s: float | None = None

    def traj(self) -> Any:
        """The trajectory so far, as invariants and the evaluator see it."""
        from osguard.runner.trajectory import trajectory_view

        return trajectory_view(self.transcript)

    # -- start ---------------------------------------------------------------------------

    def build(self, provider: Any, pool: Any = None) -> None:
        """Start the environment, run setup (and hazards), take the baseline (or take the
        built variant ``pool`` prepared)."""
        self.clock.check_cancel()
        standard = self.settings.standard
        self.provider = provider
        self.env_source = "fresh" if pool is None else "pool"
        started = time.monotonic()
        try:
            self.built = _deps.build(self.variant, provider, hazards=not standard, pool=pool)
        except OsguardError as exc:
            raise _EnvFailure(f"build failed: {exc}") from exc
        finally:
            self.reset_s = time.monotonic() - started
        self.env_source = self.built.source
        self.env = env = self.built.env
        self.env_info = {"id": env.info.id, "provider": env.info.provider, "image": env.info.image,
                         "capabilities": env.capabilities.to_json()}
        self.request = self.built.request if self.settings.step_probe and not standard else None
        self.clock.check(None)

    def reset_agent(self) -> None:
        """Give the agent the instruction (within the step timeout)."""
        agent = self.agent
        try:
            self.clock.bounded(lambda: agent.reset(self.variant.base.instruction, self.variant),
                               "agent reset", "agent", 0)
        except (_Timeout, Interrupted):
            raise
        except Exception as exc:
            raise _AgentFailure(str(exc) if isinstance(exc, OsguardError)
                                else f"{agent.name}: {type(exc).__name__}: {exc}") from exc

    # -- one step ------------------------------------------------------------------------

    def step(self) -> bool:
        """Observe, propose (and judge) until allowed, execute, probe. False: the episode
        is over (step limit, terminal action, retry termination)."""
        self.clock.check(self.steps)
        if self.steps >= self.settings.max_steps:
            self.reason = f"reached the step limit ({self.settings.max_steps})"
            return False
        step = self.steps
        obs, record = self.observe(step)
        chosen = self.propose_until_allowed(step, obs, record)
        if chosen is None:
            self.terminate_blocked(step, record)
            return False
        self.accept(chosen, record)
        if chosen.is_terminal:
            self.terminate_by_agent(step, chosen, record)
            return False
        self.execute(chosen, record)
        self.check_invariants(step, record)
        self.write_step(record)
        self.steps += 1
        return True

    def observe(self, step: int) -> tuple[Observation, dict[str, Any]]:
        """The pre-action observation, saved; returns it and the new step record (pending
        until the step completes)."""
        t_obs = time.monotonic()
        obs, obs_notes = _observe(self.env, self.shell_output, step, self.settings.observation)
        self.last_obs = obs
        refs: dict[str, Any] = self.writer.save_observation(step, obs.screenshot, obs.accessibility_tree)
        refs["observe_s"] = round(time.monotonic() - t_obs, 4)
        if obs_notes:
            refs["errors"] = obs_notes
        record: dict[str, Any] = {"index": step, "observation": refs, "proposals": []}
        self.pending = record  # written by the error paths if the step does not complete
        return obs, record

    def propose_until_allowed(self, step: int, obs: Observation, record: dict[str, Any]) -> Action | None:
        """Up to ``retry_budget + 1`` proposals at this state; the first one the guardrail
        allows (or any, unguarded), or None when every one was blocked."""
        feedback: str | None = None
        for attempt in range(self.settings.retry_budget + 1):
            self.clock.check(step)
            action, attempt_record = self.propose(step, attempt, obs, feedback)
            record["proposals"].append(attempt_record)
            if self.guardrail is None or not _judged(action):
                return action
            verdict = self.judge(step, action, obs)
            attempt_record["verdict"] = verdict.to_json()
            if not verdict.blocks:
                return action
            self.blocked += 1
            feedback = verdict.feedback or f"The action was judged {verdict.label}."
        return None

    def propose(self, step: int, attempt: int, obs: Observation,
                feedback: str | None) -> tuple[Action, dict[str, Any]]:
        """One agent proposal (within the step timeout) and its attempt record."""
        agent = self.agent
        t0 = time.monotonic()
        try:
            proposal = self.clock.bounded(lambda: agent.propose(obs, feedback), "agent proposal", "agent", step)
        except (AgentError, ModelError) as exc:
            raise _AgentFailure(str(exc)) from exc
        except (Interrupted, _Timeout):
            raise
        except Exception as exc:  # a plug-in's bug is still the agent's failure
            raise _AgentFailure(f"{agent.name}: {type(exc).__name__}: {exc}") from exc
        self.proposals += 1
        _add_usage(self.agent_tokens, proposal.usage)
        action = proposal.action
        return action, {
            "attempt": attempt, "action": action.to_json(), "raw_output": proposal.raw_output,
            "usage": dict(proposal.usage), "agent_latency_s": round(time.monotonic() - t0, 4),
            "feedback_in": feedback,
            **({"native": proposal.native} if getattr(proposal, "native", None) is not None else {}),
            "in_safe_reference": (action.kind, action.code) in self.safe_reference,
            "verdict": None,
        }

    def state_fork(self) -> Any:
        """A fork factory of the current state for a guardrail that executes before it judges
        (``osguard.scout.lookahead``): a file fork of the live environment for variants
        without a GUI, else a rebuild replaying the actions executed so far (exact for GUI
        state). The guardrail gets the environment only, never the variant."""
        from osguard.scout.lookahead import fork_of_built, replay_fork_factory

        built, variant = self.built, self.variant
        if not variant.requires.gui and built is not None:
            def make() -> Any:
                from osguard.builder.fork import file_fork

                return fork_of_built(file_fork(built.inner, self.provider), "file")

            return make
        return replay_fork_factory(variant, self.provider, list(self.executed_actions),
                                   hazards=not self.settings.standard)

    def judge(self, step: int, action: Action, obs: Observation) -> Any:
        """The guardrail's verdict on one proposal (within the step timeout)."""
        assert self.guardrail is not None
        verdict = _judge(self.guardrail, self.variant.base.instruction, action, obs,
                         lambda fn: self.clock.bounded(fn, "guardrail verdict", "guardrail", step),
                         fork=self.state_fork() if getattr(self.guardrail, "needs_fork", False) else None)
        _add_usage(self.guardrail_tokens, verdict.usage)
        self.guardrail_latency += verdict.latency_s
        return verdict

    def terminate_blocked(self, step: int, record: dict[str, Any]) -> None:
        """Every proposal at this state was blocked: retry termination."""
        attempts = record["proposals"]
        last = attempts[-1]
        self.final_block = {"step": step, "action": last["action"], "verdict": last["verdict"]}
        record.update({"executed": None, "terminated": "retry_termination"})
        self.write_step(record)
        self.outcome = Outcome.RETRY_TERMINATION
        self.reason = (f"step {step}: {len(attempts)} proposals blocked "
                       f"(last: {last['verdict']['label']}: {last['verdict']['feedback']})")

    def accept(self, chosen: Action, record: dict[str, Any]) -> None:
        """Record the action that goes through (and what the agent said with it)."""
        record["executed"] = chosen.to_json()
        raw_output = record["proposals"][-1]["raw_output"]
        # the transcript not_disclosed reads: what the agent said and saw, then (execute,
        # check_invariants) what the action printed, the terminal showed, the clipboard held
        self.said = {"agent_output": raw_output,
                     "observation": getattr(self.last_obs, "accessibility_tree", None)}
        self.transcript.append(self.said)
        if raw_output:
            # only the output behind an action that went through counts as said (not_disclosed)
            self.agent_outputs.append(raw_output)

    def terminate_by_agent(self, step: int, chosen: Action, record: dict[str, Any]) -> None:
        """DONE / FAIL: the episode ends and is evaluated."""
        record["terminated"] = chosen.code
        self.write_step(record)
        self.reason = f"agent said {chosen.code} at step {step}"
        self.last_action = chosen

    def execute(self, chosen: Action, record: dict[str, Any]) -> None:
        """Run the action in the environment (WAIT just waits)."""
        t0 = time.monotonic()
        if chosen.kind == "special":  # WAIT
            time.sleep(self.settings.wait_seconds)
            self.said["terminal"] = take_terminal_text(self.env)  # what a terminal printed meanwhile
            record["result"] = None
        else:
            assert self.env is not None and self.built is not None
            result = self.env.run_action(chosen, workdir=self.built.workdir,
                                         timeout=self.clock.action_timeout(self.settings.action_timeout))
            self.executed.append(chosen.render())
            self.executed_actions.append(chosen)
            self.said.update(action=chosen.render(), output=result.output, error=result.error,
                             terminal=take_terminal_text(self.env))
            # the agent's next prompt and the step record keep the end of the output (marked);
            # the transcript above keeps all the server returned (bounded there), so
            # not_disclosed finds a secret however far into the output it is
            self.shell_output = clip_tail((result.output or "") + (result.error or ""), PROMPT_OUTPUT_CHARS)
            record["result"] = {"returncode": result.returncode,
                                "output": clip_tail(result.output or "", OUTPUT_LIMIT),
                                "error": clip_tail(result.error or "", OUTPUT_LIMIT),
                                "timed_out": result.timed_out}
        self.last_action = chosen
        record["exec_s"] = round(time.monotonic() - t0, 4)

    def check_invariants(self, step: int, record: dict[str, Any]) -> None:
        """Probe after the action and note each invariant's first violating step."""
        if self.request is None:
            return
        assert self.env is not None and self.built is not None
        t0 = time.monotonic()
        state = _deps.probe(self.env, self.request)
        self.said["clipboard"] = state.get("clipboard")
        held = _deps.check_invariants(self.variant, self.built.baseline, state, self.traj())
        record["invariants"] = held
        record["probe_s"] = round(time.monotonic() - t0, 4)
        for inv_id, ok in held.items():
            if not ok and self.first_violation.get(inv_id) is None:
                self.first_violation[inv_id] = step

    def write_step(self, record: dict[str, Any]) -> None:
        self.writer.write_step(record)
        self.pending = None

    # -- end -----------------------------------------------------------------------------

    def evaluate(self) -> None:
        """Postconfig, final probe, success and invariants (the outcome unless the loop
        already decided it)."""
        self.clock.check_cancel()
        assert self.built is not None
        self.transcript.append({"terminal": take_terminal_text(self.env)})  # output still on its way
        self.evaluation = _deps.evaluate(self.built, self.traj(), self.last_action)
        if self.outcome is None:
            self.outcome = Outcome(self.evaluation["outcome"])
            if self.outcome is Outcome.ENV_ERROR:
                self.reason = f"evaluation: {self.evaluation.get('error')}"

    def fail(self, outcome: Outcome, reason: str) -> None:
        self.outcome, self.reason = outcome, reason

    def record_unfinished_step(self) -> None:
        """An error ended the episode mid-step: keep that step's record, with the error."""
        if self.pending is None or self.outcome not in (Outcome.ENV_ERROR, Outcome.AGENT_ERROR):
            return
        self.pending.update({"terminated": self.outcome.value, "error": self.reason})
        self.pending.setdefault("executed", None)
        try:
            self.writer.write_step(self.pending)
        except Exception:
            pass

    def result(self, episode_id: str) -> EpisodeResult:
        assert self.outcome is not None
        variant = self.variant
        return EpisodeResult(
            episode_id=episode_id, variant_id=variant.id, outcome=self.outcome, reason=self.reason,
            steps=self.steps, proposals=self.proposals, blocked=self.blocked,
            violated=list((self.evaluation or {}).get("violated", [])),
            first_violation_step=dict(self.first_violation), duration_s=self.clock.elapsed(),
            agent_tokens=self.agent_tokens, guardrail_tokens=self.guardrail_tokens,
            guardrail_latency_s=self.guardrail_latency, spec_hash=variant.spec_hash,
            family=variant.family, domain=variant.base.domain,
            episode_dir=f"episodes/{episode_id}", start_retries=len(self.start_retries()),
            env_source=self.env_source, reset_s=self.reset_s,
        )

    def start_retries(self) -> list[str]:
        """Why the environment starts before the one used failed (the build record's)."""
        if self.built is None:
            return []
        return list(self.built.record.get("start_retries") or [])

    def save_states(self) -> dict[str, str]:
        """The probed states, so invariants can be re-checked later without any environment."""
        states: dict[str, str] = {}
        if self.built is not None:
            try:
                states["baseline"] = self.writer.save_json("baseline_state.json", self.built.baseline)
                if self.built.final is not None:
                    states["final"] = self.writer.save_json("final_state.json", self.built.final)
            except (OSError, TypeError, ValueError):
                pass
        return states

    def outcome_doc(self, result: EpisodeResult) -> dict[str, Any]:
        """outcome.json: the results line plus everything needed to read the episode."""
        states = self.save_states()
        build_record: dict[str, Any] | None = None
        if self.built is not None:
            # the build record without the baseline State itself (saved on its own)
            rec = self.built.record
            build_record = {**rec, "baseline": {k: v for k, v in rec["baseline"].items() if k != "state"}}
        s = self.settings
        return outcome_document(
            result, standard=s.standard, instruction=self.variant.base.instruction, agent=self.agent.name,
            guardrail=getattr(self.guardrail, "name", None), evaluation=self.evaluation,
            environment=self.env_info, build=build_record, states=states,
            loop={"retry_budget": s.retry_budget, "max_steps": s.max_steps, "final_block": self.final_block,
                  "timeout": self.timeout_info, "step_timeout": s.step_timeout,
                  "episode_timeout": s.episode_timeout},
            start_retries=self.start_retries())


def outcome_document(result: EpisodeResult, *, standard: bool, instruction: str, agent: str | None,
                     guardrail: str | None, evaluation: dict[str, Any] | None = None, environment: Any = None,
                     build: dict[str, Any] | None = None, states: dict[str, str] | None = None,
                     loop: dict[str, Any] | None = None, start_retries: list[str] | None = None) -> dict[str, Any]:
    """An episode's ``outcome.json``: its results line plus what is needed to read it. The
    one place its shape is made, for an episode that ran and for one no worker finished
    (``_RaySuiteRun.record_failure``: no evaluation, environment, build or states). ``loop``
    holds the loop's own fields (limits, final block, timeout), left out when None."""
    doc: dict[str, Any] = {**result.to_json(), "standard": standard, "instruction": instruction, "agent": agent,
                           "guardrail": guardrail, **(loop or {}), "evaluation": evaluation,
                           "environment": environment, "build": build}
    if start_retries is not None:
        doc["start_retries"] = start_retries
    doc["states"] = states or {}
    return doc


def mark_retry(result: EpisodeResult, retry_of: dict[str, Any] | None) -> str | None:
    """For an episode that redoes an errored attempt (``retry_of``, that attempt's results
    record; None otherwise): list every earlier attempt in ``result.retried`` and return
    the folder name the errored attempt is kept as (``<id>.tryN``)."""
    if retry_of is None:
        return None
    earlier = [dict(a) for a in retry_of.get("retried") or []]
    kept_as = f"{result.episode_id}.try{len(earlier) + 1}"
    result.retried = [*earlier, {"outcome": retry_of.get("outcome"), "reason": retry_of.get("reason", ""),
                                 "episode_dir": f"episodes/{kept_as}"}]
    return kept_as


def _observe(env: "Environment", shell_output: str | None, step: int,
             observation: str = "both") -> tuple[Observation, list[str]]:
    """The pre-action observation: only what ``observation`` (screenshot | a11y | both |
    som | shell) asks for, so a screenshot-only agent never pays for a tree. A screenshot or
    tree that fails while the environment still answers is left out (and noted) rather than
    ending the episode."""
    from osguard.errors import EnvironmentDead

    caps = env.capabilities
    notes: list[str] = []
    shot = tree = None
    if caps.gui and observation in ("screenshot", "both", "som"):
        try:
            shot = env.screenshot()
        except EnvironmentDead:
            raise
        except Exception as exc:
            notes.append(f"screenshot failed: {type(exc).__name__}: {exc}")
    if caps.accessibility and observation in ("a11y", "both", "som"):
        try:
            tree = env.accessibility_tree()
        except EnvironmentDead:
            raise
        except Exception as exc:
            notes.append(f"accessibility tree failed: {type(exc).__name__}: {exc}")
    return Observation(screenshot=shot, accessibility_tree=tree, shell_output=shell_output, step=step), notes


def _check_limits(retry_budget: int, step_timeout: float | None, episode_timeout: float | None) -> None:
    if retry_budget < 0:
        raise OsguardError(f"retry budget {retry_budget}: expected an integer >= 0")
    for flag, value in (("--step-timeout", step_timeout), ("--episode-timeout", episode_timeout)):
        if value is not None and not value > 0:
            raise OsguardError(f"{flag} {value:g}: expected a number of seconds > 0")


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
    retry_of: dict[str, Any] | None = None,
    pool: Any = None,
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
            ``screenshot``, ``a11y`` (the accessibility tree), ``both``, ``som`` (both, for
            set-of-marks) or ``shell`` (neither).
        retry_of: the results record of an errored attempt this episode redoes
            (``--retry-errors``): that attempt's folder is kept as ``episodes/<id>.tryN``
            and the new result lists it (with any earlier ones) in ``retried``.
        pool: an ``osguard.builder.pool.ReadyPool`` of this variant on ``provider`` (with
            hazards unless ``standard``): the environment is taken from it instead of built
            here (the result's ``env_source`` says ``pool`` when it was prepared ahead,
            ``reset_s`` how long the take blocked).
    """
    _check_limits(retry_budget, step_timeout, episode_timeout)
    episode_id = episode_id or variant.id
    settings = _Settings(max_steps=max_steps, retry_budget=retry_budget, step_probe=step_probe,
                         action_timeout=action_timeout, wait_seconds=wait_seconds, standard=standard,
                         step_timeout=step_timeout, episode_timeout=episode_timeout,
                         observation=observation)
    clock = _Clock(cancel, step_timeout, episode_timeout)
    ep = _Episode(variant, agent, guardrail, EpisodeWriter(Path(run_dir), episode_id), settings, clock)
    try:
        ep.build(provider, pool)
        ep.reset_agent()
        while ep.step():
            pass
        ep.evaluate()
    except Interrupted:
        ep.writer.discard()
        _stop(ep.env)
        raise
    except _Timeout as exc:
        # not evaluated: the state may be mid-action, and a stuck call may still act on it
        ep.fail(Outcome.AGENT_ERROR, str(exc))
        ep.timeout_info = {"kind": exc.kind, "limit_s": exc.limit_s, "step": exc.step}
    except _AgentFailure as exc:
        ep.fail(Outcome.AGENT_ERROR, str(exc))
    except _EnvFailure as exc:
        ep.fail(Outcome.ENV_ERROR, str(exc))
    except EnvironmentError_ as exc:
        ep.fail(Outcome.ENV_ERROR, f"environment: {exc}")
    except Exception as exc:
        if clock.cancelled():
            # the run stopped this episode's environment under it: not a real failure
            ep.writer.discard()
            _stop(ep.env)
            raise Interrupted() from exc
        ep.fail(Outcome.ENV_ERROR, f"{type(exc).__name__}: {exc}")
        ep.evaluation = ep.evaluation or {"traceback": traceback.format_exc(limit=8)}
    finally:
        _stop(ep.env)

    ep.record_unfinished_step()
    result = ep.result(episode_id)
    # the errored attempt's folder stays as <id>.tryN, and the new line lists every earlier attempt
    kept_as = mark_retry(result, retry_of)
    outcome_doc = ep.outcome_doc(result)
    if clock.cancelled() and result.outcome in (Outcome.ENV_ERROR, Outcome.AGENT_ERROR):
        ep.writer.discard()
        raise Interrupted()
    ep.writer.commit(outcome_doc, keep_previous=kept_as)
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
           bounded: Any = None, fork: Any = None) -> Any:
    """Ask the guardrail about one proposal, from the allowlisted input only (through
    ``bounded(fn)``, the step-timeout wrapper, when given; ``fork``: a state-fork factory
    for guardrails that execute before they judge)."""
    from osguard.scout.types import Verdict, VerifierInput

    item = VerifierInput(instruction=instruction, action=action, screenshot=obs.screenshot,
                         accessibility_tree=obs.accessibility_tree, shell_output=obs.shell_output,
                         fork=fork)
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
