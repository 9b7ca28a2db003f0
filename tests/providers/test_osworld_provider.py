"""The osworld provider without a VM: the missing-extra message and the argument mapping.

Starting the official VM needs desktop-env plus a hypervisor or cloud account, which CI
does not have; what is tested here is everything up to that call.
"""

from __future__ import annotations

import http.server
import importlib.machinery
import importlib.util
import sys
import threading
import time
import types
from types import SimpleNamespace

import pytest

from osguard.errors import EnvironmentError_, OsguardError, ProviderUnavailable
from osguard.providers import get_provider
from osguard.providers.osworld import (  # noqa: I001
    OSWorldProvider,
    accepted_arguments,
    desktop_env_kwargs,
    endpoint_of,
)

NOT_CONFIGURED = ("no OSWorld VM is configured: set OSGUARD_OSWORLD_PROVIDER (vmware, virtualbox, docker, aws, ...) "
                  "and OSGUARD_OSWORLD_PATH_TO_VM, or pass provider_name=... to the provider")


@pytest.fixture(autouse=True)
def _no_vm_configured(monkeypatch):
    for name in ("PROVIDER", "PATH_TO_VM", "REGION", "SNAPSHOT", "HEADLESS", "CLIENT_PASSWORD", "OS_TYPE"):
        monkeypatch.delenv(f"OSGUARD_OSWORLD_{name}", raising=False)


def test_registry_returns_the_adapter():
    provider = get_provider("osworld", provider_name="vmware")
    assert isinstance(provider, OSWorldProvider)
    assert provider.options == {"provider_name": "vmware"}


def test_missing_extra_says_how_to_install(monkeypatch):
    # As if desktop-env were not installed, whatever this machine has.
    monkeypatch.setitem(sys.modules, "desktop_env", None)
    provider = OSWorldProvider(provider_name="vmware")
    assert provider.available() == "desktop-env is not installed: pip install 'osguard[osworld]'"
    with pytest.raises(ProviderUnavailable) as err:
        provider.start()
    assert str(err.value) == "desktop-env is not installed: pip install 'osguard[osworld]'"


def test_broken_install_says_what_is_missing(monkeypatch):
    """desktop-env installed without its dependencies must not look usable."""
    broken = types.ModuleType("desktop_env")
    broken.__path__ = []  # a package whose submodule cannot be found
    broken.__spec__ = importlib.machinery.ModuleSpec("desktop_env", None, is_package=True)
    monkeypatch.setitem(sys.modules, "desktop_env", broken)
    monkeypatch.delitem(sys.modules, "desktop_env.desktop_env", raising=False)
    with pytest.raises(ProviderUnavailable) as err:
        OSWorldProvider(provider_name="vmware").start()
    assert str(err.value) == ("desktop-env is installed but cannot be imported (no module 'desktop_env.desktop_env'): "
                              "pip install 'osguard[osworld]'")


def test_no_vm_configured_is_unavailable_without_importing(monkeypatch):
    """Never start desktop-env's default (it downloads a VM image of many gigabytes)."""
    monkeypatch.setitem(sys.modules, "desktop_env.desktop_env", None)  # importing it would fail loudly
    provider = OSWorldProvider()
    if importlib.util.find_spec("desktop_env") is not None:
        assert provider.available() == NOT_CONFIGURED
    with pytest.raises(ProviderUnavailable) as err:
        provider.start()
    assert str(err.value) == NOT_CONFIGURED


def test_defaults_without_options_or_environment():
    assert desktop_env_kwargs({"provider_name": "docker"}, environ={}) == {
        "provider_name": "docker", "snapshot_name": "init_state", "headless": True, "os_type": "Ubuntu",
        "action_space": "pyautogui", "require_a11y_tree": True,
    }


def test_environment_variables_then_options_win():
    environ = {"OSGUARD_OSWORLD_PROVIDER": "vmware", "OSGUARD_OSWORLD_PATH_TO_VM": "/vms/Ubuntu.vmx",
               "OSGUARD_OSWORLD_HEADLESS": "no", "OSGUARD_OSWORLD_SNAPSHOT": "clean",
               "OSGUARD_OSWORLD_CLIENT_PASSWORD": "password"}
    kwargs = desktop_env_kwargs({}, environ=environ)
    assert (kwargs["provider_name"], kwargs["path_to_vm"], kwargs["headless"], kwargs["snapshot_name"],
            kwargs["client_password"]) == ("vmware", "/vms/Ubuntu.vmx", False, "clean", "password")
    kwargs = desktop_env_kwargs({"provider_name": "aws", "region": "us-east-1", "screen_size": (1280, 720),
                                 "headless": True}, environ=environ)
    assert (kwargs["provider_name"], kwargs["region"], kwargs["screen_size"], kwargs["headless"]) == (
        "aws", "us-east-1", (1280, 720), True)
    assert kwargs["path_to_vm"] == "/vms/Ubuntu.vmx"  # not overridden, still from the environment


def test_bad_boolean_and_unknown_provider_are_user_errors():
    with pytest.raises(OsguardError) as err:
        desktop_env_kwargs({"provider_name": "vmware"}, environ={"OSGUARD_OSWORLD_HEADLESS": "maybe"})
    assert str(err.value) == "$OSGUARD_OSWORLD_HEADLESS='maybe': expected true or false"
    with pytest.raises(OsguardError) as err:
        desktop_env_kwargs({"provider_name": "vmwar"}, environ={})
    assert str(err.value) == ("unknown OSWorld VM provider 'vmwar': expected one of vmware, virtualbox, docker, "
                              "aws, azure, gcp, aliyun, volcengine; did you mean 'vmware'?")


class _OldDesktopEnv:
    """A signature only (never instantiated): DesktopEnv without some newer arguments."""

    def __init__(self, provider_name="vmware", path_to_vm=None, snapshot_name="init_state",
                 action_space="computer_13", headless=False, require_a11y_tree=True):
        raise AssertionError("never called")


class _FlexibleDesktopEnv:
    def __init__(self, provider_name="vmware", **kwargs):
        raise AssertionError("never called")


def test_arguments_are_checked_against_the_installed_signature():
    accepted = accepted_arguments(_OldDesktopEnv)
    assert accepted == {"provider_name", "path_to_vm", "snapshot_name", "action_space", "headless",
                        "require_a11y_tree"}
    # Defaults the installed DesktopEnv does not know are dropped quietly ...
    assert desktop_env_kwargs({"provider_name": "vmware", "path_to_vm": "/vm.vmx"}, environ={},
                              accepted=accepted) == {
        "provider_name": "vmware", "path_to_vm": "/vm.vmx", "snapshot_name": "init_state", "headless": True,
        "action_space": "pyautogui", "require_a11y_tree": True,
    }
    # ... what the user asked for is not.
    with pytest.raises(OsguardError) as err:
        desktop_env_kwargs({"provider_name": "aws", "region": "eu-west-1"}, environ={}, accepted=accepted)
    assert str(err.value) == ("DesktopEnv does not accept region; it accepts: action_space, headless, path_to_vm, "
                              "provider_name, require_a11y_tree, snapshot_name")
    assert accepted_arguments(_FlexibleDesktopEnv) is None


def test_endpoint_of_a_started_desktop_env():
    assert endpoint_of(SimpleNamespace(vm_ip="localhost", server_port=5001)) == "http://localhost:5001"
    assert endpoint_of(SimpleNamespace(vm_ip="127.0.0.1", server_port=None)) == "http://127.0.0.1:5000"
    with pytest.raises(EnvironmentError_) as err:
        endpoint_of(SimpleNamespace(vm_ip=None))
    assert str(err.value) == ("DesktopEnv started without a VM address (vm_ip is empty); "
                              "check its log and the VM provider's settings")


# ---------------------------------------------------------------- start: ids and timeout
# Stand-ins for desktop-env's DesktopEnv (a VM is not available here): one whose server
# is a real HTTP server on loopback, one whose constructor never returns.

class _PlatformHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"Linux")

    def log_message(self, *args):
        pass


@pytest.fixture
def vm_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PlatformHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _install_stand_in(monkeypatch, desktop_env_class):
    package = types.ModuleType("desktop_env")
    package.__path__ = []
    package.__spec__ = importlib.machinery.ModuleSpec("desktop_env", None, is_package=True)
    module = types.ModuleType("desktop_env.desktop_env")
    module.DesktopEnv = desktop_env_class
    monkeypatch.setitem(sys.modules, "desktop_env", package)
    monkeypatch.setitem(sys.modules, "desktop_env.desktop_env", module)


def test_two_starts_in_the_same_second_get_distinct_ids(monkeypatch, vm_server):
    """Two environments started within one second must never share an id (the id was
    ``osworld-<vm>-<unix seconds>``, so records and `env down` confused them)."""
    closed = []

    class StandIn:
        def __init__(self, provider_name, action_space="pyautogui", require_a11y_tree=True, headless=True,
                     snapshot_name="init_state", os_type="Ubuntu"):
            self.vm_ip, self.server_port = "127.0.0.1", vm_server

        def close(self):
            closed.append(self)

    _install_stand_in(monkeypatch, StandIn)
    monkeypatch.setattr("time.time", lambda: 1_800_000_000.0)  # every start in the same second
    provider = OSWorldProvider(provider_name="docker")
    first, second = provider.start(timeout=10), provider.start(timeout=10)
    try:
        assert first.info.id != second.info.id
        assert first.info.id.startswith("osworld-docker-1800000000-")
        assert first.is_alive() and second.is_alive()
    finally:
        first.stop()
        second.stop()
    assert len(closed) == 2


def test_a_hanging_desktop_env_start_times_out_and_its_vm_is_closed_later(monkeypatch):
    """``DesktopEnv(...)`` that never returns must not hang ``start()`` forever; a VM it
    returns after the timeout must be closed, not leaked."""
    release, closed = threading.Event(), threading.Event()

    class Hangs:
        def __init__(self, provider_name, action_space="pyautogui", require_a11y_tree=True, headless=True,
                     snapshot_name="init_state", os_type="Ubuntu", path_to_vm=None):
            release.wait(30)
            self.vm_ip, self.server_port = "127.0.0.1", 9

        def close(self):
            closed.set()

    _install_stand_in(monkeypatch, Hangs)
    began = time.monotonic()
    with pytest.raises(EnvironmentError_) as err:
        OSWorldProvider(provider_name="vmware", path_to_vm="/vm.vmx").start(timeout=0.5)
    assert time.monotonic() - began < 5
    assert str(err.value) == ("desktop-env did not start the OSWorld VM (provider 'vmware') within 0.5 s; "
                              "gave up on it (a VM it starts later is closed)")
    assert not closed.is_set()
    release.set()  # the abandoned constructor returns at last: its VM is closed
    assert closed.wait(10)


def test_a_failing_desktop_env_start_is_an_environment_error(monkeypatch):
    class Fails:
        def __init__(self, provider_name, action_space="pyautogui", require_a11y_tree=True, headless=True,
                     snapshot_name="init_state", os_type="Ubuntu"):
            raise RuntimeError("no hypervisor")

    _install_stand_in(monkeypatch, Fails)
    with pytest.raises(EnvironmentError_) as err:
        OSWorldProvider(provider_name="vmware").start(timeout=5)
    assert str(err.value) == "desktop-env could not start the OSWorld VM (provider 'vmware'): RuntimeError: no hypervisor"
