"""Image commands: ``osguard image build``, ``image list``, ``image prune``.

Thin wrappers over ``osguard.images``; the docker SDK and rich are imported inside the
commands so ``osguard --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
import time

import typer

from osguard.cli._json import echo_json, json_command

image_app = typer.Typer(name="image", help="Build and manage osguard's desktop image (docker provider).",
                        no_args_is_help=True)


@image_app.command("build")
@json_command
def build_cmd(
    flavor: str = typer.Option("base", "--flavor", "-f",
                               help="base: Xvfb, openbox, xterm, mousepad, AT-SPI, pyautogui, the server. "
                                    "full: base + LibreOffice, Thunderbird, Chromium, GIMP, VLC."),
    force: bool = typer.Option(False, "--force",
                               help="Build again even if the current sources are built "
                                    "(re-bootstraps Debian; package layers come from the engine's cache)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display; print the tag only."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Build the desktop image for the docker provider (a cache hit takes about a second).

    Needs a Docker engine (`bash scripts/docker-engine.sh` starts one) and, the first
    time, root for debootstrap. The tag carries a hash of the Dockerfile and the server's
    sources, so a changed server rebuilds (only the last layers) and an unchanged one is
    found at once.

    Examples:
      osguard image build                  # base flavour (a cold build takes a few minutes)
      osguard image build --flavor full    # + desktop applications (much larger)
      osguard image build -q               # print the tag only (scripts, CI)
    """
    from osguard.images import build_image, get_flavor

    get_flavor(flavor)  # a typo fails before the engine is contacted
    if quiet or as_json or not sys.stderr.isatty():
        result = build_image(flavor, force=force, progress=None if (quiet or as_json) else _plain_progress())
    else:
        result = _build_with_display(flavor, force)
    if as_json:
        echo_json(json.dumps({"flavor": result.flavor, "tag": result.tag, "image_id": result.image_id,
                               "cached": result.cached, "seconds": round(result.seconds, 2),
                               "phases": {k: round(v, 2) for k, v in result.phases.items()}}))
    elif quiet:
        typer.echo(result.tag)
    else:
        how = "already built (cache hit)" if result.cached else "built"
        phases = ", ".join(f"{k} {v:.0f}s" for k, v in result.phases.items())
        typer.echo(f"{result.tag} {how} in {result.seconds:.1f}s" + (f" ({phases})" if phases else ""))


def _plain_progress():
    """Progress as plain lines (no terminal): one per build step, for logs and CI."""
    last: list[tuple[str, int]] = [("", -1)]

    def show(event) -> None:
        key = (event.phase, event.step)
        # debootstrap's stage lines ("I: Unpacking required packages...") but not its
        # per-package ones; one line per Dockerfile step.
        if event.phase == "debian-base" and event.message.startswith("I: ") \
                and event.message.endswith(("...", "successfully.")):
            typer.echo(f"[{event.phase}] {event.message}", err=True)
        elif key != last[0]:
            last[0] = key
            step = f" {event.step}/{event.total}" if event.total else ""
            typer.echo(f"[{event.phase}{step}] {event.message}", err=True)

    return show


def _build_with_display(flavor: str, force: bool):
    """Run the build under a rich live display: phase, step bar and the latest line."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from osguard.images import build_image

    console = Console(stderr=True)
    started = time.monotonic()
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[phase]}"), BarColumn(bar_width=20),
                  TextColumn("{task.completed:.0f}/{task.total:.0f}"), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as progress:
        task = progress.add_task("", total=1, phase="checking")

        def show(event) -> None:
            total = event.total or 1
            progress.update(task, phase=event.phase, total=total, completed=min(event.step, total),
                            description=event.message[: max(20, console.width - 60)])

        result = build_image(flavor, force=force, progress=show)
    if not result.cached:
        console.print(f"[green]built[/] {result.tag} in {time.monotonic() - started:.1f}s")
    return result


@image_app.command("list")
@json_command
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List osguard desktop images in the engine; `current` marks builds of today's sources.

    Examples:
      osguard image list
    """
    from osguard.images import FLAVORS, image_tag, list_images

    records = list_images()
    if as_json:
        echo_json(json.dumps([r.__dict__ for r in records], indent=2))
        return
    for name, spec in FLAVORS.items():
        built = any(r.current and r.flavor == name for r in records)
        typer.echo(f"{name:5} {image_tag(name)}  {'built' if built else 'NOT BUILT'}  ({spec.description})")
    stale = [r for r in records if not r.current]
    if stale:
        typer.echo(f"{len(stale)} older build(s): " + ", ".join(r.tag for r in stale)
                   + "  (osguard image prune removes them)")


@image_app.command("prune")
def prune_cmd() -> None:
    """Remove desktop images built from older sources (keeps the current ones).

    Examples:
      osguard image prune
    """
    from osguard.images import prune_images

    removed = prune_images()
    typer.echo(f"removed {len(removed)} image tag(s)" + (": " + ", ".join(removed) if removed else ""))


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.add_typer(image_app, name="image")
