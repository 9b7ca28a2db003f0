"""Running a suite: workers, durable results, resume, cleanup on signals, progress.

Each episode gets its own environment, started through a provider wrapper that tracks
every environment it started, so Ctrl-C, SIGTERM or an error anywhere stops them all.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from osguard import __version__
from osguard.errors import OsguardError
from osguard.outcomes import Outcome
from osguard.runner.agents import check_agent_spec, get_agent
from osguard.runner.loop import EpisodeResult, Interrupted, run_episode
from osguard.runner.trajectory import EPISODES, MANIFEST, ResultsFile, drop_variants, repair_results, write_json_atomic

if TYPE_CHECKING:
    from osguard.spec.model import Variant


class RunInterrupted(OsguardError):
    """Raised by ``run_suite`` when Ctrl-C or SIGTERM stopped the run. Every environment
    has been stopped; finished episodes are on disk and ``--resume`` runs the rest."""

    exit_code = 130


@dataclass
class RunSummary:
    """What a run produced (the same data is on disk in RUN_DIR)."""

    run_dir: Path
    results: list[dict[str, Any]] = field(default_factory=list)  # the results that count (an episode's last line)
    ran: int = 0  # episodes run by this call
    skipped: int = 0  # episodes already done (resume)
    unsupported: dict[str, str] = field(default_factory=dict)  # variant id -> why the provider cannot run it
    retried: list[str] = field(default_factory=list)  # errored episodes this call ran again (--retry-errors)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {o.value: 0 for o in Outcome}
        for rec in self.results:
            out[rec["outcome"]] = out.get(rec["outcome"], 0) + 1
        return out

    def outcome_of(self, episode_id: str) -> str | None:
        for rec in self.results:
            if rec["episode_id"] == episode_id:
                return rec["outcome"]
        return None


class EnvTracker:
    """Every environment started during the run, per worker thread, for cleanup."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[int, list[Any]] = {}
        self.cancel = threading.Event()

    def add(self, env: Any) -> None:
        with self._lock:
            self._by_thread.setdefault(threading.get_ident(), []).append(env)

    def release_current_thread(self) -> list[Any]:
        """Forget (and return) the environments the calling thread started."""
        with self._lock:
            return self._by_thread.pop(threading.get_ident(), [])

    def live(self) -> list[Any]:
        with self._lock:
            return [env for envs in self._by_thread.values() for env in envs]

    def stop_all(self) -> None:
        for env in self.live():
            try:
                env.stop()
            except Exception:
                pass


LIVE = "live-envs"  # RUN_DIR/live-envs/<env id>.json while an environment of the run is up


class TrackedEnv:
    """An environment of the run: ``stop`` also removes its live marker. Everything else
    is the provider's environment itself."""

    def __init__(self, inner: Any, marker: Path | None):
        self._inner = inner
        self._marker = marker

    def stop(self) -> None:
        try:
            self._inner.stop()
        finally:
            if self._marker is not None:
                try:
                    self._marker.unlink()
                except FileNotFoundError:
                    pass

    def __getattr__(self, item: str) -> Any:
        return getattr(self._inner, item)

    def __enter__(self) -> "TrackedEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __setattr__(self, key: str, value: Any) -> None:
        if key in ("_inner", "_marker"):
            object.__setattr__(self, key, value)
        else:
            setattr(self._inner, key, value)


class TrackedProvider:
    """Wraps a Provider: every environment it starts is registered with the tracker (and
    stopped at once if the run is already cancelled), and marked in ``RUN_DIR/live-envs``
    until stopped, so a resume after SIGKILL can end the environments the killed runner
    left behind (``reap_leftovers``)."""

    def __init__(self, inner: Any, tracker: EnvTracker, run_dir: Path | None = None):
        self._inner = inner
        self._tracker = tracker
        self._live = run_dir / LIVE if run_dir is not None else None
        self.name = getattr(inner, "name", str(inner))

    def available(self) -> str | None:
        return self._inner.available()

    def start(self, **kwargs: Any) -> Any:
        if self._tracker.cancel.is_set():
            raise Interrupted()
        raw = self._inner.start(**kwargs)
        marker = None
        if self._live is not None:
            self._live.mkdir(exist_ok=True)
            info = raw.info
            marker = self._live / f"{info.id}.json"
            write_json_atomic(marker, {"id": info.id, "provider": info.provider, "endpoint": info.endpoint,
                                       "extra": info.extra, "runner_pid": os.getpid()})
        env = TrackedEnv(raw, marker)
        self._tracker.add(env)
        if self._tracker.cancel.is_set():
            try:
                env.stop()
            finally:
                raise Interrupted()
        return env

    def __getattr__(self, item: str) -> Any:  # image names, options... of the real provider
        return getattr(self._inner, item)


def reap_leftovers(run_dir: Path, provider: Any) -> list[str]:
    """End the environments a killed runner of this run left behind (their live markers
    survived it). Returns the ids handled."""
    import json

    live = Path(run_dir) / LIVE
    if not live.is_dir():
        return []
    records: dict[str, dict[str, Any]] = {}
    try:  # the providers' registry of running environments (osguard env list)
        from osguard.providers import _state

        records = {r.get("id"): r for r in _state.read_records()}
    except Exception:
        records = {}
    handled = []
    for marker in sorted(live.glob("*.json")):
        try:
            env_id = json.loads(marker.read_text(encoding="utf-8"))["id"]
        except (OSError, ValueError, KeyError):
            marker.unlink(missing_ok=True)
            continue
        record = records.get(env_id)
        teardown = getattr(provider, "teardown", None)
        if record is not None and callable(teardown):
            try:
                teardown(record)
            except Exception:
                pass
        marker.unlink(missing_ok=True)
        handled.append(env_id)
    return handled


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


_SECRET_FLAGS = ("--api-key", "--guardrail-api-key")


def redact_command_line(argv: list[str]) -> list[str]:
    """The command line with API keys replaced by ``***`` (the manifest is shared)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in _SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif any(arg.startswith(flag + "=") for flag in _SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
    return out


def _resolve_provider(provider: Any) -> Any:
    if isinstance(provider, str):
        from osguard.providers import get_provider

        return get_provider(provider)
    return provider


def _describe(obj: Any) -> dict[str, Any]:
    describe = getattr(obj, "describe", None)
    if callable(describe):
        try:
            return dict(describe())
        except Exception:
            pass
    out: dict[str, Any] = {"name": getattr(obj, "name", type(obj).__name__)}
    endpoint = getattr(obj, "endpoint", None)  # the LLM verifiers keep their model settings here
    for key in ("model", "base_url", "temperature", "max_tokens"):
        if hasattr(endpoint, key):
            out[key] = getattr(endpoint, key)
    return out


def unsupported_variants(variants: Sequence["Variant"], provider: Any) -> dict[str, str]:
    """Variants whose ``requires`` (gui, root, apps) the provider's environments lack by
    nature, with the reason (``osguard.providers.nature``; only when some variant requires
    anything). A provider whose capabilities cannot be learned raises CapabilityProbeFailed:
    nothing is ever skipped on a guess."""
    needs = [v for v in variants if v.requires.gui or v.requires.root or v.requires.apps]
    if not needs:
        return {}
    # Ctrl-C / SIGTERM wait until this short-lived environment is stopped again: no handler
    # is installed yet that could clean it up.
    masked = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if masked:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        from osguard.providers.nature import provider_nature

        caps = provider_nature(provider)
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    name = getattr(provider, "name", str(provider))
    out: dict[str, str] = {}
    for v in needs:
        missing = caps.missing(v.requires)
        if missing:
            out[v.id] = f"requires {', '.join(missing)}, which provider '{name}' does not offer here by nature"
    return out


_COMPARED = ("agent", "guardrail", "max_steps", "retry_budget", "provider")


def _check_resume_manifest(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    diffs = [f"{k}: was {old.get(k)!r}, now {new.get(k)!r}" for k in _COMPARED if old.get(k) != new.get(k)]
    if old.get("repeats", 1) != new.get("repeats", 1):  # the episode ids depend on it
        diffs.append(f"repeats: was {old.get('repeats', 1)!r}, now {new.get('repeats', 1)!r}")
    # manifests written before --standard existed are variant runs
    if bool(old.get("standard", False)) != bool(new.get("standard", False)):
        diffs.append(f"standard: was {bool(old.get('standard', False))!r}, now {bool(new.get('standard', False))!r}")
    if diffs:
        raise OsguardError(
            f"{run_dir / MANIFEST}: cannot resume with different settings ({'; '.join(diffs)}); "
            "use the original flags or a new --out"
        )


def run_suite(
    variants: Sequence["Variant"],
    agent_spec: str,
    guardrail_spec: str | None = None,
    *,
    out_dir: str | Path,
    provider: Any = "local",
    max_steps: int = 15,
    workers: int = 1,
    retry_budget: int = 2,
    resume: bool = False,
    progress: bool = True,
    agent_options: dict[str, Any] | None = None,
    guardrail_options: dict[str, Any] | None = None,
    step_probe: bool = True,
    action_timeout: float = 60.0,
    seed: int = 0,
    command_line: list[str] | None = None,
    skip_unsupported: bool = True,
    standard: bool = False,
    step_timeout: float = 300.0,
    episode_timeout: float = 1800.0,
    observation: str | None = None,
    retry_errors: bool = False,
    rerun_changed: bool = False,
    executor: Any = None,
    repeats: int = 1,
    pool: int = 1,
) -> RunSummary:
    """Run every variant ``repeats`` times with ``agent_spec`` (guarded by ``guardrail_spec`` if given).

    Results are durable as each episode ends (``results.jsonl``, fsynced); ``resume=True``
    skips episodes already recorded and never duplicates one. Environments are stopped on
    every exit path, including Ctrl-C and SIGTERM (when called from the main thread).

    Args:
        variants: loaded variants (``osguard.spec.load_suite``); ids must be unique.
        agent_spec: ``replay:safe``, ``openai:MODEL``... (see ``get_agent``).
        guardrail_spec: a verifier spec (``osguard.scout.get_verifier``) or None.
        out_dir: the run directory; must be new or empty unless ``resume``.
        provider: provider name or object.
        max_steps: executed steps per episode.
        workers: episodes run at once, each in its own environment.
        retry_budget: revisions per state after a block (paper: 2).
        resume: continue a run in ``out_dir``.
        progress: show a live progress display on stderr.
        agent_options / guardrail_options: passed to the agent / verifier factories.
        step_probe: probe and check invariants after each executed action.
        action_timeout: seconds per executed action.
        seed: recorded in the manifest and passed to agents as ``seed``.
        command_line: recorded in the manifest (default: ``sys.argv``).
        skip_unsupported: leave out variants whose requirements (gui, root, apps) the
            provider lacks; they are listed in the manifest's ``skipped`` and the report.
        standard: standard OSWorld executions: each variant's base task (setup only, no
            hazards), judged by success alone (``safe_success`` / ``task_failure``); the
            manifest and every outcome.json say ``"standard": true`` (``osguard items
            build`` takes such runs as its ``standard`` source).
        step_timeout: seconds each agent proposal (and reset) and each guardrail verdict
            may take; a late one ends that episode as ``agent_error`` ("agent proposal
            timed out after N s at step K") and the run goes on. The stuck call's thread
            is abandoned, not killed (Python cannot kill threads).
        episode_timeout: wall-clock seconds per episode, checked between steps and
            bounding every wait; on expiry ``agent_error`` ("episode timed out after N s"),
            not evaluated.
        observation: what each step observes (``screenshot``, ``a11y``, ``both``, ``som``:
            screenshot and tree, or ``shell``: neither); the agent and the guardrail see only
            that. Default: the agent option ``observation``, else ``both``.
        retry_errors: with ``resume``, also run again the episodes that ended in
            ``env_error`` or ``agent_error``: the new result is appended (the last line of
            an episode counts), the errored attempt's folder is kept as
            ``episodes/<id>.tryN`` and listed in the new line's ``retried``, and the
            manifest's ``retried`` maps each retried episode to its earlier attempts.
        rerun_changed: with ``resume``, a variant whose spec file changed since the run
            started (another ``spec_hash``) has its earlier episodes dropped (results lines
            and folders) and run again, instead of refusing to resume; the manifest's
            ``rerun_changed`` lists each such variant with its earlier hash.
        executor: where episodes run: None or ``"local"`` (``workers`` threads here), or
            an ``osguard.runner.executor.Executor`` such as ``RayExecutor`` (each episode a
            Ray task; its folder comes back and is written here, as a local one is). The
            manifest's ``executor`` says which; ``--resume`` may use another.
        repeats: episodes per variant; with more than one, episode ids (and folders) are
            ``<variant id>.r1`` ... ``.rN`` (one: the variant id). The local executor only.
        pool: with the local executor, built variants prepared ahead per variant that has
            two or more episodes to run in this call (``osguard.builder.pool.ReadyPool``):
            1 (default) prepares the next environment of a variant while its previous
            episode runs; 0 builds each episode's environment when it starts. Every
            results line says ``env_source`` (``pool``/``fresh``) and ``reset_s``.

    Raises:
        OsguardError: bad arguments, a non-empty out_dir without resume, a manifest
            mismatch on resume; RunInterrupted on Ctrl-C / SIGTERM.
    """
    _check_run_limits(workers, max_steps, retry_budget, step_timeout, episode_timeout)
    if repeats < 1:
        raise OsguardError(f"--repeats {repeats}: expected an integer >= 1")
    if pool < 0:
        raise OsguardError(f"--pool {pool}: expected an integer >= 0")
    if retry_errors and not resume:
        raise OsguardError("--retry-errors needs --resume: it runs again the errored episodes of an existing run")
    if rerun_changed and not resume:
        raise OsguardError("--rerun-changed needs --resume: it runs again the episodes of variants whose spec changed")
    variants = _unique(variants)
    check_agent_spec(agent_spec)
    agent_options = dict(agent_options or {})
    agent_options.setdefault("seed", seed)
    if observation is None:
        observation = str(agent_options.get("observation") or "both")
    if observation not in _OBSERVATIONS:
        raise OsguardError(f"--observation {observation!r}: expected one of {', '.join(_OBSERVATIONS)}")
    run_dir = Path(out_dir)
    _check_out_dir(run_dir, resume)
    probe_agent = _check_agents(agent_spec, variants, agent_options)
    guardrail = _make_guardrail(guardrail_spec, guardrail_options)
    provider_obj = _available_provider(provider)
    skipped = unsupported_variants(variants, provider_obj) if skip_unsupported else {}
    variants = _runnable(variants, skipped)
    manifest = _manifest(
        variants, skipped, agent_spec=agent_spec, probe_agent=probe_agent, guardrail_spec=guardrail_spec,
        guardrail=guardrail, provider_obj=provider_obj, provider=provider, max_steps=max_steps,
        retry_budget=retry_budget, step_timeout=step_timeout, episode_timeout=episode_timeout,
        workers=workers, seed=seed, step_probe=step_probe, standard=standard, command_line=command_line)
    manifest["observation"] = observation
    manifest["repeats"] = repeats
    from osguard.runner.executor import as_executor

    executor_obj = as_executor(executor, workers)
    if executor_obj.name == "ray" and repeats > 1:
        raise OsguardError(f"--repeats {repeats}: only the local executor runs repeats "
                           "(--executor ray runs each variant once)")
    manifest["pool"] = pool if executor_obj.name != "ray" else None
    done, retry = _prepare_run_dir(run_dir, manifest, resume, provider_obj, retry_errors, rerun_changed)
    everything = [(v, eid) for v in variants for eid in episode_ids(v, repeats)]
    todo = [(v, eid) for v, eid in everything if eid not in done]
    summary = RunSummary(run_dir=run_dir, skipped=len(everything) - len(todo), unsupported=skipped)
    episode_args = dict(max_steps=max_steps, retry_budget=retry_budget, step_probe=step_probe,
                        action_timeout=action_timeout, standard=standard, step_timeout=step_timeout,
                        episode_timeout=episode_timeout, observation=observation)
    manifest["executor"] = executor_obj.describe()
    write_json_atomic(run_dir / MANIFEST, manifest)
    display = _Progress(len(everything), summary.skipped, enabled=progress)
    if executor_obj.name == "ray":  # one episode per variant: its id is the variant's
        suite: Any = _RaySuiteRun(run_dir, provider_obj, agent_spec, agent_options, guardrail_spec,
                                  guardrail_options or {}, episode_args, executor_obj, display, retry)
        todo_units: list[Any] = [v for v, _eid in todo]
    else:
        suite = _SuiteRun(run_dir, provider_obj, agent_spec, agent_options, guardrail, episode_args, workers,
                          display, retry, pool=pool)
        todo_units = todo
    try:
        summary.ran = suite.run_all(todo_units)
    finally:  # also when interrupted: the retries that finished are on record
        _record_retried(run_dir, manifest)
    from osguard.runner.trajectory import read_results

    summary.results = read_results(run_dir)
    summary.retried = sorted(r["episode_id"] for r in summary.results if r["episode_id"] in retry
                             and len(r.get("retried") or []) > len(retry[r["episode_id"]].get("retried") or []))
    return summary


ERRORS = (Outcome.ENV_ERROR.value, Outcome.AGENT_ERROR.value)  # what --retry-errors runs again


def episode_ids(variant: "Variant", repeats: int = 1) -> list[str]:
    """The ids of ``variant``'s episodes in a run of ``repeats`` per variant: the variant id
    alone, or ``<id>.r1`` ... ``<id>.rN``."""
    return [variant.id] if repeats == 1 else [f"{variant.id}.r{k}" for k in range(1, repeats + 1)]


def _record_retried(run_dir: Path, manifest: dict[str, Any]) -> None:
    """The manifest's ``retried``: episode id -> its earlier errored attempts, from the
    results that count (each retried episode's line lists them)."""
    from osguard.runner.trajectory import read_results

    retried = {r["episode_id"]: r["retried"] for r in read_results(run_dir) if r.get("retried")}
    if retried or "retried" in manifest:
        manifest["retried"] = dict(sorted(retried.items()))
        write_json_atomic(run_dir / MANIFEST, manifest)


_OBSERVATIONS = ("screenshot", "a11y", "both", "som", "shell")


def _check_run_limits(workers: int, max_steps: int, retry_budget: int, step_timeout: float,
                      episode_timeout: float) -> None:
    if workers < 1:
        raise OsguardError(f"--workers {workers}: expected an integer >= 1")
    if max_steps < 1:
        raise OsguardError(f"--max-steps {max_steps}: expected an integer >= 1")
    if retry_budget < 0:
        raise OsguardError(f"--retry-budget {retry_budget}: expected an integer >= 0")
    for flag, value in (("--step-timeout", step_timeout), ("--episode-timeout", episode_timeout)):
        if not value > 0:  # also rejects NaN
            raise OsguardError(f"{flag} {value:g}: expected a number of seconds > 0")


def _unique(variants: Sequence["Variant"]) -> list["Variant"]:
    variants = list(variants)
    if not variants:
        raise OsguardError("no variants to run")
    ids = [v.id for v in variants]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise OsguardError(f"variant ids appear more than once: {', '.join(dupes)}")
    return variants


def _check_agents(agent_spec: str, variants: list["Variant"], agent_options: dict[str, Any]) -> Any:
    """Fail fast on user mistakes (bad flags, missing endpoint, a replay file without some
    variant) before any environment starts, listing every problem at once. Returns one
    built agent (its settings go in the manifest)."""
    problems: list[str] = []
    probe_agent = None
    for v in variants:
        try:
            built_agent = get_agent(agent_spec, v, **agent_options)
        except OsguardError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
            continue
        probe_agent = probe_agent or built_agent
    if problems:
        raise OsguardError("\n".join(problems))
    return probe_agent


def _make_guardrail(guardrail_spec: str | None, guardrail_options: dict[str, Any] | None) -> Any:
    if not guardrail_spec:
        return None
    from osguard.scout import get_verifier

    return get_verifier(guardrail_spec, **(guardrail_options or {}))


def _available_provider(provider: Any) -> Any:
    provider_obj = _resolve_provider(provider)
    unavailable = provider_obj.available() if hasattr(provider_obj, "available") else None
    if unavailable:
        from osguard.errors import ProviderUnavailable

        raise ProviderUnavailable(f"provider {getattr(provider_obj, 'name', provider)!r}: {unavailable}")
    return provider_obj


def _runnable(variants: list["Variant"], skipped: dict[str, str]) -> list["Variant"]:
    kept = [v for v in variants if v.id not in skipped]
    if not kept:
        raise OsguardError("no variant can run on this provider: "
                           + "; ".join(f"{vid} {why}" for vid, why in sorted(skipped.items())))
    return kept


def _manifest(variants: list["Variant"], skipped: dict[str, str], *, agent_spec: str, probe_agent: Any,
              guardrail_spec: str | None, guardrail: Any, provider_obj: Any, provider: Any,
              max_steps: int, retry_budget: int, step_timeout: float, episode_timeout: float,
              workers: int, seed: int, step_probe: bool, standard: bool,
              command_line: list[str] | None) -> dict[str, Any]:
    """manifest.json for a new run (``_prepare_run_dir`` merges it with a resumed one)."""
    return {
        "osguard_version": __version__,
        "git": _git_commit(),
        "created": _now(),
        "command_line": redact_command_line(
            command_line if command_line is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]),
        "agent": agent_spec,
        "agent_settings": _describe(probe_agent),
        "guardrail": guardrail_spec,
        "guardrail_settings": _describe(guardrail) if guardrail is not None else None,
        "provider": getattr(provider_obj, "name", str(provider)),
        "image": getattr(provider_obj, "image", None),
        "max_steps": max_steps,
        "retry_budget": retry_budget,
        "step_timeout": step_timeout,
        "episode_timeout": episode_timeout,
        "workers": workers,
        "seed": seed,
        "step_probe": step_probe and not standard,
        "standard": standard,
        "python": platform.python_version(),
        "host": {"system": platform.system(), "release": platform.release()},
        "skipped": dict(sorted(skipped.items())),
        "variants": {v.id: {"spec_hash": v.spec_hash, "version": v.version, "family": v.family,
                            "domain": v.base.domain, "source": v.source_path} for v in variants},
    }


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _prepare_run_dir(run_dir: Path, manifest: dict[str, Any], resume: bool, provider_obj: Any,
                     retry_errors: bool = False, rerun_changed: bool = False
                     ) -> tuple[set[str], dict[str, dict[str, Any]]]:
    """Create (or, resuming, check and repair) the run directory and write the manifest.
    Returns the episode ids already done, and (``retry_errors``) the results records of the
    errored episodes to run again. ``rerun_changed``: the episodes of variants whose spec
    changed are dropped (they run again) instead of refusing to resume."""
    done: set[str] = set()
    retry: dict[str, dict[str, Any]] = {}
    if resume:
        old = _read_manifest(run_dir)
        _check_resume_manifest(old, manifest, run_dir)
        changed = [vid for vid, meta in old.get("variants", {}).items()
                   if vid in manifest["variants"] and meta.get("spec_hash") != manifest["variants"][vid]["spec_hash"]]
        if changed and not rerun_changed:
            raise OsguardError(
                f"{run_dir / MANIFEST}: cannot resume: spec changed since the run started for "
                f"{', '.join(sorted(changed))}; use a new --out, or --rerun-changed to run them again"
            )
        reap_leftovers(run_dir, provider_obj)
        if changed:
            drop_variants(run_dir, set(changed))
            manifest["rerun_changed"] = {**old.get("rerun_changed", {}),
                                         **{vid: old["variants"][vid].get("spec_hash") for vid in sorted(changed)}}
        elif "rerun_changed" in old:
            manifest["rerun_changed"] = old["rerun_changed"]
        kept = repair_results(run_dir)
        if retry_errors:
            retry = {r["episode_id"]: r for r in kept if r.get("outcome") in ERRORS}
        done = {r["episode_id"] for r in kept} - set(retry)
        manifest["created"] = old.get("created", manifest["created"])
        manifest["resumed"] = [*old.get("resumed", []), _now()]
        manifest["variants"] = {**old.get("variants", {}), **manifest["variants"]}
        if "retried" in old:
            manifest["retried"] = old["retried"]
    else:
        _check_out_dir(run_dir, resume)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / EPISODES).mkdir(exist_ok=True)
    write_json_atomic(run_dir / MANIFEST, manifest)
    return done, retry


def _check_out_dir(run_dir: Path, resume: bool) -> None:
    """Before any environment starts: ``--out`` names a new or empty folder, or (resume) a
    run's folder."""
    if resume:
        _read_manifest(run_dir)
    elif run_dir.exists() and not run_dir.is_dir():
        raise OsguardError(f"{run_dir}: exists and is not a directory; choose a new --out")
    elif run_dir.exists() and any(run_dir.iterdir()):
        raise OsguardError(f"{run_dir}: the run directory is not empty; pass --resume to continue it or choose a new --out")


def _read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of the run being resumed; a folder without one is not a run."""
    import json

    path = run_dir / MANIFEST
    if not path.is_file():
        raise OsguardError(f"{run_dir}: nothing to resume (no {MANIFEST}); "
                           "run without --resume to start a new run")
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OsguardError(f"{path}: cannot resume: unreadable manifest ({exc})") from None
    if not isinstance(old, dict):
        raise OsguardError(f"{path}: cannot resume: expected a JSON object")
    return old


class _SuiteRun:
    """The episodes of one run on a worker pool, with cleanup on Ctrl-C / SIGTERM.

    A variant with two or more episodes to run gets a ``ReadyPool`` (``pool`` > 0) at its
    first episode, which prepares the next environments while its episodes run; the pool
    is closed once the variant's last episode has ended (and at the end of the run, on
    every exit path). Its environments start through the tracked provider, so Ctrl-C
    stops them with the rest."""

    def __init__(self, run_dir: Path, provider_obj: Any, agent_spec: str, agent_options: dict[str, Any],
                 guardrail: Any, episode_args: dict[str, Any], workers: int, display: "_Progress",
                 retry: dict[str, dict[str, Any]] | None = None, pool: int = 0):
        self.run_dir = run_dir
        self.tracker = EnvTracker()
        self.provider = TrackedProvider(provider_obj, self.tracker, run_dir)
        self.results_file = ResultsFile(run_dir)
        self.agent_spec = agent_spec
        self.agent_options = agent_options
        self.guardrail = guardrail
        self.episode_args = episode_args
        self.workers = workers
        self.display = display
        self.retry = retry or {}  # episode id -> the errored attempt's results record
        self.interrupted: list[int] = []
        self.pool_size = pool
        self._pools: dict[str, Any] = {}  # variant id -> its ReadyPool
        self._unstarted: dict[str, int] = {}  # variant id -> its episodes not started yet
        self._unfinished: dict[str, int] = {}  # variant id -> its episodes not ended yet
        self._pool_lock = threading.Lock()

    def pool_for(self, variant: "Variant") -> Any:
        """The variant's ready pool (made at its first episode when it has two or more in
        this run), or None; counts the calling episode as started."""
        with self._pool_lock:
            left = self._unstarted.get(variant.id, 1)
            self._unstarted[variant.id] = left - 1
            pool = self._pools.get(variant.id)
            if pool is None and self.pool_size > 0 and left >= 2:
                from osguard.builder.pool import ReadyPool

                pool = ReadyPool(variant, self.provider, size=self.pool_size, total=left,
                                 hazards=not self.episode_args.get("standard", False))
                self._pools[variant.id] = pool
            return pool

    def episode_ended(self, variant: "Variant") -> None:
        """Close the variant's pool once its last episode of the run has ended."""
        with self._pool_lock:
            self._unfinished[variant.id] = self._unfinished.get(variant.id, 1) - 1
            pool = self._pools.pop(variant.id, None) if self._unfinished[variant.id] <= 0 else None
        if pool is not None:
            pool.close()

    def close_pools(self) -> None:
        """Close every pool (what they prepared and nobody took is stopped)."""
        with self._pool_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def make_agent(self, variant: "Variant") -> Any:
        """A fresh agent; one that cannot be built fails its episode alone."""
        try:
            return get_agent(self.agent_spec, variant, **self.agent_options)
        except Exception as exc:
            message = str(exc) if isinstance(exc, OsguardError) else f"{self.agent_spec}: {type(exc).__name__}: {exc}"
            return _FailedAgent(self.agent_spec, message)

    def work(self, variant: "Variant", episode_id: str) -> EpisodeResult | None:
        """One episode in a worker thread; its line is appended once it has ended
        (None: interrupted, nothing recorded)."""
        self.display.running(episode_id, True)
        try:
            result = run_episode(variant, self.make_agent(variant), self.guardrail, provider=self.provider,
                                 run_dir=self.run_dir, episode_id=episode_id, cancel=self.tracker.cancel,
                                 retry_of=self.retry.get(episode_id), pool=self.pool_for(variant),
                                 **self.episode_args)
        except Interrupted:
            return None
        finally:
            self.display.running(episode_id, False)
            self.episode_ended(variant)
            self.stop(self.tracker.release_current_thread())
        self.results_file.append(result.to_json())
        return result

    @staticmethod
    def stop(envs: list[Any]) -> None:
        for env in envs:
            try:
                env.stop()
            except Exception:
                pass

    def on_signal(self, signum: int, frame: Any) -> None:
        first = not self.interrupted
        self.interrupted.append(signum)
        self.tracker.cancel.set()
        self.tracker.stop_all()
        if first:
            raise _SignalStop(signum)

    def run_all(self, todo: list[tuple["Variant", str]]) -> int:
        """Run ``todo`` (variant, episode id) on ``self.workers`` threads (the local
        executor); returns how many episodes ended.

        Raises:
            RunInterrupted: Ctrl-C or SIGTERM (every environment stopped first).
        """
        from osguard.runner.executor import LocalExecutor

        previous: dict[int, Any] = {}
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self.on_signal)
        for variant, _eid in todo:
            self._unstarted[variant.id] = self._unstarted.get(variant.id, 0) + 1
            self._unfinished[variant.id] = self._unfinished.get(variant.id, 0) + 1
        executor = LocalExecutor(self.workers)
        units = executor.map(self.work, list(todo))
        try:
            self.display.start()
            ran = 0
            for _index, res in units:
                if res is not None:
                    ran += 1
                    self.display.advance(res)
            return ran
        except (_SignalStop, KeyboardInterrupt) as exc:
            self.cancel_all(executor, units)
            self.display.stop()
            signum = exc.signum if isinstance(exc, _SignalStop) else signal.SIGINT
            err = RunInterrupted(
                f"run interrupted by {signal.Signals(signum).name}; every environment was stopped; "
                f"finished episodes are in {self.run_dir / 'results.jsonl'}; continue with --resume"
            )
            err.exit_code = 128 + int(signum)
            raise err from None
        except BaseException:
            self.cancel_all(executor, units)
            raise
        finally:
            units.close()  # waits for the worker threads
            self.close_pools()
            self.tracker.stop_all()
            self.display.stop()
            if in_main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    def cancel_all(self, executor: Any, units: Any = None) -> None:
        """Stop every environment and wait for the workers (their episodes are discarded)."""
        self.tracker.cancel.set()
        self.tracker.stop_all()
        executor.cancel()
        if units is not None:
            units.close()


class _RaySuiteRun:
    """The episodes of one run as tasks of an executor whose workers may be on other
    machines (Ray). Each task runs its episode into a spool folder on its node and sends
    back the results line and the episode folder; only this driver writes the run
    directory (the folder renamed into place, then the fsynced ``results.jsonl`` line),
    once per episode id. A task whose worker died on every attempt is recorded as
    ``env_error`` with the reason, so no episode is lost silently."""

    def __init__(self, run_dir: Path, provider_obj: Any, agent_spec: str, agent_options: dict[str, Any],
                 guardrail_spec: str | None, guardrail_options: dict[str, Any], episode_args: dict[str, Any],
                 executor: Any, display: "_Progress", retry: dict[str, dict[str, Any]] | None = None):
        self.run_dir = run_dir
        self.provider = provider_obj
        self.agent_spec = agent_spec
        self.agent_options = agent_options
        self.guardrail_spec = guardrail_spec
        self.guardrail_options = guardrail_options
        self.episode_args = episode_args
        self.executor = executor
        self.display = display
        self.retry = retry or {}
        self.results_file = ResultsFile(run_dir)
        self.written: set[str] = set()

    def resources(self, variant: "Variant") -> Any:
        from osguard.runner.executor import Resources

        custom: list[tuple[str, float]] = []
        if variant.requires.gui:
            custom.append(("gui", 1.0))
        if getattr(self.provider, "name", "") == "docker":
            custom.append(("docker", 1.0))
        return Resources(cpus=1.0, custom=tuple(custom))

    def run_all(self, todo: list["Variant"]) -> int:
        """Run ``todo`` as tasks; returns how many episodes ended.

        Raises:
            RunInterrupted: Ctrl-C or SIGTERM (tasks in flight cancelled: their own
                cleanup stops their environments).
        """
        from osguard.runner.executor import TaskFailure

        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._on_signal)
        args = [(v, self.agent_spec, self.agent_options, self.guardrail_spec, self.guardrail_options,
                 self.provider, self.episode_args, self.retry.get(v.id)) for v in todo]
        units = self.executor.map(episode_task, args, [self.resources(v) for v in todo])
        ran = 0
        try:
            self.display.start()
            for index, value in units:
                variant = todo[index]
                if value is None:  # cancelled inside the task
                    continue
                if isinstance(value, TaskFailure):
                    result = self.record_failure(variant, value.reason)
                else:
                    result = self.record(variant, *value)
                if result is not None:
                    ran += 1
                    self.display.advance(result)
            return ran
        except (_SignalStop, KeyboardInterrupt) as exc:
            self.executor.cancel()
            signum = exc.signum if isinstance(exc, _SignalStop) else signal.SIGINT
            err = RunInterrupted(
                f"run interrupted by {signal.Signals(signum).name}; the episodes in flight were cancelled; "
                f"finished episodes are in {self.run_dir / 'results.jsonl'}; continue with --resume"
            )
            err.exit_code = 128 + int(signum)
            raise err from None
        finally:
            units.close()
            self.display.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        raise _SignalStop(signum)

    def record(self, variant: "Variant", record: dict[str, Any], packed: bytes) -> EpisodeResult | None:
        """Write one finished episode: its folder into place, then its results line."""
        import uuid

        from osguard.runner.trajectory import commit_folder

        episode_id = record["episode_id"]
        if episode_id in self.written:  # one result per episode, whatever the transport did
            return None
        temp = self.run_dir / EPISODES / f".tmp-{episode_id}-{uuid.uuid4().hex[:8]}"
        unpack_folder(packed, temp)
        retried = record.get("retried") or []
        kept_as = Path(retried[-1]["episode_dir"]).name if retried and episode_id in self.retry else None
        commit_folder(temp, self.run_dir / EPISODES / episode_id, keep_previous=kept_as)
        return self._append(record)

    def record_failure(self, variant: "Variant", reason: str) -> EpisodeResult | None:
        """An episode no worker finished: ``env_error`` with the reason, with a folder of its
        own (``outcome.json``) so it counts, and ``--resume --retry-errors`` runs it again."""
        from osguard.runner.loop import mark_retry, outcome_document
        from osguard.runner.trajectory import EpisodeWriter

        episode_id = variant.id
        if episode_id in self.written:
            return None
        result = EpisodeResult(episode_id=episode_id, variant_id=variant.id, outcome=Outcome.ENV_ERROR,
                               reason=reason, spec_hash=variant.spec_hash, family=variant.family,
                               domain=variant.base.domain, episode_dir=f"episodes/{episode_id}")
        kept_as = mark_retry(result, self.retry.get(episode_id))
        EpisodeWriter(self.run_dir, episode_id).commit(
            outcome_document(result, standard=bool(self.episode_args.get("standard")),
                             instruction=variant.base.instruction, agent=self.agent_spec,
                             guardrail=self.guardrail_spec),
            keep_previous=kept_as)
        return self._append(result.to_json())

    def _append(self, record: dict[str, Any]) -> EpisodeResult:
        """The episode's results line (its folder is in place), once; as an EpisodeResult."""
        self.results_file.append(record)
        self.written.add(record["episode_id"])
        fields = {k: record[k] for k in EpisodeResult.__dataclass_fields__ if k in record}
        fields["outcome"] = Outcome(record["outcome"])
        return EpisodeResult(**fields)


def _spool_root() -> Path:
    """Where a worker node runs its episodes before sending them to the driver: next to
    the node's environment records (``$OSGUARD_STATE_DIR``)."""
    from osguard.providers._state import state_dir

    root = state_dir() / "ray-spool"
    root.mkdir(parents=True, exist_ok=True)
    return root


def pack_folder(folder: Path) -> bytes:
    """An episode folder as an uncompressed tar (screenshots are PNG already)."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


def unpack_folder(packed: bytes, dest: Path) -> None:
    """Unpack ``pack_folder``'s tar into the new folder ``dest`` (regular files and folders
    only, nothing outside ``dest``: tarfile's ``data`` filter), fsyncing every file."""
    import io
    import tarfile

    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r") as tar:
        tar.extractall(dest, filter="data")
    for path in dest.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def episode_task(variant: "Variant", agent_spec: str, agent_options: dict[str, Any], guardrail_spec: str | None,
                 guardrail_options: dict[str, Any], provider: Any, episode_args: dict[str, Any],
                 retry_of: dict[str, Any] | None) -> tuple[dict[str, Any], bytes] | None:
    """One episode on whatever worker runs it (a Ray task): run it into a spool folder of
    this node and return its results line and its folder (``pack_folder``); None when it
    was cancelled. The driver writes both (``_RaySuiteRun.record``)."""
    import shutil
    import tempfile

    spool = Path(tempfile.mkdtemp(prefix="run-", dir=_spool_root()))
    try:
        (spool / EPISODES).mkdir()
        try:
            agent = get_agent(agent_spec, variant, **agent_options)
        except Exception as exc:
            message = str(exc) if isinstance(exc, OsguardError) else f"{agent_spec}: {type(exc).__name__}: {exc}"
            agent = _FailedAgent(agent_spec, message)
        guardrail = _make_guardrail(guardrail_spec, guardrail_options)
        try:
            result = run_episode(variant, agent, guardrail, provider=_resolve_provider(provider), run_dir=spool,
                                 episode_id=variant.id, retry_of=retry_of, **episode_args)
        except Interrupted:
            return None
        return result.to_json(), pack_folder(spool / EPISODES / variant.id)
    finally:
        shutil.rmtree(spool, ignore_errors=True)


class _SignalStop(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _FailedAgent:
    """Stands in for an agent that could not be built for one variant, so that episode
    ends as agent_error with the reason instead of stopping the run."""

    def __init__(self, spec: str, message: str):
        self.name = spec
        self._message = message

    def reset(self, instruction: str, variant: Any) -> None:
        from osguard.runner.agent_types import AgentError

        raise AgentError(self._message)

    def propose(self, observation: Any, feedback: str | None = None) -> Any:  # pragma: no cover
        from osguard.runner.agent_types import AgentError

        raise AgentError(self._message)


class _Progress:
    """A rich live display: a bar plus the running count of each outcome."""

    def __init__(self, total: int, already: int, enabled: bool):
        self.enabled = enabled
        self.total = total
        self.already = already
        self.counts: dict[str, int] = {}
        self.in_flight: list[str] = []
        self._progress: Any = None
        self._task: Any = None
        self._lock = threading.Lock()

    def _text(self) -> str:
        short = {"safe_success": "safe", "unsafe_completion": "unsafe", "task_failure": "fail",
                 "unsafe_failure": "unsafe-fail", "retry_termination": "halted",
                 "env_error": "env-err", "agent_error": "agent-err"}
        parts = [f"{short.get(k, k)} {n}" for k, n in sorted(self.counts.items())]
        text = "episodes" + (" (" + ", ".join(parts) + ")" if parts else "")
        if self.in_flight:
            shown = ", ".join(self.in_flight[:3]) + (f" +{len(self.in_flight) - 3}" if len(self.in_flight) > 3 else "")
            text += f" running: {shown}"
        return text

    def running(self, episode_id: str, on: bool) -> None:
        with self._lock:
            if on:
                self.in_flight.append(episode_id)
            elif episode_id in self.in_flight:
                self.in_flight.remove(episode_id)
            if self._progress is not None:
                self._progress.update(self._task, description=self._text())

    def start(self) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self._progress.start()
        self._task = self._progress.add_task(self._text(), total=self.total, completed=self.already)

    def advance(self, result: EpisodeResult) -> None:
        with self._lock:
            self.counts[result.outcome.value] = self.counts.get(result.outcome.value, 0) + 1
            if self._progress is not None:
                self._progress.update(self._task, advance=1, description=self._text())

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
