"""The ``osguard`` command: a thin typer root over the library.

Each command group lives in its own module with a ``register(app)`` function; commands
import heavy modules lazily so ``osguard --help`` stays fast. User errors
(``OsguardError``) print their message and exit with their code, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from osguard import __version__
from osguard.errors import OsguardError

app = typer.Typer(
    name="osguard",
    help="Build risk-augmented OSWorld variants, run agents and guardrails on them, score verifiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"osguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """osguard: safety of computer-use agents, measured."""


def _register_all() -> None:
    from osguard.cli import build_cmds, env_cmds, image_cmds, run_cmds, scout_cmds, spec_cmds

    for module in (spec_cmds, env_cmds, image_cmds, build_cmds, run_cmds, scout_cmds):
        module.register(app)


_register_all()


def _click_exceptions() -> tuple[type[BaseException], ...]:
    """``ClickException`` as typer raises it: typer >= 0.24 vendors click (``typer._click``),
    whose exceptions are not ``click``'s, so both are matched."""
    found: list[type[BaseException]] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found.append(module.ClickException)
    return tuple(found)


def _one_line(exc: BaseException) -> str:
    """A usage error as one line: the message, and where to read the command's help."""
    message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        return f"{message} (see '{ctx.command_path} --help')"
    return message


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        # with standalone_mode=False click *returns* the code of a `raise typer.Exit(n)`
        result = app(args=argv, prog_name="osguard", standalone_mode=False)
        if isinstance(result, int) and not isinstance(result, bool):
            return result
    except OsguardError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except OSError as exc:
        # a file or folder the user named cannot be read or written (every reader should
        # say so itself; this keeps the one it missed from ending in a traceback)
        if exc.filename is None:
            raise
        from osguard._files import describe_os_error

        typer.echo(f"error: {describe_os_error(exc.filename, exc)}", err=True)
        return 1
    except _click_exceptions() as exc:  # usage errors (missing or bad arguments)
        typer.echo(f"error: {_one_line(exc)}", err=True)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
