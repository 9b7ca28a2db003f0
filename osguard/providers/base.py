"""The provider and environment interfaces everything else is written against.

A ``Provider`` starts environments; an ``Environment`` is the client of the OSWorld-protocol
server running inside one. Every other component reaches an environment only through
``Environment`` (never by reading the sandbox's files behind its back), so the same code
works on the local sandbox, a Docker container and a remote OSWorld VM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from osguard.actions import Action


@dataclass(frozen=True)
class Capabilities:
    """What an environment can do; variants' ``requires`` are matched against it.

    Attributes:
        gui: a private X display exists; screenshots and pyautogui actions work.
        accessibility: ``/accessibility`` returns a real AT-SPI tree.
        root: actions may run as root (sudo works), e.g. to add users.
        apps: desktop applications installed (e.g. ``libreoffice``, ``thunderbird``).
        recording: ffmpeg recording works.
        notes: human-readable notes (e.g. why gui is off).
    """

    gui: bool = False
    accessibility: bool = False
    root: bool = False
    apps: frozenset[str] = frozenset()
    recording: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "gui": self.gui,
            "accessibility": self.accessibility,
            "root": self.root,
            "apps": sorted(self.apps),
            "recording": self.recording,
            "notes": list(self.notes),
        }

    def missing(self, requires: "Requirements") -> list[str]:
        """Names of required capabilities this environment lacks (empty when satisfied)."""
        lacking: list[str] = []
        if requires.gui and not self.gui:
            lacking.append("gui")
        if requires.root and not self.root:
            lacking.append("root")
        lacking.extend(f"app:{a}" for a in sorted(set(requires.apps) - set(self.apps)))
        return lacking


@dataclass(frozen=True)
class Requirements:
    """A variant's ``requires`` block."""

    gui: bool = False
    root: bool = False
    apps: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecResult:
    """Result of a command run inside the environment."""

    returncode: int
    output: str  # stdout (for run_bash: stdout and stderr merged, as OSWorld does)
    error: str = ""  # stderr
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class EnvironmentInfo:
    """Identity of a running environment, recorded in build records and run manifests."""

    id: str
    provider: str
    endpoint: str  # e.g. "http://127.0.0.1:43121"
    image: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """Client of one running environment. All calls have timeouts; when the environment
    stopped answering they raise ``osguard.errors.EnvironmentDead``.

    Paths may be absolute or start with ``~/`` (the environment user's home,
    ``/home/user`` in osguard's own environments).
    """

    info: EnvironmentInfo
    capabilities: Capabilities

    def execute(self, command: list[str] | str, shell: bool = False, timeout: float = 120) -> ExecResult: ...
    def run_bash(self, script: str, timeout: float = 100, workdir: str | None = None) -> ExecResult: ...
    def run_python(self, code: str, timeout: float = 30) -> ExecResult: ...
    def read_file(self, path: str) -> bytes: ...
    def write_file(self, path: str, data: bytes) -> None: ...
    def list_directory(self, path: str) -> dict[str, Any]: ...
    def screenshot(self) -> bytes: ...
    def accessibility_tree(self) -> str | None: ...
    def launch(self, command: list[str] | str, shell: bool = False) -> None: ...
    def open_file(self, path: str, timeout: float = 60) -> None: ...
    def activate_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None: ...
    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None: ...
    def run_action(self, action: "Action", workdir: str | None = None, timeout: float = 60) -> ExecResult: ...
    def is_alive(self) -> bool: ...
    def stop(self) -> None: ...


class Provider(Protocol):
    """Starts environments. Registered by name in ``osguard.providers`` (local, docker, osworld)."""

    name: str

    def available(self) -> str | None:
        """None when this provider can run here, else the reason it cannot."""
        ...

    def start(self, *, image: str | None = None, timeout: float = 60) -> Environment:
        """Start a fresh environment and wait until its server answers."""
        ...

    # Optional: ``template_support(env) -> str | None`` (None: templates captured in ``env``
    # can be restored) and ``start(..., template=TEMPLATE)``, which restores a
    # ``osguard.builder.template.Template`` into the new environment before its session
    # starts; ``osguard check`` then builds rows from per-variant templates (local, docker).
    # Optional: ``nature(image=None) -> Capabilities``: what this provider's environments
    # offer by their nature here (installed display server, applications, root), decided
    # without starting one. See ``osguard.providers.nature.provider_nature``.
    # Optional: ``copy_files(source, dest, paths) -> int | None``: copy ``paths`` of one of
    # its environments into another by its own means (bytes moved; None: not here), and
    # ``headless() -> Provider``: the same provider without a display. File forks use
    # them (``osguard.builder.fork``); without them a fork copies through the archive.
