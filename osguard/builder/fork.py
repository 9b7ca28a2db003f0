"""Forks: a disposable environment in the exact state of another at a given step.

Two ways, on the public builder and ``Environment`` APIs only (any provider):

- ``replay_fork(variant, provider, prefix)``: build the variant afresh (setup, hazards,
  start steps, baseline) and replay the trajectory prefix. Exact for GUI state (windows,
  selections, unsaved edits), at about the cost of a build plus the prefix.
- ``file_fork(source, provider)``: start a fresh environment and copy the *file state* of
  ``source`` into it (a tar of the home folder and of the top folders of every path the
  variant names, modes and mtimes kept), then reuse ``source``'s baseline. Enough where the
  candidate acts on files (shell variants); running applications are not copied.

Both return a ``BuiltVariant`` whose ``record["fork"]`` says ``method`` and the seconds it
took; stop it when done. Invariants judge a fork against the *original* baseline, so a
fork of step k is judged exactly as step k+1 of the source episode would be.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable

from osguard.builder.build import BuiltVariant, build_variant, expand_home, resolve_provider, start_environment
from osguard.builder.steps import StepContext, environment_home
from osguard.errors import BuildError

if TYPE_CHECKING:
    from osguard.providers.base import Provider
    from osguard.spec.model import Variant

_ARCHIVE = "/tmp/.osguard-fork.tar"


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
    try:
        if actions:
            built.replay(actions)
    except BaseException:
        built.stop()
        raise
    built.record["fork"] = {"method": "replay", "prefix": len(actions),
                            "elapsed_s": round(time.perf_counter() - started, 4)}
    return built


def file_fork(source: BuiltVariant, provider: "str | Provider | None" = None) -> BuiltVariant:
    """A fresh environment holding a copy of ``source``'s current file state.

    Args:
        source: a running built variant (any step of an episode).
        provider: where to start the fork (default: ``source``'s provider by name).

    Raises:
        BuildError: the state could not be archived, moved or unpacked.
    """
    started = time.perf_counter()
    provider_obj = resolve_provider(provider if provider is not None else source.env.info.provider)
    paths = fork_paths(source.variant, source.ctx.home, source.probe_request.roots)
    rel = " ".join(shlex.quote(p.lstrip("/")) for p in paths)
    pack = (f"cd / && rm -f {_ARCHIVE} && existing=$(for p in {rel}; do [ -e \"$p\" ] && printf '%s\\n' \"$p\"; done); "
            f"tar --create --file {_ARCHIVE} --preserve-permissions --exclude={_ARCHIVE.lstrip('/')} "
            "--ignore-failed-read --warning=no-file-changed $existing")
    result = source.env.execute(pack, shell=True, timeout=120)
    if result.returncode not in (0, 1):  # 1: a file changed while read (still archived)
        raise BuildError(f"fork of {source.variant.id}: archiving {', '.join(paths)} failed: "
                         f"{(result.error or result.output or '').strip()[:300]}")
    data = source.env.read_file(_ARCHIVE)
    source.env.execute(["rm", "-f", _ARCHIVE], timeout=30)
    env, _failures = start_environment(provider_obj, source.variant)
    try:
        env.write_file(_ARCHIVE, data)
        # a fresh environment holds none of the variant's files: unpacking over it is enough
        # (never clear anything first: a path may be a mount point such as /tmp)
        unpack = (f"cd / && tar --extract --file {_ARCHIVE} --preserve-permissions; rc=$?; "
                  f"rm -f {_ARCHIVE}; exit $rc")
        result = env.execute(unpack, shell=True, timeout=120)
        if result.returncode != 0:
            raise BuildError(f"fork of {source.variant.id}: unpacking the file state failed: "
                             f"{(result.error or result.output or '').strip()[:300]}")
        home = environment_home(env)
        if home != source.ctx.home:
            raise BuildError(f"fork of {source.variant.id}: the new environment's home {home} differs "
                             f"from the source's {source.ctx.home}")
        record = {"variant": source.record.get("variant"), "provider": provider_obj.name,
                  "environment": {"id": env.info.id, "provider": env.info.provider},
                  "fork": {"method": "file", "paths": paths, "bytes": len(data),
                           "elapsed_s": round(time.perf_counter() - started, 4),
                           "source_environment": source.env.info.id}}
        ctx = StepContext(home=home, tasks_dir=source.ctx.tasks_dir, variant=source.variant)
        return replace(source, env=env, record=record, ctx=ctx)
    except BaseException:
        try:
            env.stop()
        except Exception:
            pass
        raise
