"""The verifier registry: a spec string names a factory and its argument.

Spec grammar (``NAME`` or ``NAME:ARG``; the longest registered name wins, so model names
may contain colons):

- ``allow-all``: approves every action (the unguarded baseline);
- ``scripted:FILE``: a YAML list of ``{match: REGEX, label, feedback}`` rules over the
  action code; the first match wins, otherwise ``allowed``;
- ``rules``: the deterministic offline baseline (destructive commands, permission
  broadening, paths outside the task's scope, reading secrets...);
- ``scout:llm`` / ``scout:llm:MODEL``: the prompted multimodal guardrail on any
  OpenAI-compatible endpoint;
- ``scout:lookahead``: runs the candidate in a fork of the state and judges the difference
  (``osguard.scout.lookahead``); ``scout:lookahead+llm:MODEL`` gives that difference to
  ``scout:llm`` as evidence;
- ``deaction`` / ``deaction:MODEL``: the DeAction-style two-stage baseline;
- ``python:pkg.module:factory`` or ``python:NAME`` (an ``osguard.verifiers`` entry
  point): a plug-in (``osguard._plugins``); ``factory(**options)`` returns a ``Verifier``.

``get_verifier(spec, **options)`` passes ``options`` (``model``, ``base_url``,
``api_key``, ``timeout_s``, ``max_retries``...) to the factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from osguard._registry import did_you_mean
from osguard.errors import UnknownNameError
from osguard.scout.types import ScoutError, Verifier

Factory = Callable[..., Verifier]


@dataclass(frozen=True)
class _Entry:
    name: str
    factory_path: str  # "module:function", imported lazily so the registry stays cheap
    arg: str | None  # how the argument is shown in help ("FILE", "MODEL"), None: no argument
    arg_required: bool
    summary: str


_REGISTRY: dict[str, _Entry] = {}
_PLUGINS: dict[str, Factory] = {}


def register_verifier(name: str, factory: Factory | str, *, arg: str | None = None,
                      arg_required: bool = False, summary: str = "") -> None:
    """Register a verifier factory under ``name``.

    Args:
        name: the spec prefix (e.g. ``"rules"``); may contain colons (``"scout:llm"``).
        factory: a callable ``factory(arg, **options) -> Verifier`` or its
            ``"module:function"`` import path (imported on first use).
        arg: the argument's placeholder for help texts, or None when it takes none.
        arg_required: whether ``NAME`` alone (without ``:ARG``) is an error.
        summary: one line for ``osguard score --help`` and error messages.
    """
    if callable(factory):
        path = f"<plugin {name}>"
        _PLUGINS[path] = factory
    else:
        path = factory
    _REGISTRY[name] = _Entry(name, path, arg, arg_required, summary)


def verifier_names() -> list[str]:
    """The registered names with their argument placeholders (``scripted:FILE``...)."""
    out = []
    for entry in sorted(_REGISTRY.values(), key=lambda e: e.name):
        if entry.arg is None:
            out.append(entry.name)
        elif entry.arg_required:
            out.append(f"{entry.name}:{entry.arg}")
        else:
            out.append(f"{entry.name}[:{entry.arg}]")
    return out


def _split(spec: str) -> tuple[_Entry, str | None]:
    best: _Entry | None = None
    for entry in _REGISTRY.values():
        if spec == entry.name or spec.startswith(entry.name + ":"):
            if best is None or len(entry.name) > len(best.name):
                best = entry
    if best is None:
        head = spec.split(":", 1)[0]
        candidates = sorted(set(_REGISTRY) | {n.split(":", 1)[0] for n in _REGISTRY})
        hint = did_you_mean(spec, candidates) or did_you_mean(head, candidates)
        raise UnknownNameError(
            f"unknown verifier '{spec}'{hint} (known: {', '.join(verifier_names())})")
    arg = spec[len(best.name) + 1:] if len(spec) > len(best.name) else None
    if arg == "":
        arg = None
    if best.arg_required and arg is None:
        raise ScoutError(f"verifier '{best.name}' needs an argument: {best.name}:{best.arg}")
    if best.arg is None and arg is not None:
        raise ScoutError(f"verifier '{best.name}' takes no argument (got '{spec}')")
    return best, arg


def _load_factory(entry: _Entry) -> Factory:
    if entry.factory_path in _PLUGINS:
        return _PLUGINS[entry.factory_path]
    module_name, _, attr = entry.factory_path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def get_verifier(spec: str, **options: Any) -> Verifier:
    """Build the verifier named by ``spec`` (see the module docstring for the grammar).

    Raises:
        UnknownNameError: when no registered name matches (with a suggestion).
        ScoutError: when the argument is missing, unexpected or invalid.
    """
    entry, arg = _split(spec.strip())
    verifier = _load_factory(entry)(arg, **options)
    if not isinstance(verifier, Verifier):
        from osguard._plugins import wrong_type

        raise ScoutError(wrong_type(f"verifier '{spec}'", verifier, "name/judge (the Verifier protocol)"))
    return verifier


def _python_factory(arg: str | None, **options: Any) -> Verifier:
    """``python:pkg.module:factory`` or ``python:NAME`` (an ``osguard.verifiers`` entry
    point): a third-party verifier factory, loaded by ``osguard._plugins``."""
    from osguard._plugins import call_factory, load_factory

    assert arg is not None
    factory = load_factory("verifier", arg, ScoutError)
    return call_factory("verifier", arg, factory, ScoutError, "(**options)", **options)


register_verifier("allow-all", "osguard.scout.verifiers.basic:allow_all_factory",
                  summary="approve every action (no guardrail)")
register_verifier("scripted", "osguard.scout.verifiers.basic:scripted_factory", arg="FILE",
                  arg_required=True, summary="YAML rules {match, label, feedback}; first match wins")
register_verifier("rules", "osguard.scout.verifiers.rules:rules_factory",
                  summary="deterministic offline baseline (destructive, permissions, scope, secrets)")
register_verifier("scout:llm", "osguard.scout.verifiers.llm:llm_factory", arg="MODEL",
                  summary="prompted multimodal guardrail on an OpenAI-compatible model")
register_verifier("scout:lookahead", "osguard.scout.lookahead:lookahead_factory",
                  summary="executes the candidate in a fork of the state, diffs it, judges by generic rules")
register_verifier("scout:lookahead+llm", "osguard.scout.lookahead:hybrid_factory", arg="MODEL",
                  summary="scout:llm with the look-ahead diff as extra evidence")
register_verifier("deaction", "osguard.scout.verifiers.llm:deaction_factory", arg="MODEL",
                  summary="DeAction-style baseline: fast check, then systematic analysis")
register_verifier("python", _python_factory, arg="pkg.module:factory", arg_required=True,
                  summary="plug-in verifier factory by import path")
