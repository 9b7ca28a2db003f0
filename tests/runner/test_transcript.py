"""The transcript invariants read is filled the same way by the runner and by `osguard check`
(one function, ``trajectory_view``), on the real local provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osguard.runner import run_suite

pytestmark = pytest.mark.usefixtures("private_state_dir")

DATA = Path(__file__).parent / "data" / "transcript"


@pytest.fixture(scope="module")
def variant():
    from osguard.spec import load_suite

    return next(iter(load_suite([DATA])))


def test_a_secret_printed_by_an_action_is_unsafe_in_a_run(variant, tmp_path: Path) -> None:
    """Must never happen again: an episode whose action printed a secret (base64 of a grep
    over the project) and wrote it nowhere was safe_success."""
    out = tmp_path / "run"
    summary = run_suite([variant], "replay:unsafe", out_dir=out, progress=False)
    assert summary.outcome_of(variant.id) == "unsafe_completion"
    doc = json.loads((out / "episodes" / variant.id / "outcome.json").read_text())
    assert doc["violated"] == ["token-not-shown"]
    assert doc["first_violation_step"]["token-not-shown"] == 0
    [verdict] = [v for v in doc["evaluation"]["verdicts"] if v["invariant_id"] == "token-not-shown"]
    assert verdict["evidence"][0]["path"] == "<output 0>"
    assert verdict["evidence"][0]["actual"].startswith("token present (base64")


def test_a_secret_printed_by_an_action_is_unsafe_in_check(variant) -> None:
    """`osguard check` judges the replay's outputs too: the unsafe reference passes only
    because the printed token is caught, the safe one stays safe_success."""
    from osguard.builder.check import reference_jobs, run_reference

    rows = {job.reference: run_reference(job, "local") for job in reference_jobs(variant, ("safe", "unsafe"))}
    assert rows["unsafe"].status == "pass", rows["unsafe"]
    assert rows["unsafe"].violated == ("token-not-shown",)
    assert rows["safe"].status == "pass", rows["safe"]


def test_a_secret_shown_in_a_gui_terminal_is_unsafe(tmp_path: Path, local_provider) -> None:
    """Must never happen again: a GUI agent that types `cat .env` into the xterm and reads the
    token off the screen (no stdout reaches osguard) was safe_success."""
    from osguard.spec import load_suite

    env = local_provider.start()
    gui = env.capabilities.gui and "xterm" in env.capabilities.apps
    env.stop()
    if not gui:
        pytest.skip("the local provider has no display or no xterm here")
    variant = next(iter(load_suite([DATA.parent / "terminal"])))
    out = tmp_path / "run"
    summary = run_suite([variant], "replay:unsafe", out_dir=out, progress=False)
    assert summary.outcome_of(variant.id) == "unsafe_completion"
    doc = json.loads((out / "episodes" / variant.id / "outcome.json").read_text())
    [verdict] = [v for v in doc["evaluation"]["verdicts"] if v["invariant_id"] == "token-not-shown"]
    assert verdict["evidence"][0]["detail"] == "disclosed in an action's output"
    assert doc["first_violation_step"]["token-not-shown"] in (0, 1)  # the typing step or the WAIT
    safe = run_suite([variant], "replay:safe", out_dir=tmp_path / "safe", progress=False)
    assert safe.outcome_of(variant.id) == "safe_success"
