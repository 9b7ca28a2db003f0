"""Forks (osguard.builder.fork) of real local environments: the file state is copied
exactly and independently, and a fork is judged against the source's baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from osguard.actions import Action
from osguard.builder import build_variant, finish_episode
from osguard.builder.fork import file_fork, fork_paths, replay_fork
from osguard.runner.trajectory import trajectory_view
from osguard.spec import load_suite

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("private_state_dir")


def _listing(env, home: str) -> str:
    script = (f"cd {home} && find Desktop Documents | LC_ALL=C sort | "
              "while read -r p; do if [ -f \"$p\" ]; then stat -c '%n %a %s %Y' \"$p\"; sha256sum \"$p\"; "
              "else stat -c '%n %a %F' \"$p\"; fi; done")
    return env.execute(script, shell=True).output


def test_fork_paths_cover_home_and_named_folders(rename_variant):
    assert fork_paths(rename_variant, "/home/user") == ["/home/user"]
    (compress,) = load_suite([REPO / "variants" / "destructive_overwrite_or_deletion"
                              / "os-compress-old-files-keep-archive.yaml"])
    assert fork_paths(compress, "/home/user") == ["/home/user", "/tmp/test_files"]


def test_file_fork_copies_the_current_file_state_exactly_and_apart(local_provider, rename_variant):
    with build_variant(rename_variant, local_provider) as source:
        source.replay(["chmod 600 ~/Desktop/todo_list_Jan_1/errands.txt", "echo more >> ~/Desktop/todo_list_Jan_1/groceries.txt"])
        before = _listing(source.env, source.ctx.home)
        fork = file_fork(source, local_provider)
        try:
            assert fork.env.info.id != source.env.info.id
            assert fork.record["fork"]["method"] == "file"
            assert _listing(fork.env, fork.ctx.home) == before  # names, modes, sizes, mtimes, hashes
            # the fork is disposable: what happens in it stays there
            fork.replay([rename_variant.references.unsafe.actions[0]])
            assert _listing(source.env, source.ctx.home) == before
            _final, result = finish_episode(fork, trajectory_view([]), Action("special", "DONE"))
            assert set(result.violated) == {"archive-untouched", "seeded-preserved"}
        finally:
            fork.stop()
        _final, result = finish_episode(source, trajectory_view([]), Action("special", "DONE"))
        assert result.violated == ()


def test_replay_fork_rebuilds_and_replays_the_prefix(local_provider, rename_variant):
    fork = replay_fork(rename_variant, local_provider, list(rename_variant.references.safe[:1]))
    try:
        assert fork.record["fork"]["method"] == "replay" and fork.record["fork"]["prefix"] == 1
        out = fork.env.execute("ls ~/Desktop", shell=True).output
        assert out.split() == ["todo_list_Jan_2"]
        _final, result = finish_episode(fork, trajectory_view([]), Action("special", "DONE"))
        assert result.success is True and result.violated == ()
    finally:
        fork.stop()


def test_file_fork_of_a_variant_naming_a_top_level_folder(local_provider, rename_variant):
    """Regression: a variant naming a glob under /tmp made the fork copy /tmp and then
    `rm -rf /tmp` in the fresh environment (a read-only mount point there), so every file
    fork of it failed. Must never happen again."""
    import dataclasses

    variant = dataclasses.replace(rename_variant, targets=rename_variant.targets + ("/tmp/*.log",))
    assert fork_paths(variant, "/home/user") == ["/home/user", "/tmp"]
    with build_variant(variant, local_provider) as source:
        source.replay(["echo kept > /tmp/note.log"])
        fork = file_fork(source, local_provider)
        try:
            assert fork.env.execute("cat /tmp/note.log", shell=True).output == "kept\n"
        finally:
            fork.stop()


def test_forker_forks_into_spares_and_keeps_both_sides_apart(local_provider, rename_variant):
    """A fork into a spare (an environment started ahead) holds the source's exact file
    state; what the fork writes never reaches the source, and what the source writes after
    the fork never reaches the fork."""
    from osguard.builder.fork import Forker

    with build_variant(rename_variant, local_provider) as source:
        source.replay(["chmod 600 ~/Desktop/todo_list_Jan_1/errands.txt"])
        before = _listing(source.env, source.ctx.home)
        with Forker(source, local_provider, spares=1) as forker:
            first = forker.fork()
            second = forker.fork()
            try:
                for fork in (first, second):
                    assert fork.record["fork"]["spare"] is True
                    assert fork.env.capabilities.gui is False  # the variant needs no display
                    assert _listing(fork.env, fork.ctx.home) == before
                assert len({source.env.info.id, first.env.info.id, second.env.info.id}) == 3
                first.replay(["rm -rf ~/Desktop/todo_list_Jan_1"])
                source.replay(["echo late > ~/Desktop/late.txt"])
                assert _listing(second.env, second.ctx.home) == before
                assert "todo_list_Jan_1" in source.env.execute("ls ~/Desktop", shell=True).output
                assert second.env.execute("ls ~/Desktop", shell=True).output.split() == ["todo_list_Jan_1"]
            finally:
                first.stop()
                second.stop()


def test_host_copy_refuses_a_member_below_a_symlink():
    """The local provider extracts a sandbox's files on the host as root: an archive with
    an entry below one of its own symlinks (a sandbox racing the copy) would write where the
    link points, outside the fork. It must be refused, never extracted."""
    import io
    import tarfile

    from osguard.errors import EnvironmentError_
    from osguard.providers.local import _check_host_archive

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        link = tarfile.TarInfo("./Desktop")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
        tar.addfile(tarfile.TarInfo("./Desktop/passwd"), io.BytesIO(b""))
    with pytest.raises(EnvironmentError_) as caught:
        _check_host_archive(buffer.getvalue(), "local-test")
    assert str(caught.value) == "local: refusing to copy './Desktop/passwd' of local-test: below a symlink of the archive"


@pytest.mark.docker
def test_forker_on_docker_copies_through_the_environment_api(rename_variant):
    """On docker (no host-side copy) a fork's file state goes as a tar through the
    Environment API (osguard.builder.archive) and stays apart from its source both ways."""
    from _support import available_provider
    from osguard.builder.fork import Forker

    docker = available_provider("docker")
    with build_variant(rename_variant, docker) as source:
        source.replay(["chmod 600 ~/Desktop/todo_list_Jan_1/errands.txt"])
        before = _listing(source.env, source.ctx.home)
        with Forker(source, docker, spares=1) as forker:
            fork = forker.fork()
            try:
                assert fork.record["fork"]["copy"] == "archive" and fork.record["fork"]["spare"] is True
                assert _listing(fork.env, fork.ctx.home) == before
                fork.replay(["rm -rf ~/Desktop/todo_list_Jan_1"])
                source.replay(["echo late > ~/Desktop/late.txt"])
                assert _listing(source.env, source.ctx.home) != _listing(fork.env, fork.ctx.home)
                assert "todo_list_Jan_1" in source.env.execute("ls ~/Desktop", shell=True).output
                assert "late.txt" not in fork.env.execute("ls ~/Desktop", shell=True).output
            finally:
                fork.stop()


def test_replay_forker_builds_the_next_fork_ahead_and_apart(local_provider, rename_variant):
    """Replay forks built ahead are fresh builds with the prefix replayed, each its own
    environment: what one does never shows in the next; the one built ahead and not
    taken is stopped on close."""
    from osguard.builder.fork import ReplayForker

    prefix = list(rename_variant.references.safe[:1])
    with ReplayForker(rename_variant, local_provider, prefix) as replays:
        first = replays.fork()
        try:
            assert first.record["fork"]["ahead"] is False
            first.replay(["rm -rf ~/Desktop/todo_list_Jan_2"])
        finally:
            first.stop()
        second = replays.fork(prefetch=True)
        try:
            assert second.record["fork"]["ahead"] is True and second.record["fork"]["prefix"] == 1
            assert second.env.info.id != first.env.info.id
            assert second.env.execute("ls ~/Desktop", shell=True).output.split() == ["todo_list_Jan_2"]
        finally:
            second.stop()
        left = replays._next.result()  # built ahead, never taken
    from osguard.errors import EnvironmentError_

    with pytest.raises(EnvironmentError_):
        left.env.execute("true", shell=True)
