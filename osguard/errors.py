"""The one exception root of osguard and its flat hierarchy.

Every error a user can cause (a bad spec, a bad flag, an unreachable endpoint) is an
``OsguardError``; the CLI prints its message and exits with its ``exit_code`` instead of
a traceback. Anything else escaping the CLI is a bug in osguard.
"""

from __future__ import annotations

from dataclasses import dataclass


class OsguardError(Exception):
    """Root of all osguard errors. Raised directly only for generic user mistakes."""

    exit_code: int = 2


@dataclass(frozen=True)
class Problem:
    """One located problem in a user file.

    Rendered as ``file:line: $.json.path: message``; ``line`` is 1-based or None.
    """

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{loc}: {self.path}: {self.message}"


class SpecError(OsguardError):
    """Raised when one or more variant specs are invalid; carries every problem found."""

    exit_code = 1

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UnknownNameError(OsguardError):
    """Raised when a registry lookup (provider, agent, verifier, invariant kind...) misses."""


class EnvironmentError_(OsguardError):
    """Raised when an environment cannot be started or a protocol call fails."""


class EnvironmentDead(EnvironmentError_):
    """Raised when the environment stopped answering (crashed, killed or timed out)."""


class ProviderUnavailable(EnvironmentError_):
    """Raised when a provider cannot run on this machine (no bwrap, no Docker engine...)."""


class BuildError(OsguardError):
    """Raised when a setup, hazard or postconfig step of a variant fails; the message names
    the variant file, the step's line and index, and what went wrong."""

    exit_code = 1


class ModelError(OsguardError):
    """Raised when a model endpoint fails after retries (HTTP error, timeout)."""
