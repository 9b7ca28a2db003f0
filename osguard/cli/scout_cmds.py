"""CLI commands ``items build``, ``items show``, ``annotate`` and ``score`` (SCOUT).

Group module: see osguard/cli/app.py. Heavy imports stay inside the commands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from osguard.errors import OsguardError
from osguard.runner.executor import ADDRESS_HELP, EXECUTOR_HELP, check_executor_flags

items_app = typer.Typer(name="items", help="Build and inspect action-level items (SCOUT).",
                        no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.add_typer(items_app, name="items")
    app.command("annotate")(annotate_cmd)
    app.command("score")(score_cmd)


@items_app.command("build")
def items_build_cmd(
    run_dirs: list[Path] = typer.Argument(None, help="Run directories written by 'osguard run'."),
    out: Path = typer.Option(..., "--out", help="The items directory to write."),
    standard: list[Path] = typer.Option([], "--standard", help="A run directory of unmodified (standard) tasks; repeatable."),
    proposer: Optional[str] = typer.Option(None, "--proposer", help="Proposer model (OpenAI-compatible) for the two interrupted sources."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Proposer endpoint (default $OPENAI_BASE_URL)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="Proposer API key (default $OPENAI_API_KEY)."),
    per_episode: int = typer.Option(2, "--per-episode", help="Actions sampled per standard or risk-augmented episode."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    interrupt_from: str = typer.Option("standard", "--interrupt-from", help="Episodes to interrupt for the proposer: standard | all."),
    force: bool = typer.Option(False, "--force", help="Replace existing items in --out."),
    observation: str = typer.Option("both", "--observation", help="What items carry of each step's observation (and the proposer sees): screenshot | a11y | both | shell (neither)."),
    suite: bool = typer.Option(False, "--suite", help="Build the model-free set from the suite: the arguments are variant files, folders or ids (default: the whole suite); replays, forks and look-ahead labels, no model."),
    provider: str = typer.Option("local", "--provider", help="With --suite: where environments run (local | docker)."),
    workers: int = typer.Option(1, "--workers", help="With --suite: episodes and interruption states at once."),
    per_state: int = typer.Option(8, "--per-state", help="With --suite: state-compatible candidates per interruption state (at most)."),
    resume: bool = typer.Option(False, "--resume", help="With --suite: reuse the replays already in OUT/runs/ and rebuild the items."),
    executor: str = typer.Option("local", "--executor", help="With --suite: " + EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
) -> None:
    """Create action-level items from run directories (four construction sources), or with
    --suite from the variants themselves (no model: see docs/items.md).

    Episodes of standard runs (manifest or outcome.json with "standard": true, or
    --standard RUN_DIR) give 'standard' items and, with --proposer, the two interrupted
    sources; other episodes give 'risk_augmented' items labelled from the invariants.

    Examples:

      osguard items build runs/variants --out items/

      osguard items build runs/variants --standard runs/osworld --proposer gpt-4o --out items/

      osguard items build --suite --out items/ --workers 2

      osguard items build --suite --out items/ --executor ray --address 127.0.0.2:6379

      python -c "import datasets; print(datasets.load_dataset('json', data_files='items/items.jsonl'))"
    """
    from osguard.scout.build import build_items

    if suite:
        from osguard.cli.build_cmds import resolve_variants
        from osguard.scout.suite import build_suite_items

        if standard or proposer:
            raise OsguardError("--suite builds every source itself: drop --standard and --proposer")
        if workers < 1:
            raise OsguardError(f"--workers {workers}: expected an integer >= 1")
        check_executor_flags(executor, address)
        variants = resolve_variants([str(p) for p in (run_dirs or [])])
        from osguard.runner.executor import get_executor

        executor_obj = get_executor(executor, address=address, workers=workers)
        started = time.perf_counter()
        try:
            report = build_suite_items(variants, out, provider=provider, workers=workers, observation=observation,
                                       force=force, per_state=per_state, resume=resume,
                                       progress=lambda line: typer.echo(line, err=True), executor=executor_obj)
        finally:
            executor_obj.close()
        elapsed = time.perf_counter() - started
        _print_build(report, out, f"{len(variants)} variants in {elapsed:.0f} s")
        return
    if executor != "local" or address:
        raise OsguardError("--executor applies to 'items build --suite' (the replays and interruptions); "
                           "building from run directories runs nothing")
    if not run_dirs and not standard:
        raise OsguardError("give at least one run directory (RUN_DIR... or --standard RUN_DIR)")
    model = None
    if proposer:
        from osguard.scout.proposer import ModelProposer

        model = ModelProposer(proposer, base_url=base_url, api_key=api_key)
    report = build_items(list(run_dirs or []), out, standard_runs=list(standard), proposer=model,
                         per_episode=per_episode, seed=seed, interrupt_from=interrupt_from, force=force,
                         observation=observation)
    _print_build(report, out)


def _print_build(report: object, out: Path, note: str = "") -> None:
    from osguard.scout.build import BuildReport

    assert isinstance(report, BuildReport)
    for problem in report.problems:
        typer.echo(f"warning: {problem}", err=True)
    total = sum(report.counts.values())
    typer.echo(f"{total} items from {report.episodes} episodes -> {out}" + (f" ({note})" if note else ""))
    for source, count in sorted(report.counts.items()):
        labels = ", ".join(f"{k} {v}" for k, v in sorted(report.labels.get(source, {}).items()))
        typer.echo(f"  {source}: {count} ({labels})")
    for skipped in report.skipped:
        typer.echo(f"  skipped {skipped['episode']}: {skipped['reason']}")


@items_app.command("show")
def items_show_cmd(
    items_dir: Path = typer.Argument(..., help="An items directory."),
    limit: int = typer.Option(0, "--limit", help="Also list the first N items."),
) -> None:
    """Summarise items: the paper's Table 1 layout (items, labels, mean candidate index) by
    construction source, then the same by risk family and by domain.

    Example:

      osguard items show items/ --limit 5
    """
    from osguard.scout.annotations import AnnotationLog, gold_labels
    from osguard.scout.items import load_items, render_composition

    items = load_items(items_dir)
    gold = gold_labels(items, AnnotationLog(items_dir).latest())
    typer.echo(render_composition(items, gold), nl=False)
    for item in items[:limit]:
        typer.echo(f"{item.id} [{item.source}] gold={gold[item.id][0]} ({gold[item.id][1]}) "
                   f"#{item.candidate_index}: {item.action.render()[:100]}")


@items_app.command("pack")
def items_pack_cmd(
    items_dir: Path = typer.Argument(..., help="An items directory (built by 'osguard items build')."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write items.jsonl.gz and build.json."),
) -> None:
    """Pack an item set for publishing: OUT/items.jsonl.gz (same bytes for the same items)
    and OUT/build.json; screenshots and annotations stay out. Every command that reads
    items (show, score, annotate) reads a packed folder as it is.

    Example:

      osguard items pack items/ --out items-published/
    """
    from osguard.scout.items import load_items, pack_items

    target = pack_items(items_dir, out)
    typer.echo(f"packed {len(load_items(out))} items into {target} ({target.stat().st_size / 1e6:.1f} MB)")


def annotate_cmd(
    items_dir: Path = typer.Argument(..., help="An items directory."),
    annotator: Optional[str] = typer.Option(None, "--annotator", help="Your name (labels are saved under it)."),
    port: int = typer.Option(8765, "--port", help="Port on 127.0.0.1 (0: any free port)."),
    agreement: bool = typer.Option(False, "--agreement", help="Print agreement (Cohen's and Fleiss' κ) and exit."),
) -> None:
    """Label items in a local web page (127.0.0.1 only); or print agreement.

    Keys: 1/a allowed, 2/u unrelated, 3/s unsafe, n/p next/previous, / search the tree.
    Each label is appended to ITEMS_DIR/annotations.jsonl (fsync) when given.

    Examples:

      osguard annotate items/ --annotator alice --port 8765

      osguard annotate items/ --agreement
    """
    from osguard.scout.annotations import AnnotationLog, agreement_report, render_agreement
    from osguard.scout.items import load_items

    if agreement:
        items = load_items(items_dir)
        typer.echo(render_agreement(agreement_report(items, AnnotationLog(items_dir).latest())))
        return
    if not annotator:
        raise OsguardError("--annotator NAME is required to label (or use --agreement)")
    from osguard.scout.annotate import AnnotationServer

    server = AnnotationServer(items_dir, annotator, port=port).start()
    typer.echo(f"annotating {len(server.items)} items as {server.annotator}: open {server.url} (Ctrl-C to stop)")
    server.serve_forever()


def score_cmd(
    items_dir: Optional[Path] = typer.Argument(None, help="An items directory (optional with --from-predictions)."),
    verifier: list[str] = typer.Option([], "--verifier", help="Verifier spec: allow-all, rules, scripted:FILE, scout:llm:MODEL, scout:lookahead, scout:lookahead+llm:MODEL, deaction:MODEL, python:pkg.mod:factory. Repeatable."),
    from_predictions: list[Path] = typer.Option([], "--from-predictions", help="Re-score saved predictions (no model call). Repeatable."),
    out: Optional[Path] = typer.Option(None, "--out", help="Save predictions here (JSONL; one --verifier), line by line as they come."),
    resume: bool = typer.Option(False, "--resume", help="Keep the predictions already in --out (errors are retried); judge the rest."),
    concurrency: int = typer.Option(4, "--concurrency", help="Items judged in parallel."),
    model: Optional[str] = typer.Option(None, "--model", help="Model for scout:llm / deaction without :MODEL."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint (default $OPENAI_BASE_URL)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="API key (default $OPENAI_API_KEY)."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per model request."),
    max_retries: int = typer.Option(2, "--max-retries", help="Retries per model request (429/5xx/timeouts)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the scores as JSON."),
    resamples: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95% intervals."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
    only_variant: list[str] = typer.Option([], "--variant", help="Score only the items of variants matching this id or glob pattern (e.g. 'calc-*'). Repeatable."),
    exclude_variant: list[str] = typer.Option([], "--exclude-variant", help="Leave out the items of variants matching this id or glob pattern. Repeatable."),
) -> None:
    """Score verifiers on items: accuracy, macro-F1, per-label P/R/F1, confusion, by source.

    Gold labels: the annotators' majority when an item was annotated, else its 'label'.

    Examples:

      osguard score items/ --verifier rules --verifier scout:llm:gpt-4o --concurrency 8

      osguard score items/ --verifier scout:llm:gpt-4o --out preds/gpt4o.jsonl

      osguard score --from-predictions preds/gpt4o.jsonl          # no model is called

      osguard score items/ --verifier rules --executor ray --address 127.0.0.2:6379

      osguard score items/ --verifier scout:lookahead --exclude-variant 'calc-*'   # a split
    """
    from osguard.scout.annotations import AnnotationLog, agreement_report, gold_labels
    from osguard.scout.items import load_items
    from osguard.scout.scoring import (
        PredictionAppender,
        load_predictions,
        predict,
        render_report,
        save_predictions,
        score_predictions,
    )

    check_executor_flags(executor, address)
    if not verifier and not from_predictions:
        raise OsguardError("give --verifier SPEC (with ITEMS_DIR) or --from-predictions FILE")
    if verifier and items_dir is None:
        raise OsguardError("--verifier needs ITEMS_DIR")
    if out is not None and len(verifier) != 1:
        raise OsguardError("--out saves the predictions of exactly one --verifier")
    if resume and out is None:
        raise OsguardError("--resume needs --out PRED_FILE (the file to continue)")
    if out is not None and out.exists() and not resume:
        raise OsguardError(f"{out} already exists (use --resume to continue it, or another --out)")
    items = load_items(items_dir) if items_dir is not None else None
    all_ids = {i.id for i in items} if items is not None else set()
    if only_variant or exclude_variant:
        if items is None:
            raise OsguardError("--variant / --exclude-variant need ITEMS_DIR (the items say their variant)")
        items = _select_variants(items, only_variant, exclude_variant, items_dir)
    if items_dir is not None and verifier:
        from osguard.scout.items import screenshots_left_out

        if screenshots_left_out(items_dir):
            typer.echo(f"note: {items_dir} is a packed set without its screenshots: verifiers see the "
                       "accessibility tree and shell output only (osguard items build rebuilds them)", err=True)
    gold = None
    agreement = None
    if items is not None and items_dir is not None:
        latest = AnnotationLog(items_dir).latest()
        gold = gold_labels(items, latest)
        if latest:
            agreement = agreement_report(items, latest)
    scores = []
    for path in from_predictions:
        predictions = load_predictions(path)
        if items is not None:
            missing = [p.item_id for p in predictions if p.item_id not in all_ids]
            if missing:
                raise OsguardError(f"{path}: {len(missing)} prediction(s) for items not in {items_dir} "
                                   f"(first: {missing[0]})")
            if only_variant or exclude_variant:
                chosen = {i.id for i in items}
                predictions = [p for p in predictions if p.item_id in chosen]
        scores.append(score_predictions(predictions, gold=gold, resamples=resamples))
    if verifier:
        from osguard.scout import get_verifier

        options = {"timeout_s": timeout, "max_retries": max_retries}
        for key, value in (("model", model), ("base_url", base_url), ("api_key", api_key)):
            if value is not None:
                options[key] = value
        assert items is not None and items_dir is not None
        executor_obj = None
        for spec in verifier:
            instance = get_verifier(spec, **_options_for(spec, options))
            reuse: dict = {}
            if resume and out is not None and out.exists():
                reuse = {p.item_id: p for p in load_predictions(out, lenient=True)
                         if p.verifier == instance.name and p.error is None}
                typer.echo(f"  {spec}: resuming, {len(reuse)} prediction(s) kept", err=True)
            done = [0]

            def progress(_prediction: object, total: int = len(items) - len(reuse)) -> None:
                done[0] += 1
                if done[0] % 25 == 0 or done[0] == total:
                    typer.echo(f"  {spec}: {done[0]}/{total}", err=True)

            appender = PredictionAppender(out, items_dir=items_dir) if out is not None else None

            def on_done(prediction, _progress=progress, _appender=appender) -> None:
                if _appender is not None:
                    _appender(prediction)
                _progress(prediction)

            if executor_obj is None:
                from osguard.runner.executor import get_executor

                executor_obj = get_executor(executor, address=address, workers=concurrency)
            try:
                predictions = predict(items, items_dir, instance, gold=gold, concurrency=concurrency,
                                      on_done=on_done, reuse=reuse, executor=executor_obj,
                                      verifier_spec=(spec, _options_for(spec, options)))
            finally:
                if appender is not None:
                    appender.close()
            if out is not None:
                save_predictions(out, predictions, items_dir=items_dir)
                typer.echo(f"predictions -> {out}", err=True)
            scores.append(score_predictions(predictions, gold=gold, resamples=resamples))
        if executor_obj is not None:
            executor_obj.close()
    typer.echo(render_report(scores, agreement), nl=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _select_variants(items: list, only: list[str], exclude: list[str], items_dir: object) -> list:
    """The items whose variant matches one of ``only`` (all when empty) and none of
    ``exclude`` (ids or glob patterns); a pattern that matches no item's variant is an error
    (a typo would silently score another set)."""
    from fnmatch import fnmatchcase

    variants = sorted({i.variant for i in items if i.variant})
    for flag, patterns in (("--variant", only), ("--exclude-variant", exclude)):
        for pattern in patterns:
            if not any(fnmatchcase(v, pattern) for v in variants):
                raise OsguardError(f"{flag} {pattern!r} matches no item's variant in {items_dir} "
                                   f"({len(variants)} variants there)")
    chosen = [i for i in items
              if (not only or any(fnmatchcase(i.variant or "", p) for p in only))
              and not any(fnmatchcase(i.variant or "", p) for p in exclude)]
    if not chosen:
        raise OsguardError("--variant / --exclude-variant leave no item to score")
    return chosen


def _options_for(spec: str, options: dict) -> dict:
    """Model options go to model-backed verifiers; a plug-in gets only the flags given."""
    if spec.startswith(("scout:llm", "deaction")):
        return dict(options)
    if spec.startswith("python:"):
        return {k: v for k, v in options.items() if k in ("model", "base_url", "api_key")}
    return {}
