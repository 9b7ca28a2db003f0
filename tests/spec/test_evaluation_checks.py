"""``validate`` refuses what ``build`` and ``check`` would refuse, with the executors' own bounds
and registries (the malformed corpus holds one file per message; these tests tie the two
sides together)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osguard.builder.steps import StepContext, step_activate_window, step_sleep
from osguard.evaluators.metrics import METRIC_OPTIONS, METRIC_RULES, METRICS, metric_shape
from osguard.spec import bounds
from osguard.spec.loader import check_variant_file
from osguard.spec.render import StepFailed

from .conftest import VALID


def _with_setup_step(tmp_path: Path, step: str) -> list[str]:
    text = (VALID / "minimal-rename.yaml").read_text().replace(
        "  - mkdir: ~/Desktop/todo_list_Jan_1\n", f"  - mkdir: ~/Desktop/todo_list_Jan_1\n  - {step}\n")
    spec = tmp_path / "minimal-rename.yaml"
    spec.write_text(text)
    _, problems = check_variant_file(spec)
    return [f"{p.path}: {p.message}" for p in problems]


class _NoWindows:
    """An environment with no window at all (activate_window always fails)."""

    def activate_window(self, *args: Any, **kwargs: Any) -> None:
        from osguard.errors import EnvironmentError_

        raise EnvironmentError_("no such window")


def _executor_refuses(handler: Any, params: dict[str, Any]) -> bool:
    try:
        handler(_NoWindows(), params, StepContext())
    except StepFailed as exc:
        return "must be a number" in str(exc)
    return False


@pytest.mark.parametrize("seconds", [-1, bounds.SLEEP_MAX_SECONDS + 1, 3600])
def test_sleep_bounds_are_the_executors(tmp_path: Path, seconds: float) -> None:
    """Regression: validate accepted `sleep: {seconds: 3600}`, which the builder then refused."""
    assert _executor_refuses(step_sleep, {"seconds": seconds})
    assert len(_with_setup_step(tmp_path, f"sleep: {{seconds: {seconds}}}")) == 1


def test_sleep_within_bounds_is_valid(tmp_path: Path) -> None:
    assert _with_setup_step(tmp_path, f"sleep: {{seconds: {bounds.SLEEP_MAX_SECONDS}}}") == []
    assert not _executor_refuses(step_sleep, {"seconds": 0})


@pytest.mark.parametrize("timeout", [0, -3, bounds.WINDOW_TIMEOUT_MAX_SECONDS + 1])
def test_window_timeout_bounds_are_the_executors(tmp_path: Path, timeout: float) -> None:
    """Regression: the executor accepted a timeout of 0 that validate refused."""
    assert _executor_refuses(step_activate_window, {"window_name": "x", "timeout": timeout})
    assert len(_with_setup_step(tmp_path, f"activate_window: {{window_name: x, timeout: {timeout}}}")) == 1


def test_window_timeout_default_is_documented_as_the_executors() -> None:
    """Regression: the schema said the default timeout was 10 s; the executor waits 30 s."""
    from osguard.spec.schema import STEP_TYPES

    description = STEP_TYPES["activate_window"]["properties"]["timeout"]["description"]
    assert f"default {bounds.WINDOW_TIMEOUT_DEFAULT_SECONDS}," in description
    import inspect

    assert "WINDOW_TIMEOUT_DEFAULT_SECONDS" in inspect.getsource(step_activate_window)


def test_metric_tables_name_real_metrics() -> None:
    assert set(METRIC_OPTIONS) <= set(METRICS) and set(METRIC_RULES) <= set(METRICS)
    for name in METRICS:
        assert metric_shape(name) is not None
    shape = metric_shape("literal_match")
    assert shape is not None and shape.needs_expected and set(shape.options) == {"type", "ignore_case"}
    shape = metric_shape("is_utc_0")
    assert shape is not None and not shape.takes_expected and shape.options == {}
    shape = metric_shape("check_json")
    assert shape is not None and shape.options == {"is_yaml": {"type": "boolean"}}


CLOUD = """\
  func: compare_text_file
  result: {type: vm_file, path: ~/Desktop/out.txt, dest: out.txt}
  expected: {type: cloud_file, path: "https://example.org/gold.txt", dest: gold.txt}
"""


def test_cloud_file_needs_its_offline_copy(tmp_path: Path) -> None:
    spec = tmp_path / "variants" / "wrong_target_or_globalized_update" / "minimal-rename.yaml"
    spec.parent.mkdir(parents=True)
    text = (VALID / "minimal-rename.yaml").read_text()
    spec.write_text(text[:text.index("success:")] + "success:\n" + CLOUD + text[text.index("invariants:"):])
    gold = tmp_path / "tasks" / "gold" / "e0df059f-28a6-4169-924f-b9623e7184cc"
    gold.mkdir(parents=True)
    _, problems = check_variant_file(spec)
    assert [f"{p.path}: {p.message}" for p in problems] == [
        "$.success.expected.dest: no offline copy of gold file 'gold.txt': put it in "
        "tasks/gold/e0df059f-28a6-4169-924f-b9623e7184cc/ (osguard never downloads)"]
    (gold / "gold.txt").write_text("gold\n")
    assert check_variant_file(spec)[1] == []


@pytest.mark.parametrize("step,executor", [
    ("write: {path: ~/old.txt, text: x, mtime_days_ago: 10000000}",
     ("write", {"path": "~/old.txt", "text": "x", "mtime_days_ago": 10_000_000})),
])
def test_file_step_bounds_are_the_renderers(tmp_path: Path, step: str, executor: tuple[str, dict[str, Any]]) -> None:
    """Regression: validate accepted an mtime a million years back, which the applier then failed on."""
    from osguard.spec.render import render

    assert _with_setup_step(tmp_path, step) == [
        f"$.setup[1].write.mtime_days_ago: 10000000 is greater than the maximum of {bounds.MTIME_DAYS_AGO_MAX}"]
    with pytest.raises(StepFailed) as info:
        render(*executor)
    assert str(info.value) == f"'mtime_days_ago' must be a number from 0 to {bounds.MTIME_DAYS_AGO_MAX}, got 10000000"
