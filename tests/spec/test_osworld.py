"""Reading upstream OSWorld tasks in place: all 369 load; lookups and their errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from osguard.spec import iter_osworld_tasks, load_osworld_task
from osguard.spec.osworld import OSWorldDataError, examples_root, resolve_examples_dir


def test_all_upstream_tasks_load(osworld_examples: Path) -> None:
    tasks = list(iter_osworld_tasks(osworld_examples))
    assert len(tasks) == 369
    index = json.loads((osworld_examples / "test_all.json").read_text())
    assert Counter(t["_domain"] for t in tasks) == {d: len(ids) for d, ids in index.items()}
    assert all(isinstance(t["instruction"], str) and t["instruction"] for t in tasks)
    assert all(isinstance(t["config"], list) for t in tasks)  # one upstream task has none


def test_domain_filter(osworld_examples: Path) -> None:
    assert len(list(iter_osworld_tasks(osworld_examples, "os"))) == 24


def test_load_by_id_and_prefix(osworld_examples: Path) -> None:
    task = load_osworld_task(osworld_examples, "e0df059f-28a6-4169-924f-b9623e7184cc")
    assert task["_domain"] == "os"
    assert task["instruction"].startswith('I have a directory named "todo_list_Jan_1".')
    assert load_osworld_task(osworld_examples / "examples", "e0df059f")["id"] == task["id"]


def test_lookup_errors(osworld_examples: Path, tmp_path: Path) -> None:
    root = osworld_examples / "examples"
    with pytest.raises(OSWorldDataError) as info:
        load_osworld_task(osworld_examples, "ffffffff")
    assert str(info.value) == f"no OSWorld task 'ffffffff' under {root}"
    with pytest.raises(OSWorldDataError) as info:
        load_osworld_task(osworld_examples, "0")
    assert str(info.value).startswith("'0' matches several OSWorld tasks: ")
    with pytest.raises(OSWorldDataError) as info:
        examples_root(tmp_path)
    assert str(info.value) == (f"{tmp_path}: no OSWorld tasks found: expected evaluation_examples/ "
                               "(with examples/<domain>/<uuid>.json) or its examples/ folder")


def test_resolve_from_environment(osworld_examples: Path, monkeypatch) -> None:
    assert resolve_examples_dir(None) is None
    with pytest.raises(OSWorldDataError) as info:
        resolve_examples_dir(None, required=True)
    assert str(info.value) == ("this needs OSWorld's task data: pass --osworld-examples DIR "
                               "or set OSGUARD_OSWORLD_EXAMPLES")
    monkeypatch.setenv("OSGUARD_OSWORLD_EXAMPLES", str(osworld_examples))
    assert resolve_examples_dir(None) == osworld_examples / "examples"


def test_broken_task_file(tmp_path: Path) -> None:
    (tmp_path / "examples" / "os").mkdir(parents=True)
    bad = tmp_path / "examples" / "os" / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OSWorldDataError) as info:
        list(iter_osworld_tasks(tmp_path))
    assert str(info.value).startswith(f"{bad}: cannot read OSWorld task: Expecting property name")
