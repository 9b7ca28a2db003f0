"""Spec commands: ``validate``, ``schema``, ``new``, ``tasks list``, ``export``.

Each command is a thin wrapper over ``osguard.spec``; heavy imports happen inside them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Optional

import typer

from osguard.cli._json import echo_json, json_command

_EXAMPLES_HELP = "OSWorld's evaluation_examples/ (or its examples/). Default: $OSGUARD_OSWORLD_EXAMPLES."

tasks_app = typer.Typer(name="tasks", help="Browse upstream OSWorld tasks.", no_args_is_help=True)


@json_command
def validate_cmd(
    paths: Optional[list[Path]] = typer.Argument(None, help="Spec files or folders (default: the suite)."),
    osworld_examples: Optional[Path] = typer.Option(
        None, "--osworld-examples", envvar="OSGUARD_OSWORLD_EXAMPLES", help=_EXAMPLES_HELP
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report instead of text."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Validate again whenever a spec changes (Ctrl-C stops)."),
    show_coverage: bool = typer.Option(
        False, "--coverage", help="Print the coverage tables: per domain and family, GUI vs shell, reference "
                                  "lengths, alternatives (docs/suite.md has them too)."),
) -> None:
    """Check variant specs; every problem is reported as FILE:LINE: $.path: message.

    Exit code 0 when every spec is valid, 1 otherwise.

    Examples:
      osguard validate                      # the whole suite (./variants)
      osguard validate variants/scope_escape/my-variant.yaml
      osguard validate --watch              # re-check on every save
      osguard validate --coverage           # the suite's coverage table
      osguard validate --osworld-examples ~/OSWorld/evaluation_examples --json
    """
    from osguard.spec.osworld import examples_root

    examples = examples_root(osworld_examples) if osworld_examples else None
    targets = list(paths) if paths else None
    if watch:
        watch_specs(lambda: validate_report(targets, examples, as_json, show_coverage), targets)
        return
    raise typer.Exit(validate_report(targets, examples, as_json, show_coverage))


def watch_specs(run: Callable[[], int], paths: list[Path] | None, *, interval: float = 0.5,
                max_runs: int | None = None) -> None:
    """Call ``run`` now and again after every change to the spec files under ``paths``
    (polling: no extra dependency, works on any filesystem)."""
    import time
    from datetime import datetime

    from osguard.spec.loader import spec_files

    def fingerprint() -> list[tuple[str, int, int]]:
        found = []
        for path in spec_files(paths)[0]:
            try:
                info = path.stat()
            except OSError:
                continue
            found.append((str(path), info.st_mtime_ns, info.st_size))
        return found

    last: list[tuple[str, int, int]] | None = None
    runs = 0
    while True:
        current = fingerprint()
        if current != last:
            if last is not None:
                typer.echo(f"\n--- {datetime.now():%H:%M:%S} change detected, validating again ---")
            run()
            runs += 1
            last = current
            if max_runs is not None and runs >= max_runs:
                return
            typer.echo("(watching for changes; Ctrl-C stops)")
        time.sleep(interval)


def validate_report(paths: list[Path] | None, examples: Path | None, as_json: bool,
                    show_coverage: bool = False) -> int:
    """Validate and print the report; returns the exit code (0 valid, 1 problems). With
    ``show_coverage`` the tables are the suite's coverage (osguard.spec.coverage)."""
    from osguard.spec.coverage import COLUMNS, DEFINITIONS, coverage, coverage_table
    from osguard.spec.loader import display_path, spec_files, validate_paths

    files, _ = spec_files(paths)
    variants, problems = validate_paths(paths, osworld_examples=examples)
    by_family: dict[str, int] = {}
    by_domain: dict[str, int] = {}
    for v in variants:
        by_family[v.family] = by_family.get(v.family, 0) + 1
        by_domain[v.base.domain] = by_domain.get(v.base.domain, 0) + 1
    bad_files = sorted({p.file for p in problems})
    if as_json:
        report = {
            "ok": not problems,
            "files": len(files),
            "variants": [
                {"id": v.id, "version": v.version, "family": v.family, "domain": v.base.domain,
                 "osworld_id": v.base.osworld_id, "path": display_path(Path(v.source_path or "")),
                 "spec_hash": v.spec_hash}
                for v in variants
            ],
            "problems": [{"file": p.file, "line": p.line, "path": p.path, "message": p.message} for p in problems],
            "summary": {"by_family": dict(sorted(by_family.items())), "by_domain": dict(sorted(by_domain.items())),
                        "instruction_checked": examples is not None},
        }
        if show_coverage:
            cov = coverage(variants)
            report["coverage"] = {
                "summary": cov.summary(),
                **{f"by_{title}": {row[0]: dict(zip(COLUMNS, row[1:])) for row in rows}
                   for title, rows in coverage_table(cov)},
                "variants": [{"id": r.id, "domain": r.domain, "family": r.family, "gui": r.gui,
                              "safe_length": r.safe_length, "long_gui": r.long_gui,
                              "alternatives": len(r.alternatives)} for r in cov.rows],
            }
        echo_json(json.dumps(report, indent=2, ensure_ascii=False))
        return 1 if problems else 0

    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    for problem in problems:
        console.print(str(problem), markup=False)
    if variants and show_coverage:
        if problems:
            console.print()
        cov = coverage(variants)
        # piped output gets the full width (family names are 35 characters); a terminal keeps its own
        if not sys.stdout.isatty():
            console = Console(highlight=False, soft_wrap=True, width=120)
        for title, rows in coverage_table(cov):
            table = Table(show_edge=False, pad_edge=False)
            table.add_column(title, no_wrap=True)
            for column in COLUMNS:
                table.add_column(column, justify="right", no_wrap=True)
            for row in rows:
                table.add_row(*row)
            console.print(table)
            console.print()
        console.print(cov.summary() + ".", markup=False)
        console.print(DEFINITIONS, markup=False)
    elif variants:
        table = Table(title=None, show_edge=False, pad_edge=False)
        table.add_column("family")
        table.add_column("variants", justify="right")
        for family, count in sorted(by_family.items()):
            table.add_row(family, str(count))
        domains = Table(show_edge=False, pad_edge=False)
        domains.add_column("domain")
        domains.add_column("variants", justify="right")
        for domain, count in sorted(by_domain.items()):
            domains.add_row(domain, str(count))
        if problems:
            console.print()
        console.print(table)
        console.print()
        console.print(domains)
    checked = "" if examples is not None else " (instructions not checked against OSWorld: no --osworld-examples)"
    if problems:
        console.print(
            f"\n{len(problems)} problem{'s' if len(problems) != 1 else ''} in {len(bad_files)} "
            f"file{'s' if len(bad_files) != 1 else ''}; {len(variants)} of {len(files)} specs valid{checked}",
            markup=False,
        )
        return 1
    console.print(f"\n{len(variants)} variant{'s' if len(variants) != 1 else ''} valid{checked}", markup=False)
    return 0


def schema_cmd() -> None:
    """Print the variant JSON Schema (draft 2020-12), for editors.

    Example (VS Code YAML extension): osguard schema > variant.schema.json, then put
    `# yaml-language-server: $schema=variant.schema.json` at the top of a spec.
    """
    from osguard.spec.schema import schema

    typer.echo(json.dumps(schema(), indent=2, ensure_ascii=False))


def new_cmd(
    variant_id: str = typer.Argument(..., help="The new variant's id (a slug, e.g. os-rename-archive)."),
    from_task: str = typer.Option(..., "--from", help="Upstream OSWorld task id (uuid or unique prefix)."),
    family: Optional[str] = typer.Option(None, "--family", help="Hazard family of the variant."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Where to write (default: <suite>/<family>/<id>.yaml; '-' for stdout)."
    ),
    osworld_examples: Optional[Path] = typer.Option(
        None, "--osworld-examples", envvar="OSGUARD_OSWORLD_EXAMPLES", help=_EXAMPLES_HELP
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Scaffold a variant spec from an upstream OSWorld task, with TODO markers.

    Example:
      osguard new os-rename-archive --from e0df059f --family wrong_target_or_globalized_update
    """
    import re

    from osguard.errors import OsguardError
    from osguard.spec.loader import default_suite_dir, did_you_mean, display_path
    from osguard.spec.model import FAMILIES
    from osguard.spec.osworld import load_osworld_task, resolve_examples_dir
    from osguard.spec.scaffold import scaffold_variant
    from osguard.spec.schema import SLUG_PATTERN

    if not re.fullmatch(SLUG_PATTERN, variant_id):
        raise OsguardError(f"variant id {variant_id!r}: expected a slug: 3-64 characters, lowercase letters, "
                           "digits and '-', starting with a letter or digit")
    if family is not None and family not in FAMILIES:
        raise OsguardError(f"unknown family {family!r}{did_you_mean(family, FAMILIES)} "
                           f"(families: {', '.join(FAMILIES)})")
    examples = resolve_examples_dir(osworld_examples, required=True)
    task = load_osworld_task(examples, from_task)
    text = scaffold_variant(task, variant_id, family)
    if out is not None and str(out) == "-":
        sys.stdout.write(text)
        return
    target = out or (default_suite_dir() / (family or ".") / f"{variant_id}.yaml")
    if target.exists() and not force:
        raise OsguardError(f"{display_path(target)} exists; pass --force to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {display_path(target)} (from OSWorld {task['_domain']}/{task['id']}); "
               f"next: osguard validate {display_path(target)}")


@tasks_app.command("list")
@json_command
def tasks_list_cmd(
    osworld_examples: Optional[Path] = typer.Option(
        None, "--osworld-examples", envvar="OSGUARD_OSWORLD_EXAMPLES", help=_EXAMPLES_HELP
    ),
    domain: Optional[str] = typer.Option(None, "--domain", help="Only this domain (e.g. os, vs_code)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """List the upstream OSWorld tasks osguard can load, with a count.

    Example: osguard tasks list --osworld-examples ~/OSWorld/evaluation_examples --domain os
    """
    from osguard.errors import OsguardError
    from osguard.spec.loader import did_you_mean
    from osguard.spec.osworld import iter_osworld_tasks, resolve_examples_dir

    examples = resolve_examples_dir(osworld_examples, required=True)
    assert examples is not None
    if domain is not None and not (examples / domain).is_dir():
        known = sorted(p.name for p in examples.iterdir() if p.is_dir())
        raise OsguardError(f"unknown domain {domain!r}{did_you_mean(domain, known)} (domains: {', '.join(known)})")
    tasks = list(iter_osworld_tasks(examples, domain))
    # which upstream tasks the suite already covers (valid variants only; cheap)
    from osguard.spec.loader import default_suite_dir, validate_paths

    covered: dict[str, list[str]] = {}
    if default_suite_dir().is_dir():
        for variant in validate_paths([default_suite_dir()])[0]:
            covered.setdefault(variant.base.osworld_id, []).append(variant.id)
    if as_json:
        for task in tasks:
            echo_json(json.dumps({"id": task["id"], "domain": task["_domain"], "instruction": task["instruction"],
                                   "variants": covered.get(task["id"], [])}, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    from rich import box

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=36)
    table.add_column("domain", no_wrap=True, min_width=6)
    table.add_column("variants", no_wrap=True, justify="right", min_width=8)
    table.add_column("instruction", overflow="ellipsis", no_wrap=True, max_width=90)
    for task in tasks:
        table.add_row(task["id"], task["_domain"], str(len(covered.get(task["id"], []))),
                      task["instruction"].replace("\n", " "))
    # piped output gets the full width; a terminal keeps its own
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(table)
    with_variants = sum(1 for task in tasks if task["id"] in covered)
    console.print(f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} ({with_variants} with variants in "
                  f"the suite)", markup=False)


def export_cmd(
    variant: str = typer.Argument(..., help="A spec file, or a variant id in the suite."),
    fmt: str = typer.Option("osworld", "--format", help="Output format (only 'osworld')."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write here instead of stdout."),
) -> None:
    """Export a variant as an OSWorld task JSON (setup + hazards as config; invariants under `osguard`).

    Example: osguard export os-rename-todo-archive --out /tmp/task.json
    """
    from osguard.errors import OsguardError
    from osguard.spec.export import export_osworld
    from osguard.spec.loader import did_you_mean, display_path, load_variant, validate_paths

    if fmt != "osworld":
        raise OsguardError(f"unknown export format {fmt!r}{did_you_mean(fmt, ['osworld'])} (formats: osworld)")
    path = Path(variant)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        loaded = load_variant(path)
    else:
        valid, problems = validate_paths()
        suite = {v.id: v for v in valid}
        if variant not in suite:
            broken = f" ({len(problems)} problems in the suite: run osguard validate)" if problems else ""
            raise OsguardError(f"no valid variant {variant!r} in the suite{did_you_mean(variant, suite)}{broken}")
        loaded = suite[variant]
    text = json.dumps(export_osworld(loaded), indent=2, ensure_ascii=False) + "\n"
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {display_path(out)}", err=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("validate")(validate_cmd)
    app.command("schema")(schema_cmd)
    app.command("new")(new_cmd)
    app.command("export")(export_cmd)
    app.add_typer(tasks_app, name="tasks")
