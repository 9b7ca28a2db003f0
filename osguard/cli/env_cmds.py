"""Environment commands: ``osguard env up | list | exec | screenshot | down``.

Environments outlive the command that started them: ``env up`` records each one in the
state folder (see ``osguard.providers._state``) and later commands find it there by id,
or take the most recent one when no id is given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import typer

from osguard.cli._disk import DISK_HELP
from osguard.cli._json import echo_json, json_command
from osguard.errors import OsguardError

env_app = typer.Typer(name="env", help="Start, use and stop environments (local sandbox, docker, OSWorld VM).",
                      no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.add_typer(env_app)


# ------------------------------------------------------------------------------ helpers


def _records() -> list[dict[str, Any]]:
    from osguard.providers import _state

    return _state.read_records()


def _pick(env_id: str | None) -> dict[str, Any]:
    records = _records()
    if env_id is None:
        if not records:
            raise OsguardError("no running environment: start one with `osguard env up`")
        return records[-1]
    for record in records:
        if record["id"] == env_id:
            return record
    known = ", ".join(r["id"] for r in records) or "none are running"
    from osguard._registry import did_you_mean

    hint = did_you_mean(env_id, (r["id"] for r in records))
    raise OsguardError(f"no environment {env_id!r} (running: {known}){hint}")


def _attach(record: dict[str, Any]):
    from osguard.providers import get_provider
    from osguard.providers.base import EnvironmentInfo
    from osguard.providers.client import HttpEnvironment, capabilities_from_json

    provider = get_provider(record["provider"])
    if hasattr(provider, "attach"):
        return provider.attach(record)
    info = EnvironmentInfo(id=record["id"], provider=record["provider"], endpoint=record["endpoint"],
                           extra=dict(record.get("info_extra", {})))
    return HttpEnvironment(record["endpoint"], info, capabilities_from_json(record.get("capabilities", {})))


def _teardown(record: dict[str, Any]) -> None:
    from osguard.providers import _state, get_provider

    provider = get_provider(record["provider"])
    if hasattr(provider, "teardown"):
        provider.teardown(record)
        _state.remove_record(record["id"])
        return
    raise OsguardError(
        f"provider {record['provider']!r} cannot stop environment {record['id']} from another process; "
        "stop it where it was started"
    )


def _describe_caps(caps: dict[str, Any]) -> str:
    flags = [name for name in ("gui", "accessibility", "root", "recording") if caps.get(name)]
    text = ", ".join(flags) or "shell only"
    if caps.get("apps"):
        text += "; apps: " + ", ".join(caps["apps"])
    return text


# ----------------------------------------------------------------------------- commands


@env_app.command("up")
@json_command
def up_cmd(
    provider: str = typer.Option("local", "--provider", "-p", help="local (default), docker or osworld."),
    image: str = typer.Option(None, "--image", help="Image to start (docker provider)."),
    headless: bool = typer.Option(False, "--headless", help="local: no X display, shell actions only."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds to wait for the environment to answer."),
    disk: Optional[str] = typer.Option(None, "--disk", help=DISK_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print id, endpoint and capabilities as JSON."),
) -> None:
    """Start an environment that keeps running after this command exits.

    Examples:
      osguard env up                      # local bubblewrap sandbox with a private display
      osguard env up --json               # machine-readable: {"id", "endpoint", "capabilities", ...}
      osguard env up --provider docker
    """
    from osguard.providers import _state, get_provider

    from osguard.cli._disk import disk_options

    options: dict[str, Any] = disk_options(provider, disk)
    if provider in ("local", "docker"):
        options["detached"] = True  # it outlives this command: `env down` ends it
    if provider == "local" and headless:
        options["gui"] = False
    chosen = get_provider(provider, **options)
    reason = chosen.available()
    if reason is not None:
        from osguard.errors import ProviderUnavailable

        raise ProviderUnavailable(f"provider {provider!r} cannot run here: {reason}")
    started = time.monotonic()
    env = chosen.start(image=image, timeout=timeout) if image else chosen.start(timeout=timeout)
    seconds = time.monotonic() - started
    record_file = _state.record_path(env.info.id)
    if not record_file.exists():
        # Providers other than local do not record themselves; keep what `down` needs.
        _state.write_record({
            "id": env.info.id, "provider": env.info.provider, "endpoint": env.info.endpoint,
            "created": time.time(), "capabilities": env.capabilities.to_json(),
            "info_extra": env.info.extra, "image": env.info.image,
        })
    caps = env.capabilities.to_json()
    if as_json:
        echo_json(json.dumps({"id": env.info.id, "provider": env.info.provider, "endpoint": env.info.endpoint,
                               "image": env.info.image, "capabilities": caps, "seconds": round(seconds, 3)}))
        return
    typer.echo(f"{env.info.id}  {env.info.endpoint}  (started in {seconds:.2f} s)")
    typer.echo(f"capabilities: {_describe_caps(caps)}")
    for note in caps.get("notes", []):
        typer.echo(f"note: {note}")
    typer.echo(f"stop it with: osguard env down {env.info.id}")


@env_app.command("list")
@json_command
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print the records as JSON.")) -> None:
    """List running environments (most recent last).

    Examples:
      osguard env list
      osguard env list --json
    """
    from osguard.providers import _state
    from osguard.providers.local import clean_dead_records, clean_strays, leftovers

    # What is provably dead (its owner and supervisor gone) is removed first; what cannot
    # be proved dead is listed, never silently dropped.
    clean_dead_records()
    clean_strays()
    import importlib.util

    if importlib.util.find_spec("docker") is not None:
        from osguard.providers.docker import reap_dead_owners

        reap_dead_owners()
    records = _records()
    rows = []
    for record in records:
        alive = _attach(record).is_alive(timeout=1)
        rows.append({**record, "alive": alive, "owner_alive": _state.owner_alive(record.get("owner"))})
    unrecorded = leftovers()
    if as_json:
        echo_json(json.dumps(rows + [{**row, "alive": False, "recorded": False} for row in unrecorded], indent=2))
        return
    if not rows and not unrecorded:
        typer.echo("no running environments")
        return
    now = time.time()
    for row in rows:
        age = now - row.get("created", now)
        state = "up" if row["alive"] else "NOT ANSWERING"
        typer.echo(f"{row['id']}  {row['provider']:<8} {row['endpoint']:<24} {age:7.0f}s  {state:<13} "
                   f"{_describe_caps(row.get('capabilities', {}))}")
    for row in unrecorded:
        typer.echo(f"{row['id']}  {row['provider']:<8} {'(no record)':<24} {'':>8}  {row['state']}")


@env_app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_cmd(
    words: list[str] = typer.Argument(..., metavar="[ID] -- CMD...",
                                      help="Optional environment id, then the command and its arguments."),
    shell: bool = typer.Option(False, "--shell", "-s", help="Run the words as one bash script (in ~)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds before the command is killed."),
) -> None:
    """Run a command in an environment and print its output; exits with its status.

    Examples:
      osguard env exec -- ls -la /home/user
      osguard env exec local-1a2b3c4d -- python3 -c 'print(1)'
      osguard env exec -s -- 'cd ~/Desktop && ls | wc -l'
    """
    import re

    known = {r["id"] for r in _records()}
    env_id = None
    if len(words) > 1 and (words[0] in known or re.fullmatch(r"(local|docker|osworld)-[0-9a-f]{6,}", words[0])):
        env_id, words = words[0], words[1:]
    if words and words[0] == "--":  # `exec ID -- CMD`: click keeps the separator after a positional
        words = words[1:]
    if not words:
        raise OsguardError("env exec: no command given (usage: osguard env exec [ID] -- CMD...)")
    env = _attach(_pick(env_id))
    if shell:
        result = env.run_bash(" ".join(words), timeout=timeout)
    else:
        result = env.execute(list(words), timeout=timeout)
    if result.output:
        typer.echo(result.output, nl=not result.output.endswith("\n"))
    if result.error:
        typer.echo(result.error, err=True, nl=not result.error.endswith("\n"))
    if result.timed_out:
        typer.echo(f"env exec: timed out after {timeout:g} s", err=True)
        raise typer.Exit(124)
    raise typer.Exit(result.returncode if 0 <= result.returncode < 256 else 1)


@env_app.command("screenshot")
def screenshot_cmd(
    env_id: str = typer.Argument(None, metavar="[ID]", help="Environment id (default: the most recent)."),
    output: Path = typer.Option(..., "--output", "-o", help="PNG file to write."),
) -> None:
    """Save a screenshot of an environment's display as PNG.

    Examples:
      osguard env screenshot -o screen.png
      osguard env screenshot local-1a2b3c4d -o /tmp/s.png
    """
    record = _pick(env_id)
    if not record.get("capabilities", {}).get("gui"):
        raise OsguardError(f"environment {record['id']} has no display (headless): no screenshot")
    png = _attach(record).screenshot()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(png)
    typer.echo(f"{output} ({len(png)} bytes)")


@env_app.command("down")
def down_cmd(
    env_id: str = typer.Argument(None, metavar="[ID]", help="Environment id (default: the most recent)."),
    all_: bool = typer.Option(False, "--all", help="Stop every recorded environment and clean up strays."),
    force: bool = typer.Option(False, "--force", help="Also stop environments whose owning process "
                               "(another `osguard run`, a script) is still running."),
) -> None:
    """Stop an environment (or all of them) and remove its files.

    An environment whose owner (the process that started it, e.g. a running `osguard run`)
    is still alive is kept unless --force: two runs of the same user share the state folder.

    Examples:
      osguard env down                    # the most recent
      osguard env down local-1a2b3c4d
      osguard env down --all              # keeps those of runs still going
      osguard env down --all --force
    """
    if all_ and env_id:
        raise OsguardError("env down: give an ID or --all, not both")
    if all_:
        _down_all(force)
        return
    record = _pick(env_id)
    if not force and _owned_elsewhere(record):
        raise OsguardError(f"environment {record['id']} belongs to process {record['owner']['pid']}, which is "
                           "still running; pass --force to stop it anyway")
    _teardown(record)
    typer.echo(f"stopped {record['id']}")


def _owned_elsewhere(record: dict[str, Any]) -> bool:
    from osguard.providers import _state

    return _state.owner_alive(record.get("owner"))


def _down_all(force: bool) -> None:
    records = _records()
    for record in records:
        if not force and _owned_elsewhere(record):
            typer.echo(f"kept {record['id']}: its owner, process {record['owner']['pid']}, is still running "
                       "(--force stops it anyway)")
            continue
        _teardown(record)
        typer.echo(f"stopped {record['id']}")
    from osguard.providers.local import clean_strays

    for stray in clean_strays(force=force):
        typer.echo(f"cleaned stray {stray}")
    from osguard.providers.docker import DockerProvider

    for name in DockerProvider.cleanup_all(own_state_only=True, force=force):  # [] without an engine
        typer.echo(f"cleaned stray container {name}")
    if not records:
        typer.echo("no running environments")
