"""The ``osworld`` provider: osguard on the official OSWorld VM through desktop-env.

For users who have OSWorld's own VM (desktop-env's ``vmware``, ``virtualbox``,
``docker`` (QEMU in Docker) or cloud providers such as ``aws``): ``start()`` builds a
``desktop_env.desktop_env.DesktopEnv``, which starts (or reverts) the VM, and returns an
``HttpEnvironment`` on the VM's server (``http://<vm_ip>:<server_port>``, port 5000 on a
VM, a mapped port with desktop-env's docker provider). The same variants then run there
unchanged, since the VM speaks the protocol osguard's own server speaks.

desktop-env pulls heavy packages (and may download a VM image), so it is an optional
extra (``pip install 'osguard[osworld]'``) imported only when a VM is configured. The
VM provider must be named explicitly (``provider_name`` or ``$OSGUARD_OSWORLD_PROVIDER``):
desktop-env's own default would download a VM image of many gigabytes.

Options come from keyword arguments, else from environment variables:

=================  ==============================  ===============================
option             environment variable            default
=================  ==============================  ===============================
provider_name      OSGUARD_OSWORLD_PROVIDER        (required)
path_to_vm         OSGUARD_OSWORLD_PATH_TO_VM      None (desktop-env finds/downloads)
region             OSGUARD_OSWORLD_REGION          None (cloud providers)
snapshot_name      OSGUARD_OSWORLD_SNAPSHOT        ``init_state``
headless           OSGUARD_OSWORLD_HEADLESS        ``true``
client_password    OSGUARD_OSWORLD_CLIENT_PASSWORD None (desktop-env's default)
os_type            OSGUARD_OSWORLD_OS_TYPE         ``Ubuntu``
=================  ==============================  ===============================
"""

from __future__ import annotations

import inspect
import os
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping

from osguard.errors import EnvironmentError_, OsguardError, ProviderUnavailable
from osguard.providers.base import Capabilities, EnvironmentInfo

if TYPE_CHECKING:
    from osguard.providers.client import HttpEnvironment

INSTALL_HINT = "pip install 'osguard[osworld]'"
NOT_CONFIGURED = ("no OSWorld VM is configured: set OSGUARD_OSWORLD_PROVIDER (vmware, virtualbox, docker, aws, ...) "
                  "and OSGUARD_OSWORLD_PATH_TO_VM, or pass provider_name=... to the provider")
VM_PROVIDERS = ("vmware", "virtualbox", "docker", "aws", "azure", "gcp", "aliyun", "volcengine")
# The official Ubuntu VM's applications (names as osguard's variants require them).
VM_APPS = frozenset({"chrome", "gimp", "libreoffice", "nautilus", "thunderbird", "vlc", "vscode"})

# option name -> (environment variable, default, parser)
_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "provider_name": ("OSGUARD_OSWORLD_PROVIDER", None, str),
    "path_to_vm": ("OSGUARD_OSWORLD_PATH_TO_VM", None, str),
    "region": ("OSGUARD_OSWORLD_REGION", None, str),
    "snapshot_name": ("OSGUARD_OSWORLD_SNAPSHOT", "init_state", str),
    "headless": ("OSGUARD_OSWORLD_HEADLESS", True, None),  # parsed by _parse_bool
    "client_password": ("OSGUARD_OSWORLD_CLIENT_PASSWORD", None, str),
    "os_type": ("OSGUARD_OSWORLD_OS_TYPE", "Ubuntu", str),
}
# What osguard needs from the VM regardless of options: OSWorld's pyautogui action space
# and accessibility trees.
_FIXED = {"action_space": "pyautogui", "require_a11y_tree": True}


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise OsguardError(f"${name}={text!r}: expected true or false")


def desktop_env_kwargs(options: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                       accepted: set[str] | None = None) -> dict[str, Any]:
    """The keyword arguments for ``DesktopEnv(...)``.

    Args:
        options: what the user passed to ``OSWorldProvider(...)`` (wins over the
            environment). Unknown names pass through, so every ``DesktopEnv``
            argument (``screen_size``, ``cache_dir``...) can be set.
        environ: environment variables (default: ``os.environ``).
        accepted: parameter names of ``DesktopEnv.__init__``; when given, a name it
            does not take is an error, except unset defaults, which are dropped.

    Raises:
        OsguardError: a bad provider name, a bad boolean, or an argument DesktopEnv
            does not accept (the message lists the ones it does).
    """
    environ = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {}
    explicit: set[str] = set()
    for name, (variable, default, parser) in _OPTIONS.items():
        if options.get(name) is not None:
            kwargs[name] = options[name]
            explicit.add(name)
        elif environ.get(variable):
            raw = environ[variable]
            kwargs[name] = _parse_bool(variable, raw) if name == "headless" else parser(raw)
            explicit.add(name)
        elif default is not None:
            kwargs[name] = default
    for name, value in options.items():
        if name not in _OPTIONS and value is not None:
            kwargs[name] = value
            explicit.add(name)
    for name, value in _FIXED.items():
        kwargs.setdefault(name, value)
    provider = kwargs.get("provider_name")
    if provider is None:
        raise ProviderUnavailable(NOT_CONFIGURED)
    if provider not in VM_PROVIDERS:
        from osguard._registry import did_you_mean

        raise OsguardError(f"unknown OSWorld VM provider {provider!r}: expected one of "
                           f"{', '.join(VM_PROVIDERS)}{did_you_mean(str(provider), VM_PROVIDERS)}")
    if accepted is not None:
        unknown = sorted(name for name in kwargs if name not in accepted and name in explicit)
        if unknown:
            raise OsguardError(f"DesktopEnv does not accept {', '.join(unknown)}; "
                               f"it accepts: {', '.join(sorted(accepted))}")
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return kwargs


def endpoint_of(desktop: Any) -> str:
    """``http://<vm_ip>:<server_port>`` of a started ``DesktopEnv``.

    Raises:
        EnvironmentError_: the DesktopEnv has no VM address (it did not start).
    """
    vm_ip = getattr(desktop, "vm_ip", None)
    if not vm_ip:
        raise EnvironmentError_("DesktopEnv started without a VM address (vm_ip is empty); "
                                "check its log and the VM provider's settings")
    port = int(getattr(desktop, "server_port", None) or 5000)
    return f"http://{vm_ip}:{port}"


def accepted_arguments(desktop_env_class: Any) -> set[str] | None:
    """Parameter names of ``desktop_env_class.__init__`` (None when it takes ``**kwargs``)."""
    parameters = inspect.signature(desktop_env_class.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return set(parameters) - {"self"}


def _installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("desktop_env") is not None
    except (ImportError, ValueError):  # e.g. sys.modules["desktop_env"] is None
        return False


def _import_desktop_env() -> Any:
    """``DesktopEnv``, or ProviderUnavailable saying how to install desktop-env."""
    try:
        from desktop_env.desktop_env import DesktopEnv
    except ModuleNotFoundError as exc:
        if exc.name == "desktop_env" or not _installed():
            raise ProviderUnavailable(f"desktop-env is not installed: {INSTALL_HINT}") from exc
        raise ProviderUnavailable(f"desktop-env is installed but cannot be imported (no module {exc.name!r}): "
                                  f"{INSTALL_HINT}") from exc
    except Exception as exc:  # desktop-env runs code at import time
        raise ProviderUnavailable(f"desktop-env is installed but cannot be imported "
                                  f"({type(exc).__name__}: {exc}): {INSTALL_HINT}") from exc
    return DesktopEnv


class OSWorldProvider:
    """Starts OSWorld's official VM through desktop-env and talks to its server.

    Args:
        **options: ``DesktopEnv`` arguments (see the module docstring for the
            environment-variable defaults), e.g. ``provider_name="vmware",
            path_to_vm="~/vms/Ubuntu.vmx"``.
    """

    name = "osworld"

    def __init__(self, **options: Any) -> None:
        self.options = options

    def available(self) -> str | None:
        """None when a VM is configured and desktop-env imports, else what is missing.

        Whether the VM itself can start (a hypervisor, cloud credentials, KVM) is only
        known when ``start()`` tries.
        """
        if not _installed():
            return f"desktop-env is not installed: {INSTALL_HINT}"
        try:
            desktop_env_kwargs(self.options)
            _import_desktop_env()  # heavy, but only once a VM is configured
        except OsguardError as exc:
            return str(exc)
        return None

    def start(self, *, image: str | None = None, timeout: float = 600) -> "HttpEnvironment":
        """Start (or revert) the VM and return a client of its server.

        Args:
            image: path of the VM to use (``path_to_vm``), overriding the options.
            timeout: seconds for the whole start: ``DesktopEnv(...)`` (which starts the
                VM) and then its server answering. A constructor still running then is
                abandoned in its thread; should it ever return, its VM is closed.

        Raises:
            ProviderUnavailable: desktop-env is not installed.
            OsguardError: bad options.
            EnvironmentError_: the VM did not start, ``DesktopEnv(...)`` did not return
                within ``timeout``, or its server did not answer.
        """
        from osguard.providers.client import HttpEnvironment

        options = dict(self.options)
        if image is not None:
            options["path_to_vm"] = image
        desktop_env_kwargs(options)  # configuration errors first: they need no import
        desktop_env_class = _import_desktop_env()
        kwargs = desktop_env_kwargs(options, accepted=accepted_arguments(desktop_env_class))
        started = time.monotonic()
        desktop = _construct(desktop_env_class, kwargs, timeout)
        try:
            if getattr(desktop, "is_environment_used", False):
                desktop.reset()  # vmware/virtualbox: revert to the snapshot for a fresh state
            endpoint = endpoint_of(desktop)
        except BaseException:
            _close(desktop)
            raise
        info = EnvironmentInfo(
            # Random suffix: two starts within the same second must not share an id.
            id=f"osworld-{kwargs.get('provider_name')}-{int(time.time())}-{secrets.token_hex(4)}",
            provider=self.name, endpoint=endpoint, image=kwargs.get("path_to_vm"),
            extra={"vm_provider": kwargs.get("provider_name"), "snapshot": kwargs.get("snapshot_name")},
        )
        capabilities = Capabilities(gui=True, accessibility=True, root=True, apps=VM_APPS,
                                    notes=("OSWorld's official VM through desktop-env",))
        env = HttpEnvironment(endpoint, info, capabilities, lambda: _close(desktop))
        deadline = started + timeout
        while not env.is_alive(timeout=5):
            if time.monotonic() > deadline:
                env.stop()
                raise EnvironmentError_(f"the OSWorld VM's server at {endpoint} did not answer within {timeout:g} s")
            time.sleep(1)
        return env


def _construct(desktop_env_class: Any, kwargs: dict[str, Any], timeout: float) -> Any:
    """``desktop_env_class(**kwargs)`` in a daemon thread, given up after ``timeout`` seconds.

    desktop-env's constructor starts (or downloads) a VM and has no timeout of its own;
    a Python thread cannot be killed, so a late one is abandoned, and the VM it
    eventually returns is closed at once.
    """
    done = threading.Event()
    lock = threading.Lock()
    outcome: dict[str, Any] = {}

    def build() -> None:
        try:
            desktop = desktop_env_class(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc
            done.set()
            return
        with lock:
            if outcome.get("abandoned"):
                _close(desktop)
                return
            outcome["desktop"] = desktop
        done.set()

    threading.Thread(target=build, name="osguard-desktop-env-start", daemon=True).start()
    if not done.wait(timeout):
        with lock:
            if "desktop" not in outcome and "error" not in outcome:
                outcome["abandoned"] = True
        if outcome.get("abandoned"):
            raise EnvironmentError_(f"desktop-env did not start the OSWorld VM (provider "
                                    f"{kwargs.get('provider_name')!r}) within {timeout:g} s; gave up on it "
                                    "(a VM it starts later is closed)")
    error = outcome.get("error")
    if isinstance(error, OsguardError):
        raise error
    if error is not None:
        if not isinstance(error, Exception):
            raise error
        raise EnvironmentError_(f"desktop-env could not start the OSWorld VM "
                                f"(provider {kwargs.get('provider_name')!r}): {type(error).__name__}: {error}") from error
    return outcome["desktop"]


def _close(desktop: Any) -> None:
    """Close a DesktopEnv (stops its VM) once; errors are not the caller's problem then."""
    try:
        desktop.close()
    except Exception:
        pass
