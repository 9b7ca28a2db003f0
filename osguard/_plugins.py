"""The one loader of plug-ins: agents (``--agent python:...``) and verifiers
(``--guardrail`` / ``--verifier python:...``) are found and reported the same way.

A plug-in reference is either

- ``package.module:factory``: a callable importable from ``package.module``; or
- ``NAME``: an installed package's entry point ``NAME`` in the group of its kind
  (``osguard.agents`` or ``osguard.verifiers``), declared in its ``pyproject.toml``::

      [project.entry-points."osguard.verifiers"]
      my-guard = "my_guard:make"

Every failure raises the caller's error class with one line naming the spec and what is
wrong (bad syntax, module not importable, no such callable or entry point, a factory
with the wrong signature, or returning something that is not a plug-in of that kind).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

GROUPS = {"agent": "osguard.agents", "verifier": "osguard.verifiers"}


def load_factory(kind: str, ref: str, error: type[Exception]) -> Callable[..., Any]:
    """The factory named by ``ref`` (see the module docstring) for a plug-in of ``kind``
    (``agent`` or ``verifier``).

    Raises:
        error: with ``<kind> 'python:<ref>': ...`` on any failure.
    """
    spec = f"{kind} 'python:{ref}'"
    group = GROUPS[kind]
    module_name, sep, attr = ref.rpartition(":")
    if not sep:
        return _entry_point(spec, group, ref, error)
    if not module_name or not attr:
        raise error(f"{spec}: expected python:package.module:factory or python:NAME of an installed "
                    f"'{group}' entry point")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise error(f"{spec}: cannot import module '{module_name}': {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise error(f"{spec}: module '{module_name}' has no callable '{attr}'")
    return factory


def _entry_point(spec: str, group: str, name: str, error: type[Exception]) -> Callable[..., Any]:
    from importlib.metadata import entry_points

    found = entry_points(group=group)
    matches = [ep for ep in found if ep.name == name]
    if not name or not matches:
        installed = ", ".join(sorted({ep.name for ep in found})) or "none"
        raise error(f"{spec}: expected python:package.module:factory or python:NAME of an installed "
                    f"'{group}' entry point (installed: {installed})")
    try:
        factory = matches[0].load()
    except (ImportError, AttributeError) as exc:
        raise error(f"{spec}: cannot load entry point '{name}' ({matches[0].value}): {exc}") from None
    if not callable(factory):
        raise error(f"{spec}: entry point '{name}' ({matches[0].value}) is not callable")
    return factory


def call_factory(kind: str, ref: str, factory: Callable[..., Any], error: type[Exception],
                 signature: str, *args: Any, **options: Any) -> Any:
    """``factory(*args, **options)``, a signature mismatch reported as the plug-in's error."""
    try:
        return factory(*args, **options)
    except TypeError as exc:
        raise error(f"{kind} 'python:{ref}': the factory must accept {signature}: {exc}") from None


def wrong_type(spec: str, obj: Any, protocol: str) -> str:
    """The message for a factory that returned something else than a plug-in."""
    return f"{spec}: the factory returned {type(obj).__name__}, which lacks {protocol}"
