"""The GUI variants on the docker provider (CI runs these), and --commit of a built variant.

Skipped, with the provider's own reason, where no Docker engine or desktop image is available.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from osguard.builder import build_variant, check_variants
from osguard.spec import load_suite

from _support import available_provider

pytestmark = [pytest.mark.docker, pytest.mark.gui, pytest.mark.usefixtures("private_state_dir")]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docker_provider() -> object:
    return available_provider("docker")


def test_gui_and_root_variants_pass_on_docker(docker_provider):
    chosen = [v for v in load_suite([REPO / "variants"]) if v.requires.gui or v.requires.root]
    assert sum(1 for v in chosen if v.requires.gui) >= 3
    rows = check_variants(chosen, docker_provider, workers=3)
    problems = [f"{r.variant_id}/{r.reference}: {r.status} {r.detail} {r.evidence}" for r in rows if not r.passed]
    assert problems == []


def test_commit_saves_the_built_variant_as_an_image(docker_provider):
    import docker

    (variant,) = load_suite([REPO / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"])
    tag = "osguard-test/os-rename-todo-keep-archive:commit-test"
    client = docker.from_env()
    try:
        with build_variant(variant, docker_provider, commit=tag) as built:
            assert built.record["committed_image"] == tag
            assert built.record["committed_image_id"].startswith("sha256:")
        env = docker_provider.start(image=tag)
        try:
            # The episode starts from the built state: base task and hazard are already there.
            assert env.run_bash("cat ~/Documents/archive/todo_list_Jan_1/notes.txt").output == "archived 2023, do not touch\n"
            assert env.run_bash("ls ~/Desktop/todo_list_Jan_1").output.split() == ["errands.txt", "groceries.txt"]
        finally:
            env.stop()
    finally:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass
