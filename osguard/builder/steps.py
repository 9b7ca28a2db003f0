"""The step executor: every setup, hazard and postconfig step type of a variant.

A step is ``{type: params}`` in YAML (``osguard.spec.model.Step``); OSWorld's own form
``{"type": T, "parameters": P}`` is accepted too (evaluator postconfig). Each type maps to a
handler ``(env, params, ctx) -> None`` in ``STEPS``. Handlers reach the environment only
through the ``Environment`` protocol, which keeps the same steps working on the local
sandbox, a Docker container and a remote OSWorld VM:

- OSWorld's step types run through ``execute`` / ``launch`` / ``open_file`` and friends;
- osguard's file-making steps (``write``, ``tree``, ``xlsx``, ``config_entry``, ``rule``...)
  are rendered on the host by ``osguard.spec.render`` -- the same renderer the OSWorld
  export uses -- and the operations are applied inside the environment by the same applier
  script (``osguard/spec/_apply_script.py``), run by the same ``python3 -c`` commands the
  export writes as ``execute`` steps. Both paths thus produce the same files by construction.

Handlers raise ``StepFailed`` with a plain message; ``run_steps`` turns it into a
``BuildError`` that names the variant file, the step's line and index.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from osguard._registry import did_you_mean
from osguard.errors import BuildError, EnvironmentDead
from osguard.spec.bounds import SLEEP_MAX_SECONDS, WINDOW_TIMEOUT_DEFAULT_SECONDS, WINDOW_TIMEOUT_MAX_SECONDS
from osguard.spec.render import (  # noqa: F401  (load_generator, xlsx_bytes, docx_bytes: re-exported)
    APPLY_FAILED_MARKER,
    FILE_STEP_TYPES,
    StepFailed,
    applier_commands,
    docx_bytes,
    env_path,
    load_generator,
    render,
    xlsx_bytes,
)

if TYPE_CHECKING:
    from osguard.providers.base import Environment
    from osguard.spec.model import Variant


@dataclass
class StepContext:
    """What a handler may know besides its parameters.

    Attributes:
        home: the environment user's home (``~`` in step paths expands to it).
        tasks_dir: the folder generator modules and ``upload_file`` sources live in.
        variant: the variant being built (None for ad-hoc step lists).
        phase: ``setup``, ``hazards`` or ``postconfig`` (for messages).
        index: the step's index within its phase.
        timings: per-step seconds, filled by ``run_steps``.
    """

    home: str = "/home/user"
    tasks_dir: Path = field(default_factory=lambda: default_tasks_dir())
    variant: "Variant | None" = None
    phase: str = "setup"
    index: int = 0
    timings: list[dict[str, Any]] = field(default_factory=list)

    def path(self, value: Any, what: str = "path") -> str:
        """Expand ``~`` in an environment path; refuse anything that is not a path."""
        value = env_path(value, what)
        if value == "~":
            return self.home
        if value.startswith("~/"):
            return self.home.rstrip("/") + value[1:]
        return value


StepHandler = Callable[["Environment", dict[str, Any], StepContext], None]


def default_tasks_dir() -> Path:
    """The repository's ``tasks/`` folder (generators and small base-task material)."""
    return Path(__file__).resolve().parents[2] / "tasks"


def tasks_dir_for(variant: "Variant | None") -> Path:
    """The ``tasks/`` folder that belongs to a variant's suite.

    Searched upwards from the variant file (a suite is ``<root>/variants/...`` next to
    ``<root>/tasks/``); the repository's own ``tasks/`` otherwise.
    """
    if variant is not None and variant.source_path:
        for parent in Path(variant.source_path).resolve().parents:
            if (parent / "tasks").is_dir() and (parent / "variants").is_dir():
                return parent / "tasks"
    return default_tasks_dir()


# --------------------------------------------------------------------------- helpers


def _command(params: dict[str, Any], what: str = "command") -> tuple[str | list[str], bool]:
    command = params.get("command")
    if isinstance(command, list):
        if not command or not all(isinstance(x, str) for x in command):
            raise StepFailed(f"'{what}' must be a non-empty string or list of strings")
    elif not isinstance(command, str) or not command.strip():
        raise StepFailed(f"'{what}' must be a non-empty string or list of strings")
    shell = params.get("shell", False)
    if not isinstance(shell, bool):
        raise StepFailed("'shell' must be true or false")
    return _substitute(command), shell


# OSWorld's SetupController substitutes these placeholders; osguard's environments all
# use the account password "password" and a 1920x1080 screen unless they say otherwise.
_PLACEHOLDERS = {
    "{CLIENT_PASSWORD}": "password",
    "{SCREEN_WIDTH}": "1920",
    "{SCREEN_HEIGHT}": "1080",
    "{SCREEN_WIDTH_HALF}": "960",
    "{SCREEN_HEIGHT_HALF}": "540",
}


def _substitute(command: str | list[str]) -> str | list[str]:
    def one(text: str) -> str:
        for placeholder, value in _PLACEHOLDERS.items():
            text = text.replace(placeholder, value)
        return text

    return [one(x) for x in command] if isinstance(command, list) else one(command)


def _require(params: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in params]
    if missing:
        raise StepFailed(f"missing parameter(s): {', '.join(repr(m) for m in missing)}")


# --------------------------------------------------------------------------- OSWorld steps


def step_execute(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``execute`` / ``command``: run a command; a non-zero exit status fails the build."""
    command, shell = _command(params)
    result = env.execute(command, shell=shell, timeout=float(params.get("timeout", 120)))
    if not result.ok:
        output = (result.error or result.output or "").strip()
        reason = "timed out" if result.timed_out else f"exit status {result.returncode}"
        raise StepFailed(f"command failed ({reason}): {output[-400:]}")


def step_launch(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``launch``: start a program without waiting for it."""
    from osguard.providers._terminal import with_terminal_log

    command, shell = _command(params)
    # a terminal's output must reach the transcript (not_disclosed): xterm logs to the host
    env.launch(with_terminal_log(env, command, shell), shell=shell)


def step_open(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``open``: open a file with its default application, or start an application by
    name (a bare word, as OSWorld allows); waits for its window, up to
    ``WINDOW_TIMEOUT_MAX_SECONDS``: a cold application on a loaded machine (several
    LibreOffice rows on 2 cores) has taken more than a minute to map its window."""
    from osguard.spec.bounds import WINDOW_TIMEOUT_MAX_SECONDS

    _require(params, "path")
    value = params["path"]
    bare_app = isinstance(value, str) and "/" not in value and not value.startswith("~")
    env.open_file(value if bare_app else ctx.path(value), timeout=WINDOW_TIMEOUT_MAX_SECONDS)


def step_sleep(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``sleep``: wait (at most ``SLEEP_MAX_SECONDS``, so a typo cannot stall a build for hours)."""
    seconds = params.get("seconds")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= SLEEP_MAX_SECONDS:
        raise StepFailed(f"'seconds' must be a number between 0 and {SLEEP_MAX_SECONDS}, got {seconds!r}")
    time.sleep(seconds)


def step_activate_window(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``activate_window``: raise and focus a window by title (or class).

    Unlike OSWorld's single ``wmctrl -a``, waits up to ``timeout`` seconds (default
    ``WINDOW_TIMEOUT_DEFAULT_SECONDS``, at most ``WINDOW_TIMEOUT_MAX_SECONDS``) for
    the window to appear: a program launched by the previous step may still be starting,
    and how long that takes differs between a sandbox, a container and a VM.
    """
    from osguard.errors import EnvironmentError_

    _require(params, "window_name")
    timeout = params.get("timeout", WINDOW_TIMEOUT_DEFAULT_SECONDS)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= WINDOW_TIMEOUT_MAX_SECONDS:
        raise StepFailed(f"'timeout' must be a number of seconds above 0 and at most {WINDOW_TIMEOUT_MAX_SECONDS}, "
                         f"got {timeout!r}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            env.activate_window(str(params["window_name"]), strict=bool(params.get("strict", False)),
                                by_class=bool(params.get("by_class", False)))
            return
        except EnvironmentDead:
            raise
        except EnvironmentError_ as exc:
            if time.monotonic() >= deadline:
                raise StepFailed(f"window {params['window_name']!r} did not appear within {timeout} s: {exc}") from None
            time.sleep(0.25)


def step_wait_for(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``wait_for``: wait until a window (title), a window class or a file appears, or the
    keyboard focus is inside a named widget (``focus_in``), or, with ``gone: true``, until
    it has gone; at most ``timeout`` seconds (default ``WAIT_FOR_TIMEOUT_DEFAULT_SECONDS``,
    at most ``WAIT_FOR_TIMEOUT_MAX_SECONDS``), then ``settle`` seconds more (default 0).

    The event-driven replacement for a fixed ``sleep`` after starting an application: one
    small script polls inside the environment (``osguard.spec.waits``), so the step ends as
    soon as the window maps, however slow or fast the machine is.
    """
    from osguard.spec.waits import WaitProblem, run_wait

    try:
        if isinstance(params, dict) and isinstance(params.get("file"), str):
            params = {**params, "file": ctx.path(params["file"], "file")}
        missed = run_wait(env, params, ctx.home)
    except WaitProblem as exc:
        raise StepFailed(str(exc)) from None
    if missed is not None:
        raise StepFailed(missed)


def step_close_window(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``close_window``: close a window by title (or class)."""
    _require(params, "window_name")
    env.close_window(str(params["window_name"]), strict=bool(params.get("strict", False)),
                     by_class=bool(params.get("by_class", False)))


def step_download(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``download`` is refused: variants are built offline."""
    raise StepFailed(
        "download steps need the network; osguard builds offline: regenerate the file with "
        "'write', 'xlsx', 'docx', 'generate' or ship it under tasks/ and use 'upload_file'"
    )


# --------------------------------------------------------------------------- file-making steps


class OperationFailed(StepFailed):
    """The applier refused an operation; ``op_index`` is its position in the list applied
    (None when unknown: a timeout, a crash)."""

    def __init__(self, message: str, op_index: int | None = None) -> None:
        super().__init__(message)
        self.op_index = op_index


def apply_operations(env: "Environment", ops: list[dict[str, Any]], *, timeout: float = 120) -> None:
    """Apply rendered operations inside the environment: the applier commands the OSWorld
    export writes as ``execute`` steps (``osguard.spec.render.applier_commands``), run
    through ``env.execute``.

    Raises:
        OperationFailed: with the applier's one-line reason and the failed operation's index.
    """
    for command, origins in applier_commands(ops):
        result = env.execute(command, shell=False, timeout=timeout)
        if result.timed_out:
            raise OperationFailed(f"applying the file operations timed out after {timeout:g} s")
        if result.returncode == 0:
            continue
        op_index = None
        marker = (result.output or "").rfind(APPLY_FAILED_MARKER)
        if marker >= 0:
            text = result.output[marker + len(APPLY_FAILED_MARKER):].split()
            if text and text[0].isdigit() and int(text[0]) < len(origins):
                op_index = origins[int(text[0])]
        detail = (result.error or "").strip()
        raise OperationFailed(detail[-400:] or f"the file applier failed (exit status {result.returncode})", op_index)


def _file_step(kind: str) -> StepHandler:
    """The handler of one file-making step type: render on the host, apply in the environment.

    ``run_steps`` recognises these handlers (``handler.file_step``) and applies the
    operations of consecutive file steps in one call.
    """

    def handler(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
        apply_operations(env, render(kind, params, tasks_dir=ctx.tasks_dir) or [])

    handler.__name__ = handler.__qualname__ = f"step_{kind}"
    handler.__doc__ = f"``{kind}``: rendered by ``osguard.spec.render``, applied by its applier."
    handler.file_step = kind  # type: ignore[attr-defined]
    return handler


def step_hazard_command(env: "Environment", params: dict[str, Any], ctx: StepContext) -> None:
    """``command`` (hazards): escape hatch, a shell command that must succeed."""
    params = {"shell": True, **params}
    step_execute(env, params, ctx)


# --------------------------------------------------------------------------- registry

STEPS: dict[str, StepHandler] = {
    # OSWorld step types (SetupController names and parameters)
    "execute": step_execute,
    "command": step_execute,
    "launch": step_launch,
    "open": step_open,
    "upload_file": _file_step("upload_file"),
    "sleep": step_sleep,
    "activate_window": step_activate_window,
    "close_window": step_close_window,
    "wait_for": step_wait_for,
    "download": step_download,
    # osguard file-making steps and hazard steps: one renderer, one applier
    **{kind: _file_step(kind) for kind in FILE_STEP_TYPES if kind != "upload_file"},
}

# In ``hazards:`` the ``command`` type is the shell escape hatch (shell defaults to true).
HAZARD_OVERRIDES: dict[str, StepHandler] = {"command": step_hazard_command}


def get_step(name: str, phase: str = "setup") -> StepHandler:
    """The handler of a step type.

    Raises:
        StepFailed: for an unknown type, with the nearest known name.
    """
    if phase == "hazards" and name in HAZARD_OVERRIDES:
        return HAZARD_OVERRIDES[name]
    try:
        return STEPS[name]
    except KeyError:
        hint = did_you_mean(name, STEPS) or f"; known: {', '.join(sorted(STEPS))}"
        raise StepFailed(f"unknown step type {name!r}{hint}") from None


def _normalize(step: Any) -> tuple[str, Any, int | None]:
    """(type, params, line) of a Step, an OSWorld ``{type, parameters}`` dict or ``{type: params}``."""
    if hasattr(step, "type") and hasattr(step, "params"):
        return step.type, step.params, getattr(step, "line", None)
    if isinstance(step, dict):
        if "type" in step and set(step) <= {"type", "parameters"}:
            return str(step["type"]), step.get("parameters") or {}, None
        if len(step) == 1:
            ((name, params),) = step.items()
            return str(name), {} if params is None else params, None
    raise StepFailed(f"a step is a one-key mapping {{type: params}} or {{type, parameters}}, got {step!r}")


def _location(variant: "Variant | None", line: int | None) -> str:
    source = variant.source_path if variant is not None and variant.source_path else "<steps>"
    try:
        source = str(Path(source).resolve().relative_to(Path.cwd()))
    except ValueError:
        pass
    return f"{source}:{line}" if line is not None else source


@dataclass
class _Rendered:
    """A file step rendered and waiting to be applied with its neighbours."""

    index: int
    name: str
    line: int | None
    ops: list[dict[str, Any]]
    seconds: float


def run_steps(env: "Environment", steps: Iterable[Any], variant: "Variant | None" = None, *,
              phase: str = "setup", ctx: StepContext | None = None) -> list[dict[str, Any]]:
    """Run steps in order through the environment protocol.

    Consecutive file-making steps are rendered one by one and their operations applied
    together (each applier command costs a Python start in the environment); steps applied
    together share that time equally in the timings.

    Args:
        env: a started environment.
        steps: ``Step`` objects, OSWorld ``{type, parameters}`` dicts or ``{type: params}`` dicts.
        variant: the variant the steps belong to (for the tasks/ folder and messages).
        phase: ``setup``, ``hazards`` or ``postconfig``; in ``hazards`` ``command`` is a shell command.
        ctx: a context to reuse (its ``home`` saves one round trip).

    Returns:
        Per-step timings ``[{phase, index, type, seconds}]``.

    Raises:
        BuildError: naming the variant file, line, phase index and step type.
        EnvironmentDead: when the environment stops answering (not a step's fault).
    """
    if ctx is None:
        ctx = StepContext(home=environment_home(env), tasks_dir=tasks_dir_for(variant), variant=variant)
    ctx.phase = phase
    timings: list[dict[str, Any]] = []
    batch: list[_Rendered] = []

    def failure(index: int, name: str, line: int | None, exc: Exception) -> BuildError:
        reason = str(exc) if isinstance(exc, StepFailed) else f"{type(exc).__name__}: {exc}"
        return BuildError(f"{_location(variant, line)}: $.{phase}[{index}] ({name}): {reason}")

    def flush() -> None:
        if not batch:
            return
        ops = [op for rendered in batch for op in rendered.ops]
        started = time.perf_counter()
        try:
            apply_operations(env, ops)
        except EnvironmentDead:
            raise
        except Exception as exc:  # the applier's reason, protocol errors
            culprit = batch[-1]
            op_index = getattr(exc, "op_index", None)
            if op_index is not None:
                for rendered in batch:
                    if op_index < len(rendered.ops):
                        culprit = rendered
                        break
                    op_index -= len(rendered.ops)
            raise failure(culprit.index, culprit.name, culprit.line, exc) from None
        share = (time.perf_counter() - started) / len(batch)
        timings.extend({"phase": phase, "index": r.index, "type": r.name, "seconds": round(r.seconds + share, 4)}
                       for r in batch)
        batch.clear()

    for index, step in enumerate(steps):
        line = getattr(step, "line", None)
        name = "?"
        ctx.index = index
        started = time.perf_counter()
        try:
            name, params, line = _normalize(step)
            handler = get_step(name, phase)
            if isinstance(params, dict):
                params = {k: v for k, v in params.items() if k != "note"}
            elif not (name == "mkdir" and isinstance(params, str)):
                raise StepFailed(f"parameters must be a mapping, got {type(params).__name__}")
            kind = getattr(handler, "file_step", None)
            if kind is not None:
                batch.append(_Rendered(index, name, line, render(kind, params, tasks_dir=ctx.tasks_dir) or [],
                                       time.perf_counter() - started))
                continue
            flush()
            started = time.perf_counter()
            handler(env, params, ctx)
        except (EnvironmentDead, BuildError):
            raise
        except Exception as exc:  # StepFailed, protocol errors, host-side library errors
            flush()  # earlier steps first: their failure is the one to report
            raise failure(index, name, line, exc) from None
        timings.append({"phase": phase, "index": index, "type": name,
                        "seconds": round(time.perf_counter() - started, 4)})
    flush()
    timings.sort(key=lambda timing: timing["index"])
    ctx.timings.extend(timings)
    return timings


def environment_home(env: "Environment") -> str:
    """The environment user's home directory (``~``), asked once per build."""
    result = env.run_bash('printf %s "$HOME"', timeout=30)
    home = (result.output or "").strip()
    return home if result.ok and home.startswith("/") else "/home/user"
