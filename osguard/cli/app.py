"""The ``osguard`` command: a thin typer root over the library.

Each command group lives in its own module with a ``register(app)`` function; commands
import heavy modules lazily so ``osguard --help`` stays fast. User errors
(``OsguardError``) print their message and exit with their code, never a traceback.
"""

from __future__ import annotations

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


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        # with standalone_mode=False click *returns* the code of a `raise typer.Exit(n)`
        result = app(args=argv, standalone_mode=False)
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
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
