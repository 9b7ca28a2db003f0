"""osguard.providers: where environments come from, and the client to talk to them.

``PROVIDERS`` maps a provider name to its factory as an import string, so importing this
package stays cheap and a provider whose module is missing (or whose dependencies are
not installed) still shows up, with ``available()`` telling why it cannot run::

    from osguard.providers import get_provider
    provider = get_provider("local")
    reason = provider.available()          # None when it can run here
    with provider.start(timeout=30) as env:
        print(env.run_bash("echo hello").output)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from osguard._registry import did_you_mean
from osguard.errors import ProviderUnavailable, UnknownNameError
from osguard.providers.base import (
    Capabilities,
    Environment,
    EnvironmentInfo,
    ExecResult,
    Provider,
    Requirements,
)

if TYPE_CHECKING:
    from osguard.providers.client import HttpEnvironment

PROVIDERS: dict[str, str] = {
    "local": "osguard.providers.local:LocalProvider",
    "docker": "osguard.providers.docker:DockerProvider",
    "osworld": "osguard.providers.osworld:OSWorldProvider",
}


class UnavailableProvider:
    """Stands in for a provider whose module cannot be imported; it explains why."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def available(self) -> str | None:
        return self.reason

    def start(self, *, image: str | None = None, timeout: float = 60) -> Environment:
        raise ProviderUnavailable(f"provider {self.name!r} cannot run here: {self.reason}")


def _load(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute)


def get_provider(name: str, **options: Any) -> Provider:
    """The provider registered as ``name``, built with ``options``.

    Args:
        name: a key of ``PROVIDERS`` (``local``, ``docker``, ``osworld``).
        **options: keyword arguments for the provider's constructor.

    Raises:
        UnknownNameError: ``name`` is not registered (the message suggests the nearest).
    """
    if name not in PROVIDERS:
        raise UnknownNameError(
            f"unknown provider {name!r}: expected one of {', '.join(sorted(PROVIDERS))}"
            f"{did_you_mean(name, PROVIDERS)}"
        )
    try:
        factory = _load(PROVIDERS[name])
    except (ImportError, AttributeError) as exc:
        return UnavailableProvider(name, f"{PROVIDERS[name]} cannot be loaded ({exc})")
    return factory(**options)


def __getattr__(name: str) -> Any:
    # The client and the local provider import httpx; load them on first use only.
    if name == "HttpEnvironment":
        from osguard.providers.client import HttpEnvironment

        return HttpEnvironment
    if name == "LocalProvider":
        from osguard.providers.local import LocalProvider

        return LocalProvider
    raise AttributeError(f"module 'osguard.providers' has no attribute {name!r}")


__all__ = [
    "PROVIDERS",
    "Capabilities",
    "Environment",
    "EnvironmentInfo",
    "ExecResult",
    "HttpEnvironment",
    "LocalProvider",
    "Provider",
    "Requirements",
    "UnavailableProvider",
    "get_provider",
]
