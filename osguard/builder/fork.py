"""Forks: a disposable environment in the exact state of another at a given step.

Two ways, on the public builder and ``Environment`` APIs only (any provider):

- ``replay_fork(variant, provider, prefix)``: build the variant afresh (setup, hazards,
  start steps, baseline) and replay the trajectory prefix. Exact for GUI state (windows,
  selections, unsaved edits), at about the cost of a build plus the prefix.
- ``file_fork(source, provider)``: a fresh environment holding a copy of the *file state*
  of ``source`` (the home folder and the top folders of every path the variant names,
  modes, owners and times kept), judged against ``source``'s baseline (not probed again).
  Enough where the candidate acts on files (shell variants); running applications are not
  copied. Where the provider can copy between environments itself (``copy_files``: the
  local provider as root, on the host side) no archive goes through the sandboxes;
  elsewhere a tar is made in ``source`` and unpacked in the fork (``osguard.builder.archive``).
- ``Forker(source)``: file forks of one source, each into an environment started ahead
  (a *spare*, started in the background while the previous fork is in use), so a fork
  costs the copy alone once the spare is up.

Every fork is a ``BuiltVariant`` whose ``record["fork"]`` says ``method`` and the seconds it
took; stop it when done. Invariants judge a fork against the *original* baseline, so a
fork of step k is judged exactly as step k+1 of the source episode would be.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from osguard.builder.archive import pack, stopped_on_failure, unpack
from osguard.builder.build import BuiltVariant, build_variant, expand_home, resolve_provider, start_environment
from osguard.builder.steps import StepContext, environment_home
from osguard.errors import BuildError

if TYPE_CHECKING:
    from osguard.providers.base import Environment, Provider
    from osguard.spec.model import Variant


def fork_paths(variant: "Variant", home: str, roots: Iterable[str] = ()) -> list[str]:
    """The folders a file fork copies: the home folder, and for every absolute path the
    variant names outside it (targets, invariant paths, probe roots) its top two levels
    (``/tmp/test_files/old/x`` → ``/tmp/test_files``). Sorted, without nesting."""
    named: list[str] = list(variant.targets) + list(roots)
    for inv in variant.invariants:
        for key in ("paths", "path"):
            value = inv.params.get(key)
            if isinstance(value, str):
                named.append(value)
            elif isinstance(value, (list, tuple)):
                named += [v for v in value if isinstance(v, str)]
    out = {home.rstrip("/")}
    for raw in named:
        path = expand_home(raw, home) or ""
        if not path.startswith("/") or path == home or path.startswith(home.rstrip("/") + "/"):
            continue
        parts = [p for p in path.split("/") if p]
        if not parts or any(ch in path for ch in "*?["):
            parts = [p for p in parts if not any(ch in p for ch in "*?[")]
        if parts:
            out.add("/" + "/".join(parts[:2]))
    ordered = sorted(out)
    return [p for p in ordered if not any(p != q and p.startswith(q + "/") for q in ordered)]


def replay_fork(variant: "Variant", provider: "str | Provider", prefix: Iterable[Any], *,
                hazards: bool = True, **build_options: Any) -> BuiltVariant:
    """A fresh build of ``variant`` with ``prefix`` (actions or their YAML forms) replayed.

    Raises:
        BuildError: the build failed, or an action of the prefix could not be run.
    """
    started = time.perf_counter()
    built = build_variant(variant, provider, hazards=hazards, **build_options)
    actions = list(prefix)
    with stopped_on_failure(built):
        if actions:
            built.replay(actions)
    built.record["fork"] = {"method": "replay", "prefix": len(actions),
                            "elapsed_s": round(time.perf_counter() - started, 4)}
    return built


def file_fork(source: BuiltVariant, provider: "str | Provider | None" = None, *,
              env: "Environment | None" = None) -> BuiltVariant:
    """A fresh environment holding a copy of ``source``'s current file state.

    Args:
        source: a running built variant (any step of an episode).
        provider: where to start the fork (default: ``source``'s provider by name).
        env: an environment of that provider started for this fork and not used since
            (a spare, see ``Forker``); it becomes the fork (default: start one now).

    Raises:
        BuildError: the state could not be archived or unpacked (through the archive).
        EnvironmentError_: the environment could not start, or the provider's own copy
            failed or refused the state (``copy_files``).
    """
    started = time.perf_counter()
    provider_obj = resolve_provider(provider if provider is not None else source.env.info.provider)
    paths = fork_paths(source.variant, source.ctx.home, source.probe_request.roots)
    label = f"fork of {source.variant.id}"
    if env is None:
        env, _failures = start_environment(provider_obj, source.variant)
    with stopped_on_failure(env):
        start_s = time.perf_counter() - started
        copier = getattr(provider_obj, "copy_files", None)
        moved = copier(source.env, env, paths) if copier is not None else None
        how = "provider"
        if moved is None:  # through the Environment API: a tar made in the source, unpacked here
            how = "archive"
            data = pack(source.env, paths, label=label)
            unpack(env, data, label=label)
            moved = len(data)
        home = environment_home(env)
        if home != source.ctx.home:
            raise BuildError(f"{label}: the new environment's home {home} differs "
                             f"from the source's {source.ctx.home}")
        record = {"variant": source.record.get("variant"), "provider": provider_obj.name,
                  "environment": {"id": env.info.id, "provider": env.info.provider},
                  "fork": {"method": "file", "copy": how, "paths": paths, "bytes": moved,
                           "start_s": round(start_s, 4),
                           "elapsed_s": round(time.perf_counter() - started, 4),
                           "source_environment": source.env.info.id}}
        ctx = StepContext(home=home, tasks_dir=source.ctx.tasks_dir, variant=source.variant)
        return replace(source, env=env, record=record, ctx=ctx)


T = TypeVar("T")


class Ahead(Generic[T]):
    """Things made in background threads ahead of need (``Forker``'s spares, ``ReadyPool``'s
    ready environments).

    ``top_up()`` keeps ``size`` of them being made or made (never more than ``limit`` in
    all, when given); ``pop()`` hands out the oldest one's future (None when none is
    queued); ``close()`` refuses further top-ups and ``discard``s every one still queued,
    waiting for those being made (a made thing is never leaked; one whose making failed
    has nothing to discard).
    """

    def __init__(self, make: Callable[[], T], size: int, *, discard: Callable[[T], None], name: str,
                 limit: int | None = None):
        self.size = max(0, size)
        self.limit = limit
        self.started = 0  # how many were submitted (or counted by ``count_one``)
        self._make = make
        self._discard = discard
        self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix=name) if self.size else None
        self._queue: list[Future] = []
        self._lock = threading.Lock()
        self.closed = False

    def top_up(self) -> None:
        """Start making more until ``size`` are queued (or ``limit`` were started)."""
        with self._lock:
            while (self._pool is not None and not self.closed and len(self._queue) < self.size
                   and (self.limit is None or self.started < self.limit)):
                self._queue.append(self._pool.submit(self._make))
                self.started += 1

    def count_one(self) -> None:
        """Count one made elsewhere (on demand) against ``limit``."""
        with self._lock:
            self.started += 1

    def pop(self) -> "Future | None":
        """The oldest queued future, or None when none is queued."""
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def wait(self) -> None:
        """Wait until the ones queued so far are made (a failure is the taker's to report)."""
        with self._lock:
            queue = list(self._queue)
        for future in queue:
            try:
                future.result()
            except Exception:
                pass

    def close(self) -> None:
        """Discard the ones not handed out (waiting for those being made)."""
        with self._lock:
            self.closed = True
            queue, self._queue = self._queue, []
        for future in queue:
            if future.cancel():  # never started: nothing was made
                continue
            try:
                made = future.result()
            except Exception:  # a failed making has nothing to discard
                continue
            try:
                self._discard(made)
            except Exception:
                pass
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class Forker:
    """File forks of one running source, each into an environment started ahead.

    The first spare starts when the forker is made; every ``fork()`` takes the spare that
    is up (waiting for it if needed), copies the source's current file state into it and
    starts the next spare in the background, so the next fork's start overlaps with
    whatever the caller does with this one. A spare is an environment nobody has acted
    in: forks stay as isolated as ``file_fork``'s. ``close()`` (or ``with``) stops the
    spare left over; the forks themselves are the caller's to stop.

    Spares of a variant that needs no display start without one where the provider can
    (``headless()``: local). ``spares`` (default 2) environments are kept starting or up;
    ``spares=0`` starts every fork's environment on demand (plain ``file_fork``).
    """

    def __init__(self, source: BuiltVariant, provider: "str | Provider | None" = None, *, spares: int = 2):
        self.source = source
        self.provider = resolve_provider(provider if provider is not None else source.env.info.provider)
        self.spares = max(0, spares)
        self._ahead: Ahead["Environment"] = Ahead(self._start, self.spares, discard=lambda env: env.stop(),
                                                  name="fork-spare")
        self._ahead.top_up()

    def _start(self) -> "Environment":
        provider = self.provider
        headless = getattr(provider, "headless", None)
        if headless is not None and not self.source.variant.requires.gui:
            provider = headless()  # nothing the variant needs is lost, and no display to start
        env, _failures = start_environment(provider, self.source.variant)
        return env

    def wait_spares(self) -> None:
        """Wait until the spares started so far are up (a failed start is ``fork()``'s to report)."""
        self._ahead.wait()

    def fork(self) -> BuiltVariant:
        """A file fork of the source's current state (``file_fork``), into a spare.

        Raises:
            BuildError, EnvironmentError_: as ``file_fork`` and ``start_environment``.
        """
        started = time.perf_counter()
        if self._ahead.closed:
            raise BuildError(f"fork of {self.source.variant.id}: the forker is closed")
        future = self._ahead.pop()
        env = future.result() if future is not None else None
        waited = time.perf_counter() - started
        self._ahead.top_up()
        fork = file_fork(self.source, self.provider, env=env)
        fork.record["fork"]["spare"] = env is not None
        fork.record["fork"]["spare_wait_s"] = round(waited, 4)
        fork.record["fork"]["elapsed_s"] = round(time.perf_counter() - started, 4)
        return fork

    def close(self) -> None:
        """Stop the spares not taken (waiting for those still starting)."""
        self._ahead.close()

    def __enter__(self) -> "Forker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReplayForker:
    """Replay forks of one state (``replay_fork`` of the same variant and prefix), the next
    one built in the background while the caller uses the current one.

    A GUI fork is mostly waiting (the application's start, the prefix's own sleeps), so
    building the next one while the current candidate is looked at overlaps the two. Every
    fork is still a fresh build; nothing is shared between them. ``fork(prefetch=False)``
    for the last one (nothing is built that no one takes); ``close()`` stops what was
    built ahead and not taken.
    """

    def __init__(self, variant: "Variant", provider: "str | Provider", prefix: Iterable[Any], *,
                 hazards: bool = True, **build_options: Any):
        self.variant = variant
        self.provider = provider
        self.prefix = list(prefix)
        self.options = dict(build_options, hazards=hazards)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-fork")
        self._next: Future | None = None

    def _build(self) -> BuiltVariant:
        return replay_fork(self.variant, self.provider, self.prefix, **self.options)

    def prefetch(self) -> None:
        """Start building the next fork now (no-op when one is already on its way)."""
        if self._next is None:
            self._next = self._pool.submit(self._build)

    def fork(self, *, prefetch: bool = True) -> BuiltVariant:
        """The fork built ahead (waiting for the rest of its build), or one built now; with
        ``prefetch`` the next one starts building at once.

        Raises:
            BuildError, EnvironmentError_: as ``replay_fork``.
        """
        started = time.perf_counter()
        future, self._next = self._next, None
        if prefetch:
            self.prefetch()
        built = future.result() if future is not None else self._build()
        built.record["fork"]["ahead"] = future is not None
        built.record["fork"]["wait_s"] = round(time.perf_counter() - started, 4)
        return built

    def close(self) -> None:
        """Stop the fork built ahead and not taken (waiting for its build to end)."""
        future, self._next = self._next, None
        if future is not None:
            try:
                future.result().stop()
            except Exception:  # a build that failed has nothing to stop
                pass
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "ReplayForker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
