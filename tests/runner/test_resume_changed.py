"""Resuming a run after a variant's spec file changed: refused by default (its episodes
would mix two specs), or with ``rerun_changed`` the changed variant's episodes are dropped
and run again while the others are kept as they were. Real local sandbox, real runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from osguard.errors import OsguardError
from osguard.runner import run_suite
from osguard.spec import load_suite

SUITE = Path(__file__).parent / "data" / "suite" / "rt-rename-todo.yaml"


def _two_variants(folder: Path) -> tuple[Path, Path]:
    """The runner's test variant and a renamed copy of it, as two spec files."""
    folder.mkdir()
    first = folder / "rt-rename-todo.yaml"
    shutil.copy(SUITE, first)
    second = folder / "rt-rename-todo-copy.yaml"
    second.write_text(SUITE.read_text().replace("id: rt-rename-todo", "id: rt-rename-todo-copy", 1))
    return first, second


def _results(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {r["episode_id"]: r for r in map(json.loads, lines)}


def test_a_changed_spec_is_refused_or_rerun_alone(tmp_path, private_state_dir):
    """Must never happen again: an items build resumed after a one-line edit of a variant
    threw away hours of replays (resume refused, only a new --out); and a resume must never
    keep episodes recorded under the old spec."""
    first, second = _two_variants(tmp_path / "variants")
    out = tmp_path / "run"
    run_suite(load_suite([tmp_path / "variants"]), "replay:safe", out_dir=out, progress=False)
    before = _results(out)
    assert set(before) == {"rt-rename-todo", "rt-rename-todo-copy"}

    text = second.read_text()
    second.write_text(text.replace("description: >-", "description: >-\n  Edited after the run started.", 1))
    edited = load_suite([tmp_path / "variants"])
    with pytest.raises(OsguardError) as err:
        run_suite(edited, "replay:safe", out_dir=out, progress=False, resume=True)
    assert str(err.value) == (f"{out / 'manifest.json'}: cannot resume: spec changed since the run started for "
                              "rt-rename-todo-copy; use a new --out, or --rerun-changed to run them again")
    with pytest.raises(OsguardError, match="^--rerun-changed needs --resume"):
        run_suite(edited, "replay:safe", out_dir=tmp_path / "other", progress=False, rerun_changed=True)

    summary = run_suite(edited, "replay:safe", out_dir=out, progress=False, resume=True, rerun_changed=True)
    assert summary.ran == 1
    after = _results(out)
    assert after["rt-rename-todo"] == before["rt-rename-todo"]  # kept, byte for byte the same record
    new_hash = next(v.spec_hash for v in edited if v.id == "rt-rename-todo-copy")
    assert after["rt-rename-todo-copy"]["spec_hash"] == new_hash != before["rt-rename-todo-copy"]["spec_hash"]
    assert after["rt-rename-todo-copy"]["outcome"] == "safe_success"
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["variants"]["rt-rename-todo-copy"]["spec_hash"] == new_hash
    assert manifest["rerun_changed"] == {"rt-rename-todo-copy": before["rt-rename-todo-copy"]["spec_hash"]}
    # nothing changed since: a further resume runs nothing and keeps the record of what was rerun
    again = run_suite(edited, "replay:safe", out_dir=out, progress=False, resume=True, rerun_changed=True)
    assert again.ran == 0
    assert json.loads((out / "manifest.json").read_text())["rerun_changed"] == manifest["rerun_changed"]
