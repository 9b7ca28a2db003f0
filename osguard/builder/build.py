"""Building a variant: start an environment, run setup and hazards, take the baseline.

``build_variant`` is the one entry point the CLI (``osguard build``), the reference checks
(``osguard check``) and the execution runner share. The result, a ``BuiltVariant``, holds
the running environment, the baseline State the invariants compare against, and a build
record (JSON) saying exactly what was built where: variant id, version and spec hash,
provider, image, environment info, step timings and the baseline manifest.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from osguard.actions import Action
from osguard.builder.archive import stopped_on_failure
from osguard.builder.steps import StepContext, environment_home, run_steps, tasks_dir_for
from osguard.errors import BuildError, EnvironmentError_, OsguardError

if TYPE_CHECKING:
    from osguard.evaluators import EvaluationResult
    from osguard.invariants.types import ProbeRequest, State, TrajectoryView
    from osguard.providers.base import Environment, ExecResult, Provider, Requirements
    from osguard.spec.model import Variant

RECORD_FORMAT = 1


class RequirementsUnmet(BuildError):
    """Raised when the environment lacks what a variant ``requires`` (gui, root, apps)."""

    def __init__(self, variant_id: str, provider: str, missing: list[str], notes: Iterable[str] = ()):
        self.variant_id = variant_id
        self.provider = provider
        self.missing = list(missing)
        note = "; ".join(notes)
        super().__init__(
            f"variant {variant_id} requires {', '.join(self.missing)}, which provider '{provider}' "
            f"does not offer here" + (f" ({note})" if note else "")
        )


@dataclass
class BuiltVariant:
    """A variant built in a running environment.

    Attributes:
        variant: the spec that was built.
        env: the running environment (stop it with ``stop()`` or use ``with``).
        baseline: the State probed right after setup and hazards.
        probe_request: what the baseline covers; probe the final state with the same request.
        record: the build record (JSON-able), also written by ``write_record``.
        ctx: the step context (home folder, tasks dir), reused for postconfig steps.
        hazards: whether the hazards were injected (False: the base task only, a standard
            OSWorld execution).
    """

    variant: "Variant"
    env: "Environment"
    baseline: "State"
    probe_request: "ProbeRequest"
    record: dict[str, Any]
    ctx: StepContext = field(default_factory=StepContext)
    hazards: bool = True

    @property
    def workdir(self) -> str | None:
        """Where shell actions run: the variant's ``workdir`` with ``~`` expanded."""
        return expand_home(self.variant.workdir, self.ctx.home) if self.variant.workdir else None

    def run_steps(self, steps: Iterable[Any], phase: str = "postconfig") -> list[dict[str, Any]]:
        """Run more steps (e.g. the evaluator's postconfig) in this environment."""
        return run_steps(self.env, steps, self.variant, phase=phase, ctx=self.ctx)

    def replay(self, actions: Iterable[Any]) -> list["ExecResult"]:
        """Replay actions in the variant's working directory."""
        return replay(self.env, actions, self.variant.workdir, home=self.ctx.home)

    def probe(self) -> "State":
        """Probe the current state with the baseline's request."""
        from osguard.builder.probe import probe

        return probe(self.env, self.probe_request)

    def stop(self) -> None:
        """Stop the environment (idempotent as far as the provider allows)."""
        try:
            self.env.stop()
        except Exception:  # a dead environment is already stopped
            pass

    def __enter__(self) -> "BuiltVariant":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def resolve_provider(provider: "str | Provider", **options: Any) -> "Provider":
    """A provider object from a name (or the object itself), checked to be usable here.

    Raises:
        UnknownNameError: for an unknown provider name (with the nearest name).
        ProviderUnavailable: when the provider cannot run on this machine.
    """
    from osguard.errors import ProviderUnavailable

    if isinstance(provider, str):
        from osguard.providers import get_provider

        provider = get_provider(provider, **options)
    reason = provider.available()
    if reason:
        raise ProviderUnavailable(f"provider '{provider.name}' is not available here: {reason}")
    return provider


def expand_home(path: str | None, home: str) -> str | None:
    """``~`` and ``~/x`` made absolute against the environment's home."""
    if path is None:
        return None
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


def replay(env: "Environment", actions: Iterable[Any], workdir: str | None = "~", *,
           home: str | None = None, timeout: float = 60) -> list["ExecResult"]:
    """Run actions as an agent would issue them, in order, and return their results.

    Args:
        env: a started environment.
        actions: ``Action`` objects or their YAML forms (shell strings, WAIT/DONE/FAIL,
            ``{pyautogui: CODE}``, ``{shell: CODE}``).
        workdir: the working directory of shell actions (``~`` allowed).
        home: the environment's home (asked when None and ``workdir`` uses ``~``).
        timeout: per-action timeout in seconds.

    Stops after a terminal action (DONE/FAIL), like an episode does.
    """
    if workdir is not None and workdir.startswith("~") and home is None:
        home = environment_home(env)
    directory = expand_home(workdir, home or "/home/user")
    results: list[ExecResult] = []
    for raw in actions:
        action = Action.parse(raw)
        results.append(env.run_action(action, workdir=directory, timeout=timeout))
        if action.is_terminal:
            break
    return results


def _probe_request(variant: "Variant") -> "ProbeRequest":
    from osguard.evaluators import probe_request_for_variant

    return probe_request_for_variant(variant)


def _manifest_summary(state: "State") -> dict[str, Any]:
    files = state.get("files", {})
    kinds: dict[str, int] = {}
    for entry in files.values():
        kinds[entry.get("type", "?")] = kinds.get(entry.get("type", "?"), 0) + 1
    return {"entries": len(files), "by_type": kinds, "hash_algo": state.get("hash_algo"),
            "errors": list(state.get("errors", []))}


START_ATTEMPTS = 3


def start_environment(provider: "Provider", variant: "Variant", *, image: str | None = None,
                      timeout: float = 60, attempts: int = START_ATTEMPTS,
                      template: Any = None) -> tuple["Environment", list[str]]:
    """Start an environment that offers what ``variant`` requires, retrying transient failures.

    A requirement the provider lacks by nature (``osguard.providers.nature``) raises
    ``RequirementsUnmet`` at once: that is a skip. An environment that failed to start, or
    came up without something its provider offers by nature (a display that was slow to
    answer under load), is a transient failure: it is stopped and started again, at most
    ``attempts`` times in all.

    ``template`` (a ``osguard.builder.template.Template``) is restored into the environment
    before its session starts.

    Returns:
        The environment and the reasons of the failed attempts before it (empty when the
        first one worked), for the build record.

    Raises:
        RequirementsUnmet: the provider cannot offer what the variant requires.
        EnvironmentError_: every attempt failed (the message lists each reason).
    """
    from osguard.providers.nature import provider_nature

    requires = variant.requires
    needs_nature = requires.gui or requires.root or requires.apps
    # A shell variant needs no display, but an agent observing screenshots does: a display
    # the provider offers by nature is expected whatever the variant requires (asked only
    # where the provider can say without starting anything).
    nature = (provider_nature(provider, image)
              if needs_nature or callable(getattr(provider, "nature", None)) else None)
    if needs_nature:
        missing = nature.missing(requires)
        if missing:
            raise RequirementsUnmet(variant.id, provider.name, missing, nature.notes)
    expected = requires if nature is None else dataclasses.replace(requires, gui=nature.gui)
    return start_retried(provider, expected, image=image, timeout=timeout, attempts=attempts,
                         template=template, what=f"an environment for {variant.id}")


def start_retried(provider: "Provider", expected: "Requirements", *, image: str | None = None,
                  timeout: float = 60, attempts: int = START_ATTEMPTS, template: Any = None,
                  what: str = "an environment") -> tuple["Environment", list[str]]:
    """Start an environment with the ``expected`` capabilities, at most ``attempts`` times:
    a start that fails, or an environment that comes up without one of them (stopped), is
    retried. ``start_environment`` decides what to expect; the tests start theirs here too.

    Returns:
        The environment and the reasons of the failed attempts before it.

    Raises:
        EnvironmentError_: every attempt failed (the message lists each reason).
    """
    from osguard.errors import ProviderUnavailable

    failures: list[str] = []
    for attempt in range(1, max(1, attempts) + 1):
        try:
            if template is None:
                env = provider.start(image=image, timeout=timeout)
            else:
                env = provider.start(image=image, timeout=timeout, template=template)
        except ProviderUnavailable:
            raise
        except EnvironmentError_ as exc:
            failures.append(f"attempt {attempt}: {exc}")
            continue
        missing = env.capabilities.missing(expected)
        if not missing:
            return env, failures
        failures.append(f"attempt {attempt}: the environment came up without {', '.join(missing)} "
                        f"({'; '.join(env.capabilities.notes) or 'no notes'})")
        try:
            env.stop()
        except Exception:
            pass
    raise EnvironmentError_(f"could not start {what} on provider "
                            f"'{provider.name}' in {len(failures)} attempts: " + " | ".join(failures))


def build_variant(variant: "Variant", provider: "str | Provider" = "local", *, keep: bool = False,
                  commit: bool | str = False, image: str | None = None, start_timeout: float = 60,
                  provider_options: dict[str, Any] | None = None, hazards: bool = True,
                  template: Any = None) -> BuiltVariant:
    """Build a variant: start an environment, run setup and hazards, probe the baseline.

    Args:
        variant: the loaded spec.
        provider: a provider name (``local``, ``docker``, ``osworld``) or object.
        keep: register the environment so that ``osguard env exec/list/down`` find it after
            this process ends (the caller must not stop it).
        commit: on providers that can (docker), commit the provisioned environment as an
            image; ``True`` uses the tag ``osguard/<variant-id>:v<version>``, a string is the tag.
        image: the image to start from (provider-specific; None = the provider's default).
        start_timeout: seconds to wait for the environment's server.
        provider_options: extra options for ``get_provider``.
        hazards: inject the hazards; False builds the base task alone (setup steps only), for
            standard OSWorld executions (the record says ``"hazards": false``).
        template: a ``osguard.builder.template.Template`` of this variant (same spec,
            hazards, provider and image): the environment starts with what the setup and
            hazards made restored, and they are not run again; the ``start:`` steps and the
            baseline probe run as in any build (the record says ``"template"``).

    Returns:
        The running ``BuiltVariant``; stop it when done (or use it as a context manager).

    Raises:
        RequirementsUnmet: the environment lacks gui/root/apps the variant requires.
        BuildError: a step failed (file, line and step index in the message).
        ProviderUnavailable, EnvironmentError_: the environment could not start or died.
    """
    provider_obj = resolve_provider(provider, **(provider_options or {}))
    if template is not None:
        wanted = (variant.id, variant.spec_hash, hazards, provider_obj.name, image)
        have = (template.variant_id, template.spec_hash, template.hazards, template.provider, template.image)
        if wanted != have:
            raise BuildError(f"template of {have} cannot build {wanted} (variant, spec hash, hazards, "
                             "provider and image must match)")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    env, start_failures = start_environment(provider_obj, variant, image=image, timeout=start_timeout,
                                            template=template)
    timings["start_s"] = round(time.perf_counter() - started, 4)
    with stopped_on_failure(env):
        ctx = StepContext(home=environment_home(env), tasks_dir=tasks_dir_for(variant), variant=variant)
        mark = time.perf_counter()
        if template is None:
            run_steps(env, variant.setup, variant, phase="setup", ctx=ctx)
        timings["setup_s"] = round(time.perf_counter() - mark, 4)
        if hazards and template is None:
            mark = time.perf_counter()
            run_steps(env, variant.hazards, variant, phase="hazards", ctx=ctx)
            timings["hazards_s"] = round(time.perf_counter() - mark, 4)
        if variant.start:
            mark = time.perf_counter()
            run_steps(env, variant.start, variant, phase="start", ctx=ctx)
            timings["start_steps_s"] = round(time.perf_counter() - mark, 4)
        mark = time.perf_counter()
        from osguard.builder.probe import probe

        request = _probe_request(variant)
        baseline = probe(env, request)
        timings["baseline_s"] = round(time.perf_counter() - mark, 4)
        record = _record(variant, provider_obj, env, baseline, request, ctx, timings)
        record["hazards"] = hazards
        if template is not None:
            record["template"] = template.describe()
        if start_failures:
            record["start_retries"] = start_failures
        if commit:
            tag = commit if isinstance(commit, str) else f"osguard/{variant.id}:v{variant.version}"
            committer = getattr(provider_obj, "commit", None)
            if committer is None:
                raise BuildError(f"provider '{provider_obj.name}' cannot commit environments as images "
                                 "(--commit needs --provider docker)")
            mark = time.perf_counter()
            committed = committer(env, tag)
            timings["commit_s"] = round(time.perf_counter() - mark, 4)
            record["committed_image"] = tag
            record["committed_image_id"] = committed if isinstance(committed, str) else None
        if keep:
            record["kept"] = _register_kept(env, variant)
        timings["total_s"] = round(time.perf_counter() - started, 4)
        record["timings"] = timings
        return BuiltVariant(variant=variant, env=env, baseline=baseline, probe_request=request,
                            record=record, ctx=ctx, hazards=hazards)


def finish_episode(built: BuiltVariant, trajectory: "TrajectoryView", last_action: Any = None, *,
                   invariants: bool | None = None) -> tuple["State", "EvaluationResult"]:
    """End an episode in OSWorld's order: postconfig once, then the final probe, then judge.

    1. The success check's OSWorld ``postconfig`` steps (a Ctrl+S save, closing a dialog)
       run once in the environment;
    2. the final State is probed (the baseline's request), so invariants see what
       postconfig changed;
    3. the augmented evaluator decides success (without running postconfig again) and
       checks every invariant against that State. The success check's getters see the
       environment through its trusted view (``osguard.providers.view.evaluation_env``).

    The reference checks (``check_variants``) and the runner both end episodes here.

    Args:
        built: the built variant, after the agent's (or a reference's) actions.
        trajectory: the executed actions and the agent's outputs.
        last_action: the episode's last action (``FAIL`` matters for OSWorld's scoring).
        invariants: check the invariants (default: when the hazards were injected; a standard
            OSWorld execution is judged by its success check alone).

    Returns:
        ``(final_state, evaluation)``. A failing postconfig step makes success undecided
        (outcome ``env_error``) rather than raising.

    Raises:
        EnvironmentError_: the environment stopped answering (postconfig or probe).
    """
    from osguard.evaluators import evaluate, postconfig_steps

    steps = postconfig_steps(built.variant)
    postconfig_error: str | None = None
    if steps:
        try:
            built.run_steps(steps, phase="postconfig")
        except BuildError as exc:  # a step failed; a dead environment (EnvironmentDead) propagates
            postconfig_error = f"postconfig failed: {exc}"
    final = built.probe()
    # Success getters read files through the trusted view and run their commands in a fresh
    # evaluation sandbox: an agent that sabotaged the environment's python, PATH, profile
    # or server cannot forge or dodge the success check (providers/view.py).
    from osguard.providers.view import evaluation_env

    result = evaluate(built.variant, evaluation_env(built.env), built.baseline, final, trajectory,
                      last_action=last_action,
                      postconfig_done=True, postconfig_error=postconfig_error,
                      invariants=built.hazards if invariants is None else invariants)
    return final, with_freeze_error(result, built.env)


def with_freeze_error(result: "EvaluationResult", env: Any) -> "EvaluationResult":
    """``result`` with the ``freeze_error`` of ``env``'s trusted view, when its evaluation
    commit ran unfrozen (docker: the pause was refused every time, ``EngineView._frozen``),
    so the episode's evaluation record and the check row say so; else ``result`` itself."""
    from osguard.providers.view import trusted_view_of

    freeze_error = getattr(trusted_view_of(env), "freeze_error", None)
    return dataclasses.replace(result, freeze_error=freeze_error) if freeze_error else result


def _record(variant: "Variant", provider: "Provider", env: "Environment", baseline: "State",
            request: "ProbeRequest", ctx: StepContext, timings: dict[str, float]) -> dict[str, Any]:
    from dataclasses import asdict

    from osguard import __version__

    info = env.info
    return {
        "format": RECORD_FORMAT,
        "variant": {"id": variant.id, "version": variant.version, "spec_hash": variant.spec_hash,
                    "source": variant.source_path, "family": variant.family,
                    "osworld_id": variant.base.osworld_id},
        "provider": provider.name,
        "image": info.image,
        "environment": {"id": info.id, "provider": info.provider, "endpoint": info.endpoint,
                        "image": info.image, "extra": info.extra,
                        "capabilities": env.capabilities.to_json(), "home": ctx.home},
        "osguard_version": __version__,
        "host": {"python": platform.python_version(), "platform": platform.platform()},
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "steps": ctx.timings,
        "probe_request": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(request).items()},
        "baseline": {"summary": _manifest_summary(baseline), "state": baseline},
        "timings": timings,
    }


def _register_kept(env: "Environment", variant: "Variant") -> dict[str, Any]:
    """Describe a kept environment; ``osguard env`` finds it through the providers' state dir.

    Providers record every environment they start in their state folder and end it only
    on ``stop()``; keeping is therefore simply not stopping. The record says where to look.
    """
    entry: dict[str, Any] = {"id": env.info.id, "provider": env.info.provider, "endpoint": env.info.endpoint}
    try:
        from osguard.providers import _state

        path = _state.record_path(env.info.id)
        entry["state_record"] = str(path) if path.exists() else None
    except Exception:  # a provider without a state folder: the endpoint is all we have
        entry["state_record"] = None
    return entry


def default_record_path(variant: "Variant", out: str | Path | None = None) -> Path:
    """Where a build record goes: ``<out>/<variant-id>/record.json`` (out defaults to builds/)."""
    return Path(out or "builds") / variant.id / "record.json"


def write_record(built: BuiltVariant, out: str | Path | None = None) -> Path:
    """Write the build record as JSON and return its path.

    Raises:
        OsguardError: when the output folder cannot be written.
    """
    path = default_record_path(built.variant, out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(built.record, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OsguardError(f"cannot write build record {path}: {exc.strerror or exc}") from None
    return path
