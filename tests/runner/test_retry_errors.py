"""`osguard run --resume --retry-errors`: errored episodes run again on the real local
sandbox, the errored attempt is kept, and every reader counts the episode once (its last
results line).

The fault is injected with real parts, as in tests/builder/test_nature.py: a local provider
whose first starts are given a start-up time no sandbox can meet (what a start under heavy
load produces), so the episode ends as ``env_error``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from osguard.errors import OsguardError
from osguard.providers.local import LocalProvider
from osguard.report import load_run, render_html, render_markdown
from osguard.report.render import report_json
from osguard.runner import run_suite
from osguard.spec import load_suite

REPO = Path(__file__).resolve().parents[2]
RENAME = REPO / "tests" / "runner" / "data" / "suite" / "rt-rename-todo.yaml"
OTHER = REPO / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"

from _support import failing_start_provider  # noqa: E402

pytestmark = pytest.mark.usefixtures("private_state_dir", "local_provider")




@pytest.fixture(scope="module")
def two_variants():
    return load_suite([RENAME, OTHER])


@pytest.fixture()
def errored_run(tmp_path, two_variants):
    """A run whose first episode ended in env_error: its three start attempts all failed."""
    out = tmp_path / "run"
    summary = run_suite(two_variants, "replay:safe", out_dir=out, provider=failing_start_provider(3),
                        progress=False)
    first, second = (v.id for v in two_variants)
    assert summary.outcome_of(first) == "env_error"
    assert summary.outcome_of(second) == "safe_success"
    return out


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_retry_errors_redoes_the_errored_episode_and_the_report_counts_it_once(errored_run, two_variants):
    """Never again: an env_error from a failed start stayed a hole that only a new run
    filled, and a reader taking an episode's first line would count the errored attempt."""
    out = errored_run
    first, second = (v.id for v in two_variants)
    reason = _lines(out)[0]["reason"]
    assert reason.startswith(f"build failed: could not start an environment for {first} on provider 'local' in 3 attempts")
    provider = failing_start_provider(1)  # the retried episode's first start fails again
    summary = run_suite(two_variants, "replay:safe", out_dir=out, provider=provider, progress=False,
                        resume=True, retry_errors=True)
    assert summary.ran == 1 and summary.skipped == 1 and summary.retried == [first]
    assert provider.starts == 2  # one episode, its start retried once; the safe one was not rerun
    assert summary.outcome_of(first) == "safe_success"
    assert [(r["episode_id"], r["outcome"]) for r in summary.results] == [(second, "safe_success"),
                                                                          (first, "safe_success")]
    # append-only: the errored line stays, the new one counts
    assert [(r["episode_id"], r["outcome"]) for r in _lines(out)] == [
        (first, "env_error"), (second, "safe_success"), (first, "safe_success")]
    kept = {"outcome": "env_error", "reason": reason, "episode_dir": f"episodes/{first}.try1"}
    assert summary.results[1]["retried"] == [kept]
    assert json.loads((out / "episodes" / f"{first}.try1" / "outcome.json").read_text())["outcome"] == "env_error"
    doc = json.loads((out / "episodes" / first / "outcome.json").read_text())
    assert doc["outcome"] == "safe_success" and doc["retried"] == [kept]
    assert len(doc["start_retries"]) == 1 and doc["start_retries"][0].startswith("attempt 1: ")
    assert summary.results[1]["start_retries"] == 1
    assert json.loads((out / "manifest.json").read_text())["retried"] == {first: [kept]}

    run = load_run(out)
    assert [r["outcome"] for r in run.results] == ["safe_success", "safe_success"]
    text = render_markdown(run)
    assert "2/2 episodes finished" in text
    assert f"retried after an error: 1 episode ({first}: env_error → safe_success)" in text
    assert f"environment starts retried: 1 in 1 episode ({first} 1)" in text
    assert "| run | 2 | 100% (2) |" in text.replace(run.label, "run")
    data = report_json(run)
    assert data["overall"]["n"] == 2 and data["retried"] == [
        {"episode_id": first, "before": ["env_error"], "outcome": "safe_success"}]
    html = render_html(run)
    assert f"retried after an error: 1 episode ({first}: env_error → safe_success)" in html

    # a later resume keeps the errored attempt's folder and still counts the episode once
    again = run_suite(two_variants, "replay:safe", out_dir=out, provider=LocalProvider(), progress=False,
                      resume=True, retry_errors=True)
    assert again.ran == 0 and again.retried == []
    assert (out / "episodes" / f"{first}.try1" / "outcome.json").is_file()
    assert [(r["episode_id"], r["outcome"]) for r in _lines(out)] == [(second, "safe_success"),
                                                                      (first, "safe_success")]
    assert json.loads((out / "manifest.json").read_text())["retried"] == {first: [kept]}


def test_a_plain_resume_keeps_errored_episodes(errored_run, two_variants):
    summary = run_suite(two_variants, "replay:safe", out_dir=errored_run, provider=LocalProvider(),
                        progress=False, resume=True)
    assert summary.ran == 0 and summary.outcome_of(two_variants[0].id) == "env_error"
    assert "retried" not in render_markdown(load_run(errored_run))


def test_retry_errors_needs_resume(tmp_path, two_variants):
    with pytest.raises(OsguardError) as caught:
        run_suite(two_variants, "replay:safe", out_dir=tmp_path / "new", progress=False, retry_errors=True)
    assert str(caught.value) == "--retry-errors needs --resume: it runs again the errored episodes of an existing run"


def test_cli_retry_errors(errored_run, two_variants):
    proc = subprocess.run(
        [sys.executable, "-m", "osguard", "run", str(RENAME), str(OTHER), "--agent", "replay:safe",
         "--out", str(errored_run), "--resume", "--retry-errors", "--no-progress"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    first = two_variants[0].id
    assert f"retried after an error: 1 episode ({first}: env_error → safe_success)" in proc.stdout
    assert proc.stdout.rstrip().endswith(f"run directory: {errored_run} (1 run, 1 already done, "
                                         "1 errored episodes retried)")
    help_text = subprocess.run([sys.executable, "-m", "osguard", "run", "--help"], capture_output=True,
                               text=True, timeout=60, cwd=REPO, env=dict(os.environ)).stdout
    assert "--retry-errors" in help_text


FLAKY = '''
import os
from pathlib import Path

from osguard.runner.agent_types import AgentError
from osguard.runner.agents import get_agent


class Flaky:
    """The safe replay, but reset fails while the marker file exists (an endpoint that was down)."""

    def __init__(self, variant, **options):
        self.inner = get_agent("replay:safe", variant, **options)
        self.name = "python:flaky_agent:make"

    def reset(self, instruction, variant):
        if Path(os.environ["FLAKY_MARKER"]).exists():
            raise AgentError("the model endpoint is down")
        self.inner.reset(instruction, variant)

    def propose(self, observation, feedback=None):
        return self.inner.propose(observation, feedback)


def make(variant, **options):
    return Flaky(variant, **options)
'''


def test_retry_errors_redoes_an_agent_error(tmp_path, monkeypatch, two_variants):
    (tmp_path / "flaky_agent.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(tmp_path))
    marker = tmp_path / "down"
    marker.write_text("")
    monkeypatch.setenv("FLAKY_MARKER", str(marker))
    variants = two_variants[:1]
    out = tmp_path / "run"
    first = run_suite(variants, "python:flaky_agent:make", out_dir=out, progress=False)
    assert first.outcome_of(variants[0].id) == "agent_error"
    marker.unlink()
    again = run_suite(variants, "python:flaky_agent:make", out_dir=out, progress=False, resume=True,
                      retry_errors=True)
    assert again.retried == [variants[0].id] and again.outcome_of(variants[0].id) == "safe_success"
    assert [a["outcome"] for a in again.results[0]["retried"]] == ["agent_error"]
    assert "the model endpoint is down" in again.results[0]["retried"][0]["reason"]
