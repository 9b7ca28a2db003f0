"""The provider registry: names, lazy loading, and what an unusable provider says."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from osguard.errors import OsguardError, ProviderUnavailable, UnknownNameError
from osguard.providers import PROVIDERS, UnavailableProvider, get_provider


def test_registry_names() -> None:
    assert PROVIDERS["local"] == "osguard.providers.local:LocalProvider"
    assert PROVIDERS["docker"] == "osguard.providers.docker:DockerProvider"
    assert PROVIDERS["osworld"] == "osguard.providers.osworld:OSWorldProvider"


def test_unknown_provider_suggests_the_nearest() -> None:
    with pytest.raises(UnknownNameError) as caught:
        get_provider("lokal")
    assert str(caught.value) == "unknown provider 'lokal': expected one of docker, local, osworld; did you mean 'local'?"
    with pytest.raises(UnknownNameError) as caught:
        get_provider("qemu")
    assert str(caught.value) == "unknown provider 'qemu': expected one of docker, local, osworld"


def test_missing_module_gives_an_unavailable_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "ghost", "osguard.providers.ghost_provider:GhostProvider")
    provider = get_provider("ghost")
    assert isinstance(provider, UnavailableProvider)
    assert provider.available() == (
        "osguard.providers.ghost_provider:GhostProvider cannot be loaded "
        "(No module named 'osguard.providers.ghost_provider')"
    )
    with pytest.raises(ProviderUnavailable) as caught:
        provider.start()
    assert str(caught.value).startswith("provider 'ghost' cannot run here: osguard.providers.ghost_provider")


def test_local_rejects_images_and_bad_geometry() -> None:
    with pytest.raises(OsguardError) as caught:
        get_provider("local", geometry="big")
    assert str(caught.value) == "local provider: geometry must look like 1920x1080, got 'big'"
    provider = get_provider("local")
    if provider.available() is not None:
        pytest.skip(provider.available())
    with pytest.raises(ProviderUnavailable) as caught:
        provider.start(image="osguard/desktop:base")
    assert str(caught.value) == (
        "the local provider has no images (got image='osguard/desktop:base'); use --provider docker for images"
    )


def test_local_without_bubblewrap_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from osguard.providers.local import LocalProvider

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name, *a, **k))
    monkeypatch.setattr(LocalProvider, "_probe_cache", {})
    assert LocalProvider().available() == "bubblewrap is not installed (apt install bubblewrap)"


def test_importing_providers_stays_cheap() -> None:
    code = "import sys, osguard.providers; print('httpx' in sys.modules, 'osguard.providers.local' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False False\n"
