"""`osguard build` and `osguard check`: build variants, replay their reference runs.

Thin commands over ``osguard.builder`` (group module: see osguard/cli/app.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from osguard.cli._disk import DISK_HELP
from osguard.cli._json import echo_json, json_command
from osguard.errors import OsguardError
from osguard.runner.executor import ADDRESS_HELP, EXECUTOR_HELP

if TYPE_CHECKING:
    from osguard.builder.check import CheckRow
    from osguard.spec.model import Variant

_STATUS_STYLE = {"pass": "green", "fail": "bold red", "error": "bold red", "skip": "yellow"}


def resolve_variants(selectors: list[str] | None) -> list["Variant"]:
    """Variants named by paths (files or folders) or by id (looked up in the default suite).

    Raises:
        OsguardError: for an id that is in no suite (with the nearest id).
        SpecError: when a spec is invalid (every problem listed).
    """
    from osguard._registry import did_you_mean
    from osguard.spec import load_suite

    if not selectors:
        return list(load_suite(None))
    paths = [s for s in selectors if Path(s).exists()]
    ids = [s for s in selectors if not Path(s).exists()]
    variants = list(load_suite(paths)) if paths else []
    if ids:
        suite = {v.id: v for v in load_suite(None)}
        for variant_id in ids:
            if variant_id not in suite:
                raise OsguardError(f"no variant file or id {variant_id!r} in the suite"
                                   f"{did_you_mean(variant_id, suite)}")
            variants.append(suite[variant_id])
    seen: set[str] = set()
    unique = []
    for variant in variants:
        if variant.id not in seen:
            seen.add(variant.id)
            unique.append(variant)
    return unique


def _provider_for(name: str, image: str | None, disk: str | None = None, keep: bool = False) -> object:
    """The provider by name; with ``--image``, configured with it where the provider takes one
    (so that its availability check looks for that image, not the default); with
    ``--disk``, sized."""
    from osguard.cli._disk import disk_options
    from osguard.providers import get_provider

    options = disk_options(name, disk)
    if keep and name in ("local", "docker"):
        options["detached"] = True  # --keep: it outlives this command
    if image is None:
        return get_provider(name, **options) if options else name
    try:
        return get_provider(name, image=image, **options)
    except TypeError:  # a provider without images (local) refuses --image when starting
        return get_provider(name, **options) if options else name


def _print_rows(rows: list["CheckRow"], provider: str, elapsed: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        # Logs and CI: keep rows on one line each instead of folding at 80 columns.
        console = Console(width=200)
    table = Table(title=f"osguard check (provider: {provider})", show_lines=False)
    for column in ("variant", "ref", "status", "outcome", "violated", "s", "detail"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STATUS_STYLE.get(row.status, "")
        table.add_row(row.variant_id, row.reference, f"[{style}]{row.status}[/]", row.outcome or "-",
                      ", ".join(row.violated) or "-", f"{row.elapsed_s:.1f}", row.detail or "")
    console.print(table)
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("pass", "fail", "error", "skip")}
    retried = [r for r in rows if r.first_attempts]
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, "
                  f"{counts['skip']} skipped in {elapsed:.1f}s"
                  + (f" ({len(retried)} replayed again after a failed attempt)" if retried else ""))
    for row in rows:
        if row.freeze_error:
            console.print(f"WARNING {row.variant_id}/{row.reference}: evaluated on an unfrozen commit "
                          f"({row.freeze_error})", soft_wrap=True, markup=False)
    for row in retried:
        console.print(f"RETRIED {row.variant_id}/{row.reference} -> {row.status}; earlier: "
                      + " | ".join(row.first_attempts), soft_wrap=True, markup=False)
    for row in rows:
        if row.status in ("fail", "error") and (row.evidence or row.actions):
            console.rule(f"[bold red]{row.variant_id} / {row.reference}[/]")
            console.print(f"MISMATCH {row.variant_id}/{row.reference}: {row.detail}", soft_wrap=True, markup=False)
            for item in row.evidence:
                console.print_json(json.dumps(item, default=str))
            for action in row.actions:
                # Actions are code ('[/\\]' in a regex): never read them as rich markup.
                console.print(f"  action rc={action['returncode']}: {action['action']}", markup=False)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""

    @app.command("build")
    @json_command
    def build(
        variants: list[str] = typer.Argument(..., help="Variant files, folders or ids."),
        provider: str = typer.Option("local", "--provider", "-p", help="local, docker or osworld."),
        out: Path = typer.Option(Path("builds"), "--out", "-o", help="Folder for build records (<out>/<id>/record.json)."),
        keep: bool = typer.Option(False, "--keep", help="Leave the environment running (see `osguard env list`)."),
        commit: bool = typer.Option(False, "--commit", help="docker: commit the built environment as an image."),
        tag: Optional[str] = typer.Option(None, "--tag", help="Image tag for --commit (default osguard/<id>:v<version>)."),
        image: Optional[str] = typer.Option(None, "--image", help="Start from this image (provider-specific)."),
        disk: Optional[str] = typer.Option(None, "--disk", help=DISK_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the build summaries as JSON."),
    ) -> None:
        """Build variants: run setup and hazards in a fresh environment, take the baseline.

        Examples:
          osguard build os-rename-todo-keep-archive
          osguard build variants/scope_escape --out /tmp/builds
          osguard build os-chmod-644-linked-deploy-key --keep   # then: osguard env exec -- ls -l ~/testDir
          osguard build vim-line-numbers-keep-vimrc --provider docker --commit
        """
        from osguard.builder import build_variant, write_record

        if tag and not commit:
            raise OsguardError("--tag needs --commit")
        if keep and len(variants) > 1:
            raise OsguardError("--keep builds one variant at a time (got several)")
        summaries = []
        for variant in resolve_variants(variants):
            built = build_variant(variant, _provider_for(provider, image, disk, keep), keep=keep, commit=tag or commit, image=image)
            try:
                path = write_record(built, out)
            finally:
                if not keep:
                    built.stop()
            summary = {"variant": variant.id, "version": variant.version, "record": str(path),
                       "environment": built.env.info.id, "kept": keep,
                       "baseline_entries": built.record["baseline"]["summary"]["entries"],
                       "timings": built.record["timings"]}
            if "committed_image" in built.record:
                summary["image"] = built.record["committed_image"]
            summaries.append(summary)
            if not as_json:
                typer.echo(f"built {variant.id} v{variant.version} in {built.record['timings']['total_s']:.2f}s "
                           f"({summary['baseline_entries']} baseline entries) -> {path}")
                if "image" in summary:
                    typer.echo(f"  committed image: {summary['image']}")
                if keep:
                    typer.echo(f"  environment {built.env.info.id} left running at {built.env.info.endpoint}; "
                               f"look inside: osguard env exec {built.env.info.id} -- ls -la /home/user ; "
                               f"stop it: osguard env down {built.env.info.id}")
        if as_json:
            echo_json(json.dumps(summaries, indent=2))

    @app.command("check")
    @json_command
    def check(
        variants: Optional[list[str]] = typer.Argument(None, help="Variant files, folders or ids (default: the whole suite)."),
        provider: str = typer.Option("local", "--provider", "-p", help="local, docker or osworld."),
        workers: int = typer.Option(4, "--workers", "-w", min=1, max=64, help="References replayed at once."),
        reference: Optional[list[str]] = typer.Option(None, "--reference", "-r", help="Only these (safe, unsafe, noop, standard, alternatives, or an alternative's name); repeatable."),
        strict: bool = typer.Option(False, "--strict", help="Count skipped variants as failures."),
        tag: Optional[list[str]] = typer.Option(None, "--tag", "-t", help="Only variants with this tag (e.g. gui, root); repeatable = any."),
        image: Optional[str] = typer.Option(None, "--image", help="Start environments from this image (provider-specific)."),
        disk: Optional[str] = typer.Option(None, "--disk", help=DISK_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
        fresh: bool = typer.Option(False, "--fresh", help="Build every row from scratch instead of restoring a per-variant template of its setup and hazards."),
        executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
        address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
        retries: int = typer.Option(1, "--retries", min=0, max=5, help="Replay a failed row up to this many more times, alone, after the others (a scripted GUI reference can lose a race with a loaded screen); such rows are listed. 0 = never."),
    ) -> None:
        """Replay every variant's references and alternatives and check the evaluator agrees.

        safe -> safe_success; unsafe -> unsafe_completion with exactly the declared invariants
        violated; noop -> task_failure with every invariant holding; standard -> the safe
        reference solves the base task without hazards; each alternative (rows KIND:NAME) ->
        its kind's outcome (overcautious -> task_failure). Exit status 1 on any mismatch or
        error (and on skips with --strict).

        Examples:
          osguard check
          osguard check variants/configuration_clobbering --workers 2
          osguard check os-rename-todo-keep-archive -r unsafe --json
          osguard check os-rename-todo-keep-archive -r alternatives
          osguard check --provider docker --tag gui --tag root   # what CI runs on docker
          osguard check os-chmod-644-linked-deploy-key --provider docker --image osguard/desktop:base
          osguard check --executor ray --address 127.0.0.2:6379   # one Ray task per variant
        """
        import time

        from osguard.builder.check import REFERENCES, check_variants

        from osguard._registry import did_you_mean

        chosen = tuple(reference or REFERENCES)
        selected = resolve_variants(variants)
        if tag:
            selected = [v for v in selected if set(tag) & set(v.tags)]
        if not selected:
            raise OsguardError("no variants to check" + (f" (none tagged {', '.join(tag)})" if tag else ""))
        known = list(REFERENCES) + sorted({alt.name for v in selected for alt in v.alternatives})
        unknown = [r for r in chosen if r not in known]
        if unknown:
            raise OsguardError(f"--reference must be one of {', '.join(REFERENCES)} or an alternative's name; "
                               f"got {unknown[0]!r}{did_you_mean(unknown[0], known)}")
        from osguard.runner.executor import check_executor_flags, get_executor

        check_executor_flags(executor, address)
        provider_obj = _provider_for(provider, image, disk)
        executor_obj = get_executor(executor, address=address, workers=workers)
        started = time.perf_counter()
        # With --json, stdout carries the JSON alone (json_command): whatever a library
        # (Ray's driver) writes there meanwhile goes to stderr.
        try:
            rows = check_variants(selected, provider_obj, workers, references=chosen, image=image,
                                  templates=not fresh, executor=executor_obj, retries=retries)
        finally:
            executor_obj.close()
        elapsed = time.perf_counter() - started
        if as_json:
            echo_json(json.dumps({"provider": provider, "elapsed_s": round(elapsed, 3),
                                   "rows": [row.to_json() for row in rows]}, indent=2, default=str))
        else:
            _print_rows(rows, provider, elapsed)
        bad = [r for r in rows if r.status in ("fail", "error") or (strict and r.status == "skip")]
        if bad:
            raise typer.Exit(1)
