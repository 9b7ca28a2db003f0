"""Ready pools (osguard.builder.pool) of real local environments: what ``take()`` hands out
is ready and isolated, build errors reach the take that drew them alone, and ``close()``
leaves no environment behind (the provider's own list, in this module's state folder)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from osguard.builder.pool import ReadyPool
from osguard.errors import BuildError
from osguard.providers import _state
from osguard.spec import load_suite


@pytest.fixture(autouse=True)
def _no_leftovers(private_state_dir):
    """Every test starts and ends with no running environment of this module."""
    assert _state.read_records() == []
    yield
    assert [r["id"] for r in _state.read_records()] == []


def _ids() -> set[str]:
    return {r["id"] for r in _state.read_records()}


def test_take_hands_out_ready_environments_that_share_nothing(local_provider, rename_variant):
    with ReadyPool(rename_variant, local_provider, size=1) as pool:
        first = pool.take()
        try:
            second = pool.take()
            try:
                assert first.env.info.id != second.env.info.id
                assert second.record["pool"]["ahead"] is True and second.record["pool"]["discarded"] is None
                assert "template" not in first.record and second.record["template"]["entries"] > 0
                for built in (first, second):
                    # ready: setup and hazards in place, and the baseline is this environment's state now
                    assert built.env.execute("ls ~/Desktop ~/Documents/archive", shell=True).output.split() == [
                        "/home/user/Desktop:", "todo_list_Jan_1", "/home/user/Documents/archive:", "todo_list_Jan_1"]
                    assert built.probe()["files"] == built.baseline["files"]
                first.replay(["echo mine > ~/Desktop/only-in-first.txt"])
                assert first.env.execute("cat ~/Desktop/only-in-first.txt", shell=True).output == "mine\n"
                assert second.env.execute("ls ~/Desktop", shell=True).output.split() == ["todo_list_Jan_1"]
            finally:
                second.stop()
        finally:
            first.stop()


def _failing_copy(tmp_path: Path, rename_variant):
    """The rename variant in a suite of its own whose setup uploads tasks/seed.txt."""
    root = tmp_path / "suite"
    (root / "variants").mkdir(parents=True)
    (root / "tasks").mkdir()
    seed = root / "tasks" / "seed.txt"
    seed.write_text("seed\n")
    text = Path(rename_variant.source_path).read_text(encoding="utf-8").replace(
        "setup:\n", "setup:\n  - upload_file: {files: [{local_path: seed.txt, path: ~/Desktop/seed.txt}]}\n", 1)
    path = root / "variants" / "os-rename-todo-keep-archive.yaml"
    path.write_text(text, encoding="utf-8")
    (variant,) = load_suite([path])
    return variant, seed, path


def test_a_failed_build_raises_from_its_take_only_and_the_pool_goes_on(local_provider, rename_variant, tmp_path):
    variant, seed, path = _failing_copy(tmp_path, rename_variant)
    kept = seed.read_bytes()
    seed.unlink()  # the build prepared now fails on it
    with ReadyPool(variant, local_provider, size=1, templates=False) as pool:
        pool.wait()
        seed.write_bytes(kept)  # the replacement, prepared from the failing take on, builds
        with pytest.raises(BuildError) as caught:
            pool.take()
        line = path.read_text().splitlines().index(
            "  - upload_file: {files: [{local_path: seed.txt, path: ~/Desktop/seed.txt}]}") + 1
        assert str(caught.value) == (f"{path}:{line}: $.setup[0] (upload_file): "
                                     f"local file not found: {seed}")
        built = pool.take()
        try:
            assert built.env.execute("cat ~/Desktop/seed.txt", shell=True).output == "seed\n"
            assert built.record["pool"]["ahead"] is True
        finally:
            built.stop()


def test_close_stops_what_is_ready_and_what_is_still_being_prepared(local_provider, rename_variant):
    pool = ReadyPool(rename_variant, local_provider, size=2, templates=False)
    taken = pool.take()  # the caller's: close must leave it running
    try:
        deadline = time.monotonic() + 60
        while len(_ids()) < 3 and time.monotonic() < deadline:  # both replacements' environments are up...
            time.sleep(0.02)
        assert len(_ids()) == 3
        pool.close()  # ... and at least one of them is still in its setup or probe
        assert _ids() == {taken.env.info.id}
        assert taken.env.is_alive()
        with pytest.raises(BuildError, match="^ready pool of os-rename-todo-keep-archive: the pool is closed$"):
            pool.take()
    finally:
        taken.stop()


def test_take_replaces_an_environment_that_died_while_it_waited(local_provider, rename_variant):
    with ReadyPool(rename_variant, local_provider, size=1) as pool:
        pool.wait()
        (record,) = _state.read_records()
        local_provider.attach(record).stop()  # killed from outside, as `osguard env down` would
        built = pool.take()
        try:
            assert built.env.info.id != record["id"] and built.env.is_alive()
            assert built.record["pool"] == {**built.record["pool"], "ahead": False, "discarded":
                                            f"environment {record['id']} stopped answering while it waited in the pool"}
            assert built.probe()["files"] == built.baseline["files"]
        finally:
            built.stop()
