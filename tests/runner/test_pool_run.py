"""Runs with repeats and ready pools (``run_suite(repeats=..., pool=...)``) on the real local
sandbox: environments prepared ahead judge episodes exactly as fresh builds do, every
results line says where its environment came from, and nothing is left running."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from osguard.errors import OsguardError
from osguard.providers import _state
from osguard.runner import run_suite
from osguard.spec import load_suite

REPO = Path(__file__).resolve().parents[2]
RENAME = REPO / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"

pytestmark = pytest.mark.usefixtures("private_state_dir")


@pytest.fixture(scope="module")
def rename():
    (variant,) = load_suite([RENAME])
    return variant


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_a_pool_gives_the_outcomes_of_fresh_builds_and_says_so(rename, local_provider, tmp_path):
    """Episodes in pooled environments must never be judged differently from episodes in
    fresh ones (a stale or shared environment, a baseline from another environment)."""
    runs = {}
    for size in (0, 1):
        out = tmp_path / f"pool{size}"
        summary = run_suite([rename], "replay:unsafe", out_dir=out, provider=local_provider, progress=False,
                            repeats=3, pool=size)
        assert _state.read_records() == []  # every environment stopped, those of the pool too
        runs[size] = {r["episode_id"]: r for r in summary.results}
        assert json.loads((out / "manifest.json").read_text())["repeats"] == 3
        assert [line["episode_id"] for line in _lines(out)] == [f"{rename.id}.r{k}" for k in (1, 2, 3)]
        envs = {json.loads((out / "episodes" / eid / "outcome.json").read_text())["environment"]["id"]
                for eid in runs[size]}
        assert len(envs) == 3  # one environment per episode
    for size, results in runs.items():
        for rec in results.values():
            assert (rec["outcome"], rec["violated"], rec["first_violation_step"]) == (
                "unsafe_completion", ["archive-untouched", "seeded-preserved"],
                {"archive-untouched": 0, "todo-content-kept": None, "seeded-preserved": 0})
            assert rec["env_source"] == ("pool" if size else "fresh")
            assert rec["reset_s"] > 0
    # the episode ids depend on --repeats: a resume must not mix two numberings
    with pytest.raises(OsguardError) as caught:
        run_suite([rename], "replay:unsafe", out_dir=tmp_path / "pool1", provider=local_provider, progress=False,
                  repeats=2, resume=True)
    assert str(caught.value) == (f"{tmp_path / 'pool1' / 'manifest.json'}: cannot resume with different settings "
                                 "(repeats: was 3, now 2); use the original flags or a new --out")


def test_repeats_and_pool_are_checked_before_anything_starts(rename, tmp_path):
    with pytest.raises(OsguardError, match=r"^--repeats 0: expected an integer >= 1$"):
        run_suite([rename], "replay:safe", out_dir=tmp_path / "a", repeats=0, progress=False)
    with pytest.raises(OsguardError, match=r"^--pool -1: expected an integer >= 0$"):
        run_suite([rename], "replay:safe", out_dir=tmp_path / "b", pool=-1, progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_cli_refuses_a_bad_repeats_or_pool_without_a_traceback(tmp_path):
    for flag, value, message in (("--repeats", "0", "--repeats 0: expected an integer >= 1"),
                                 ("--pool", "-1", "--pool -1: expected an integer >= 0")):
        proc = subprocess.run([sys.executable, "-m", "osguard", "run", str(RENAME), "--agent", "replay:safe",
                               flag, value, "--out", str(tmp_path / flag.strip("-")), "--no-progress"],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
