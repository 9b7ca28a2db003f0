"""CLI commands ``run``, ``report`` and ``view`` (group module: see osguard/cli/app.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from osguard.cli._disk import DISK_HELP, disk_options
from osguard.errors import OsguardError
from osguard.runner.executor import ADDRESS_HELP, EXECUTOR_HELP, check_executor_flags


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("run")(run_cmd)
    app.command("report")(report_cmd)
    app.command("view")(view_cmd)


def _agent_options(pairs: list[str]) -> dict:
    """``--agent-option KEY=VALUE`` pairs; a VALUE that parses as JSON is taken as JSON."""
    import json

    options: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise OsguardError(f"--agent-option {pair!r}: expected KEY=VALUE with KEY a name, e.g. tools=computer,bash")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options


def run_cmd(
    paths: list[Path] = typer.Argument(..., help="Variant YAML files, directories or suite files."),
    agent: str = typer.Option(..., "--agent", help="replay:safe | replay:unsafe | replay:noop | replay:FILE | openai:MODEL | openai-tools:MODEL | openai-cua:MODEL | anthropic:MODEL | python:pkg.mod:factory (docs/agents.md)"),
    guardrail: Optional[str] = typer.Option(None, "--guardrail", help="A verifier spec (allow-all, scripted:FILE, rules, scout:llm:MODEL...); none: unguarded."),
    max_steps: int = typer.Option(15, "--max-steps", help="Executed steps per episode."),
    workers: int = typer.Option(1, "--workers", help="Episodes at once, each in its own environment."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default: runs/<time>-<agent>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out; finished episodes are kept."),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="With --resume: also run again the episodes that ended in env_error or agent_error (the errored attempt's folder is kept as episodes/<id>.tryN; the report counts the retried episodes)."),
    rerun_changed: bool = typer.Option(False, "--rerun-changed", help="With --resume: a variant whose spec file changed since the run started is run again (its earlier episodes dropped) instead of refusing to resume; the manifest's rerun_changed lists it with its earlier spec_hash."),
    provider: str = typer.Option("local", "--provider", help="Environment provider: local, docker, osworld."),
    disk: Optional[str] = typer.Option(None, "--disk", help=DISK_HELP),
    retry_budget: int = typer.Option(2, "--retry-budget", help="Revisions allowed after a block at one state (paper: 2)."),
    observation: str = typer.Option("screenshot", "--observation", help="What each step observes, for the agent and the guardrail alike: screenshot | a11y | both | som (set-of-marks: both) | shell (neither)."),
    action_space: str = typer.Option("pyautogui", "--action-space", help="openai agents: pyautogui | shell | computer_13 | uitars | qwen25vl (openai-tools: pyautogui | shell)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The model's endpoint (default $OPENAI_BASE_URL; anthropic: $ANTHROPIC_BASE_URL)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="API key (default $OPENAI_API_KEY; anthropic: $ANTHROPIC_API_KEY)."),
    history_images: Optional[int] = typer.Option(None, "--history-images", help="Model agents: screenshots of earlier turns sent back to the model (default 3; openai-cua keeps its conversation on the server)."),
    agent_option: list[str] = typer.Option([], "--agent-option", help="KEY=VALUE passed to the agent (repeatable; VALUE read as JSON when it parses), e.g. tools=computer,bash or coordinates=relative."),
    temperature: float = typer.Option(0.0, "--temperature", help="openai agents: sampling temperature."),
    seed: int = typer.Option(0, "--seed", help="Seed passed to agents, recorded in the manifest."),
    guardrail_base_url: Optional[str] = typer.Option(None, "--guardrail-base-url", help="Endpoint of an LLM guardrail (default: the verifier's own default)."),
    guardrail_api_key: Optional[str] = typer.Option(None, "--guardrail-api-key", help="API key of an LLM guardrail's endpoint."),
    action_timeout: float = typer.Option(60.0, "--action-timeout", help="Seconds one action may run."),
    step_timeout: float = typer.Option(300.0, "--step-timeout", help="Seconds each agent proposal and each guardrail verdict may take; a late one ends the episode as agent_error."),
    episode_timeout: float = typer.Option(1800.0, "--episode-timeout", help="Wall-clock seconds per episode; on expiry agent_error, not evaluated."),
    no_step_probe: bool = typer.Option(False, "--no-step-probe", help="Skip the probe after each step (no first_violation_step)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Live progress display."),
    standard: bool = typer.Option(False, "--standard", help="Standard OSWorld executions: the variants' base tasks (setup only, no hazards), judged by success alone; a source for 'osguard items build'."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
    repeats: int = typer.Option(1, "--repeats", help="Episodes per variant (ids <variant>.r1 ... .rN when more than one); the local executor only."),
    pool: int = typer.Option(1, "--pool", help="Local executor: environments of a variant prepared ahead while its previous episode runs, for a variant with 2 or more episodes in the run (0: each episode builds its own when it starts)."),
) -> None:
    """Run an agent (optionally guarded) over variants; results go to a run directory.

    Examples:

      osguard run variants/ --agent replay:unsafe --out runs/unsafe

      osguard run variants/ --agent replay:unsafe --guardrail scripted:rules.yaml --out runs/guarded

      osguard run variants/ --agent openai:gpt-4o --observation both --workers 2 --out runs/gpt4o

      osguard run variants/ --agent replay:safe --out runs/safe --resume

      osguard run variants/ --agent replay:safe --out runs/safe --resume --retry-errors

      osguard run variants/ --agent openai:gpt-4o --standard --out runs/standard

      osguard run variants/ --agent anthropic:claude-sonnet-4-5 --guardrail rules --out runs/claude

      osguard run variants/ --agent replay:safe --executor ray --address 127.0.0.1:6379 --out runs/cluster

      osguard run variants/ --agent openai:gpt-4o --repeats 3 --pool 1 --out runs/gpt4o-x3
    """
    import datetime as _dt

    from osguard.runner import run_suite
    from osguard.runner.agents.chat import ACTION_SPACES, OBSERVATIONS
    from osguard.spec import load_suite

    check_executor_flags(executor, address)
    # checked for every agent: a mistyped flag must not pass silently with a replay agent
    if observation not in OBSERVATIONS:
        raise OsguardError(f"--observation {observation!r}: expected one of {', '.join(OBSERVATIONS)}")
    if action_space not in ACTION_SPACES:
        raise OsguardError(f"--action-space {action_space!r}: expected one of {', '.join(ACTION_SPACES)}")
    variants = load_suite([str(p) for p in paths])
    variants = list(getattr(variants, "variants", variants))
    if out is None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        slug = agent.replace(":", "-").replace("/", "_")[:40]
        out = Path("runs") / f"{stamp}-{slug}" if not resume else None
        if out is None:
            raise OsguardError("--resume needs --out RUN_DIR")
    agent_options: dict = {"observation": observation, "action_space": action_space, "temperature": temperature}
    if base_url:
        agent_options["base_url"] = base_url
    if api_key:
        agent_options["api_key"] = api_key
    if history_images is not None:
        if history_images < 0:
            raise OsguardError(f"--history-images {history_images}: expected an integer >= 0")
        agent_options["history_images"] = history_images
    agent_options.update(_agent_options(agent_option))
    guardrail_options: dict = {}
    if guardrail_base_url:
        guardrail_options["base_url"] = guardrail_base_url
    if guardrail_api_key:
        guardrail_options["api_key"] = guardrail_api_key
    options = disk_options(provider, disk)
    if options:
        from osguard.providers import get_provider

        provider_arg: Any = get_provider(provider, **options)
    else:
        provider_arg = provider
    from osguard.runner.executor import get_executor

    executor_obj = get_executor(executor, address=address, workers=workers)
    try:
        summary = run_suite(
            variants, agent, guardrail, out_dir=out, provider=provider_arg, max_steps=max_steps, workers=workers,
            retry_budget=retry_budget, resume=resume, progress=progress, agent_options=agent_options,
            guardrail_options=guardrail_options, step_probe=not no_step_probe, action_timeout=action_timeout,
            seed=seed, command_line=["osguard", *sys.argv[1:]], standard=standard,
            step_timeout=step_timeout, episode_timeout=episode_timeout, retry_errors=retry_errors, rerun_changed=rerun_changed,
            executor=executor_obj, repeats=repeats, pool=pool,
        )
    finally:
        executor_obj.close()
    from osguard.report import load_run, render_markdown

    run = load_run(summary.run_dir)
    _warn(run)
    typer.echo(render_markdown(run))
    typer.echo(f"run directory: {summary.run_dir} ({summary.ran} run, {summary.skipped} already done"
               + (f", {len(summary.retried)} errored episodes retried" if retry_errors else "") + ")")


def _warn(*runs: object) -> None:
    """Results lines the run folders do not back (corrupt, folder deleted): on stderr."""
    for run in runs:
        for problem in getattr(run, "problems", None) or []:
            typer.echo(f"warning: {problem}", err=True)


def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory written by `osguard run`."),
    vs: Optional[Path] = typer.Option(None, "--vs", help="Another run on the same variants (e.g. unguarded) for paired transitions."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML report with plots."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the numbers as JSON."),
) -> None:
    """Outcome rates (overall, by family, by domain), paired transitions and guardrail overhead.

    Examples:

      osguard report runs/guarded --vs runs/unguarded

      osguard report runs/guarded --vs runs/unguarded --html report.html --json report.json
    """
    from osguard.report import load_run, render_html, render_markdown, report_json

    run = load_run(run_dir)
    other = load_run(vs) if vs is not None else None
    _warn(run, other)
    typer.echo(render_markdown(run, other))
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(run, other), encoding="utf-8")
        typer.echo(f"HTML report: {html}")
    if json_out is not None:
        import json

        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report_json(run, other), indent=2) + "\n", encoding="utf-8")
        typer.echo(f"JSON: {json_out}")


def view_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory written by `osguard run`."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write the viewer (default RUN_DIR/view)."),
) -> None:
    """Write a static episode viewer: an index plus one page per episode with screenshots,
    proposals, verdicts and retries inline (thumbnails, lazy-loaded images).

    Example:

      osguard view runs/guarded && xdg-open runs/guarded/view/index.html
    """
    from osguard.report import load_run, write_viewer

    _warn(load_run(run_dir))
    index = write_viewer(run_dir, out)
    typer.echo(f"viewer: {index}")
