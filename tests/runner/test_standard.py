"""`osguard run --standard`: standard OSWorld executions (base task: setup only, no hazards,
judged by success alone), on the real local sandbox, and SCOUT items built from them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from osguard.runner import run_suite

HERE = Path(__file__).resolve().parent
RENAME = HERE / "data" / "suite" / "rt-rename-todo.yaml"
SAVE = HERE.parent / "builder" / "data" / "pc-save-keeps-line.yaml"
DECOY = "/home/user/Documents/archive/todo_list_Jan_1/notes.txt"


def _doc(run_dir: Path, episode: str, name: str = "outcome.json") -> dict:
    return json.loads((run_dir / "episodes" / episode / name).read_text())


@pytest.fixture(scope="module")
def standard_run(tmp_path_factory) -> Path:
    """`osguard run --standard --agent replay:safe` over two variants, on the command line."""
    out = tmp_path_factory.mktemp("standard") / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "osguard", "run", str(RENAME), str(SAVE), "--agent", "replay:safe",
         "--standard", "--workers", "2", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    if "not available" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    return out


def test_standard_run_records_base_tasks_judged_by_success(standard_run: Path) -> None:
    manifest = json.loads((standard_run / "manifest.json").read_text())
    assert manifest["standard"] is True and manifest["step_probe"] is False
    assert sorted(manifest["variants"]) == ["pc-save-keeps-line", "rt-rename-todo"]
    results = [json.loads(line) for line in (standard_run / "results.jsonl").read_text().splitlines()]
    assert {r["variant_id"]: r["outcome"] for r in results} == {
        "pc-save-keeps-line": "safe_success", "rt-rename-todo": "safe_success"}
    for episode in ("rt-rename-todo", "pc-save-keeps-line"):
        doc = _doc(standard_run, episode)
        assert doc["standard"] is True
        assert doc["build"]["hazards"] is False
        assert doc["evaluation"]["verdicts"] == [] and doc["violated"] == []
        assert doc["first_violation_step"] == {}
        steps = [json.loads(line) for line in
                 (standard_run / "episodes" / episode / "steps.jsonl").read_text().splitlines()]
        assert all("invariants" not in step for step in steps)
    # no hazard was injected: the decoy archive the invariant watches does not exist
    baseline = _doc(standard_run, "rt-rename-todo", "baseline_state.json")
    # (the probe request also covers the seeded paths outside the targets: the decoy)
    assert baseline["roots"] == {"/home/user/Documents/archive": False, DECOY: False}
    assert DECOY not in baseline["files"]


def test_items_build_takes_standard_runs_without_the_flag(standard_run: Path, tmp_path: Path) -> None:
    """Regression: a run made with `osguard run --standard` must become SCOUT's standard
    source by itself (no `--standard RUN_DIR` needed), never risk_augmented."""
    from osguard.scout.items import load_items

    out = tmp_path / "items"
    proc = subprocess.run([sys.executable, "-m", "osguard", "items", "build", str(standard_run), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    items = load_items(out)
    # rt-rename-todo's safe reference executes 2 shell actions, pc-save-keeps-line's 1
    assert len(items) == 3
    assert {i.source for i in items} == {"standard"}
    assert {(i.label, i.label_origin) for i in items} == {("allowed", "source")}
    assert all(i.provenance["standard"] is True for i in items)
    assert {i.provenance["variant_id"] for i in items} == {"rt-rename-todo", "pc-save-keeps-line"}
    assert "standard: 3 (allowed 3)" in proc.stdout


def test_standard_episode_ignores_invariants(tmp_path: Path) -> None:
    """Without hazards the unsafe reference's find-and-rename touches nothing else: the
    episode is judged by success alone, and the postconfig save still runs before it."""
    from osguard.spec import load_suite

    variants = list(load_suite([str(RENAME), str(SAVE)]))
    out = tmp_path / "run"
    summary = run_suite(variants, "replay:unsafe", out_dir=out, progress=False, standard=True)
    assert {r["variant_id"]: r["outcome"] for r in summary.results} == {
        "pc-save-keeps-line": "safe_success", "rt-rename-todo": "safe_success"}
    save = _doc(out, "pc-save-keeps-line")
    assert save["evaluation"]["success_detail"] == "exact_match: 1"
    # the invariant would be violated (the save dropped "keep me") but is not evaluated
    final = _doc(out, "pc-save-keeps-line", "final_state.json")
    assert final["files"]["/home/user/notes.txt"]["size"] == len("new line\n")
    assert save["violated"] == [] and save["evaluation"]["verdicts"] == []


def test_resume_refuses_to_mix_standard_and_variant_runs(tmp_path: Path) -> None:
    from osguard.errors import OsguardError
    from osguard.spec import load_suite

    variants = list(load_suite([str(RENAME)]))
    out = tmp_path / "run"
    run_suite(variants, "replay:noop", out_dir=out, progress=False, standard=True)
    with pytest.raises(OsguardError) as exc:
        run_suite(variants, "replay:noop", out_dir=out, progress=False, resume=True)
    assert str(exc.value) == (f"{out / 'manifest.json'}: cannot resume with different settings "
                              "(standard: was True, now False); use the original flags or a new --out")
    again = run_suite(variants, "replay:noop", out_dir=out, progress=False, resume=True, standard=True)
    assert (again.ran, again.skipped) == (0, 1)
    assert again.results[0]["outcome"] == "task_failure"
