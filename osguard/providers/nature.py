"""What a provider's environments offer by nature, decided once per provider per run.

A variant is only ever skipped because the provider *cannot* offer what it requires (no
root in the local sandbox, no LibreOffice installed): never because one environment came
up without its display under load. ``provider_nature`` answers the first question once;
``osguard.builder.build`` then treats an environment that lacks something its provider
offers by nature as a failed start (retried), not as a reason to skip.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from osguard.errors import EnvironmentError_, OsguardError

if TYPE_CHECKING:
    from osguard.providers.base import Capabilities

__all__ = ["CapabilityProbeFailed", "DEFAULT_PROBE_TIMEOUT", "provider_nature"]

DEFAULT_PROBE_TIMEOUT = 120.0

# keyed by the provider object itself (weakly), never by id(): a provider freed by the
# garbage collector can hand its id to a new one, which then inherited the old answer
_cache: "weakref.WeakKeyDictionary[Any, dict[str | None, Capabilities]]" = weakref.WeakKeyDictionary()
_strong: dict[int, tuple[Any, dict[str | None, "Capabilities"]]] = {}  # providers without weakref support
_lock = threading.Lock()


def _answers(provider: Any) -> dict[str | None, "Capabilities"]:
    try:
        return _cache.setdefault(provider, {})
    except TypeError:  # no __weakref__ slot: held strongly, so its id cannot be reused
        return _strong.setdefault(id(provider), (provider, {}))[1]


class CapabilityProbeFailed(OsguardError):
    """Raised when a provider's capabilities could not be learned (its probe environment did
    not start, or took longer than the timeout). Loud on purpose: guessing would turn proofs
    into skips."""


def provider_nature(provider: Any, image: str | None = None, *,
                    timeout: float = DEFAULT_PROBE_TIMEOUT) -> "Capabilities":
    """The capabilities ``provider``'s environments have by nature, cached per provider object.

    Providers that know without starting anything implement ``nature(image)``; for others
    one short-lived environment is started (within ``timeout`` seconds) and read.

    Raises:
        CapabilityProbeFailed: the probe environment did not start in time.
    """
    with _lock:
        known = _answers(provider).get(image)
    if known is not None:
        return known
    nature = getattr(provider, "nature", None)
    if callable(nature):
        caps = nature(image=image)
    else:
        caps = _probe_by_starting(provider, image, timeout)
    with _lock:
        _answers(provider)[image] = caps
    return caps


def _probe_by_starting(provider: Any, image: str | None, timeout: float) -> "Capabilities":
    name = getattr(provider, "name", type(provider).__name__)
    try:
        env = provider.start(image=image, timeout=timeout)
    except EnvironmentError_ as exc:
        raise CapabilityProbeFailed(
            f"could not learn what provider '{name}' offers: its probe environment did not start "
            f"within {timeout:g} s ({exc})") from None
    try:
        return env.capabilities
    finally:
        try:
            env.stop()
        except Exception:
            pass
