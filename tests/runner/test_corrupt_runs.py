"""Run folders whose ``results.jsonl`` and episode folders disagree (issue #10, finding 9).

What must never happen again: a results line whose episode folder was deleted counted as
finished ("3/3 episodes finished" in ``report``, a viewer page, items from it), and a
corrupt middle line dropped without a word. Each such line is now reported with a warning
by ``report``, ``view`` and ``items build``, left out of their counts, and ``--resume``
runs those episodes again. Real runs on the local sandbox, real CLI processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from osguard.report import load_run
from osguard.runner import run_suite
from osguard.runner.trajectory import check_results

SOURCE = Path(__file__).parent / "data" / "suite" / "rt-rename-todo.yaml"
IDS = ["rt-a", "rt-b", "rt-c"]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory):
    """Three copies of the runner's test variant under different ids."""
    from osguard.spec import load_suite

    folder = tmp_path_factory.mktemp("suite")
    text = SOURCE.read_text()
    for vid in IDS:
        (folder / f"{vid}.yaml").write_text(text.replace("id: rt-rename-todo", f"id: {vid}", 1))
    return list(load_suite([folder]))


@pytest.fixture(scope="module")
def finished_run(variants, local_provider, private_state_dir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    summary = run_suite(variants, "replay:safe", out_dir=out, provider=local_provider, progress=False)
    assert sorted(r["episode_id"] for r in summary.results) == IDS
    return out


def _corrupted(finished_run: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of the run: rt-a's folder deleted, rt-b's line (the middle one) garbled.
    Returns it and the ids in the order of results.jsonl."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    lines = (run / "results.jsonl").read_text().splitlines()
    order = [json.loads(line)["episode_id"] for line in lines]
    lines[1] = lines[1][: len(lines[1]) // 2]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    shutil.rmtree(run / "episodes" / order[0])
    return run, order


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "osguard", *args], capture_output=True, text=True, timeout=300)


def _warnings(run: Path, order: list[str]) -> str:
    results = run / "results.jsonl"
    return (f"warning: {results}:1: episode {order[0]}: episodes/{order[0]}/outcome.json is missing; "
            "not counted (--resume runs it again)\n"
            f"warning: {results}:2: not a results record (corrupt line); its episode is not counted "
            "(--resume runs it again)\n")


def test_report_view_and_items_warn_and_do_not_count(finished_run: Path, tmp_path: Path) -> None:
    run, order = _corrupted(finished_run, tmp_path)
    checked = check_results(run)
    assert [r["episode_id"] for r in checked.results] == [order[2]]
    assert len(checked.problems) == 2
    assert [r["episode_id"] for r in load_run(run).results] == [order[2]]

    report = _cli("report", str(run))
    assert report.returncode == 0, report.stderr
    assert report.stderr == _warnings(run, order)
    assert "1/3 episodes finished" in report.stdout

    view = _cli("view", str(run), "--out", str(tmp_path / "view"))
    assert view.returncode == 0, view.stderr
    assert view.stderr == _warnings(run, order)
    assert sorted(p.stem for p in (tmp_path / "view" / "episodes").glob("*.html")) == [order[2]]

    items = _cli("items", "build", str(run), "--out", str(tmp_path / "items"))
    assert items.returncode == 0, items.stderr
    assert items.stderr == _warnings(run, order)
    assert "from 1 episodes" in items.stdout


def test_resume_runs_them_again(finished_run: Path, variants, local_provider, tmp_path: Path) -> None:
    run, order = _corrupted(finished_run, tmp_path)
    summary = run_suite(variants, "replay:safe", out_dir=run, provider=local_provider, progress=False, resume=True)
    assert (summary.ran, summary.skipped) == (2, 1)
    checked = check_results(run)
    assert checked.problems == []
    assert sorted(r["episode_id"] for r in checked.results) == IDS
    assert sorted(p.name for p in (run / "episodes").iterdir()) == IDS
    assert len((run / "results.jsonl").read_text().splitlines()) == 3


def test_a_torn_last_line_stays_silent(finished_run: Path, tmp_path: Path) -> None:
    """SIGKILL mid-append leaves a torn last line without newline: the normal crash case."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    text = (run / "results.jsonl").read_text()
    (run / "results.jsonl").write_text(text + text.splitlines()[0][:40])
    checked = check_results(run)
    assert checked.problems == [] and len(checked.results) == 3
