"""Fixtures shared by the provider tests: one parametrization over every registered provider.

``provider_name`` iterates ``osguard.providers.PROVIDERS`` and skips, with the provider's
own reason, those that cannot run on this machine. ``env`` is one environment per
provider for the whole module (starting one is cheap, but most checks only read);
``fresh_env`` is a new environment per test, for tests that break it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from osguard.providers import PROVIDERS, get_provider

from _support import start_as_built, state_dir


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep test environments' records and homes out of the user's ~/.cache."""
    with state_dir(tmp_path_factory.mktemp("osguard-envs")):
        yield


@pytest.fixture(scope="module", params=sorted(PROVIDERS))
def provider_name(request: pytest.FixtureRequest) -> str:
    name = request.param
    reason = get_provider(name).available()
    if reason is not None:
        pytest.skip(f"provider {name} is not available here: {reason}")
    return name


@pytest.fixture(scope="module")
def env(provider_name: str, _private_state_dir: None):
    environment = start_as_built(get_provider(provider_name), timeout=120)
    yield environment
    environment.stop()


@pytest.fixture()
def fresh_env(provider_name: str):
    environment = start_as_built(get_provider(provider_name), timeout=120)
    yield environment
    environment.stop()


def _wait_until(predicate, timeout: float = 10.0, interval: float = 0.1):
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


@pytest.fixture()
def wait_until():
    """Poll ``predicate`` until it returns a truthy value (returned) or time runs out (None)."""
    return _wait_until
