"""Host files osguard keeps in shared places cannot be redirected by a planted symlink.

No Docker engine needed: port reservations are host-side files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from osguard.errors import EnvironmentError_
from osguard.providers._private import UnsafePath, open_private_dir, open_private_file
from osguard.providers.docker import allocate_port, ports_dir, release_port


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_port_reservations_ignore_a_folder_planted_in_tmp(cache, tmp_path):
    """Never again create or open the reservations in ``/tmp/osguard-docker-ports-<uid>``,
    where any local user can plant a symlink to a folder of theirs (or of ours) first."""
    legacy = Path(tempfile.gettempdir()) / f"osguard-docker-ports-{os.getuid()}"
    victim = tmp_path / "victim"
    victim.mkdir()
    moved = None
    if legacy.exists() or legacy.is_symlink():
        moved = legacy.with_name(legacy.name + f".moved-{os.getpid()}")
        legacy.rename(moved)
    legacy.symlink_to(victim)
    try:
        port = allocate_port()
        release_port(port)
    finally:
        legacy.unlink()
        if moved is not None:
            moved.rename(legacy)
    assert list(victim.iterdir()) == []
    folder = ports_dir()
    assert folder == cache.resolve() / "osguard" / "docker-ports"
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / "ports.json").stat().st_mode & 0o777) == "0o600"


def test_a_symlinked_reservations_folder_is_refused(cache, tmp_path):
    """The reservations folder replaced by a symlink must not be followed."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (cache / "osguard").mkdir(parents=True)
    (cache / "osguard" / "docker-ports").symlink_to(victim)
    with pytest.raises(EnvironmentError_) as err:
        allocate_port()
    assert str(err.value) == (f"docker port reservations: {cache.resolve()}/osguard/docker-ports "
                              "is a symbolic link; refusing to follow it")
    assert list(victim.iterdir()) == []


def test_a_symlinked_lock_or_book_is_not_written_through(cache, tmp_path):
    """A lock file planted as a symlink is refused; a planted ``ports.json`` symlink is
    replaced, never written through."""
    target = tmp_path / "precious"
    target.write_text("keep")
    folder = ports_dir()
    folder.mkdir(parents=True, mode=0o700)
    (folder / "ports.lock").symlink_to(target)
    with pytest.raises(EnvironmentError_) as err:
        allocate_port()
    assert str(err.value) == (f"docker port reservations: {folder}/ports.lock is a symbolic link or a special "
                              "file; refusing to open it")
    (folder / "ports.lock").unlink()
    (folder / "ports.json").symlink_to(target)
    release_port(allocate_port())
    assert target.read_text() == "keep"
    assert not (folder / "ports.json").is_symlink()


def test_a_folder_writable_by_others_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafePath) as err:
        open_private_dir(shared)
    assert str(err.value) == f"{shared} is writable by other users (mode 777); refusing to use it"


def test_a_file_of_another_owner_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another owner")
    folder = tmp_path / "mine"
    fd = open_private_dir(folder)
    try:
        (folder / "theirs").write_text("x")
        os.chown(folder / "theirs", 65534, 65534)
        with pytest.raises(UnsafePath) as err:
            open_private_file(fd, "theirs", shown="theirs")
        assert str(err.value) == f"theirs belongs to uid 65534, not to this user (uid {os.geteuid()}); refusing to use it"
    finally:
        os.close(fd)


def test_a_planted_recording_symlink_is_never_read(local_provider, private_state_dir):
    """The server's recording once had a fixed name in /tmp: an agent replacing it with a
    symlink made `/end_recording` return (or endlessly read) whatever the link named."""
    import httpx

    with local_provider.start(timeout=60) as env:
        if not env.capabilities.recording:
            pytest.skip(f"no recording here: {'; '.join(env.capabilities.notes)}")
        assert httpx.post(env.info.endpoint + "/start_recording", timeout=30).status_code == 200
        env.run_bash("sleep 1; echo planted > ~/Desktop/planted.txt; "
                     "for p in /tmp/osguard_recording.mp4 /tmp/osguard-recording-*/recording.mp4; do "
                     "[ -e \"$p\" ] && ln -sfn ~/Desktop/planted.txt \"$p\"; done; true")
        response = httpx.post(env.info.endpoint + "/end_recording", timeout=60)
        assert b"planted" not in response.content
        assert (response.status_code, response.json()) == (
            500, {"status": "error", "message": "Recording failed: no file was written"})
