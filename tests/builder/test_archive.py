"""osguard.builder.archive in a real local environment: the tar helper builds, templates
and forks share, and the guard that stops an environment on any failure."""

from __future__ import annotations

import pytest

from osguard.builder.archive import pack, stopped_on_failure, unpack
from osguard.errors import BuildError

pytestmark = pytest.mark.usefixtures("private_state_dir")


@pytest.fixture(scope="module")
def env(local_provider):
    environment = local_provider.start()
    yield environment
    environment.stop()


def test_pack_and_unpack_move_files_with_modes_and_times(local_provider, env):
    env.execute("mkdir -p ~/Desktop/a && printf 'x\\n' > ~/Desktop/a/f && chmod 640 ~/Desktop/a/f && "
                "touch -d '2020-01-02 03:04:05.123456789' ~/Desktop/a/f", shell=True)
    data = pack(env, ["/home/user/Desktop/a", "/home/user/missing"], label="test")
    other = local_provider.start()
    try:
        unpack(other, data, label="test")
        stat = "stat -c '%a %s %y' ~/Desktop/a/f"
        assert other.execute(stat, shell=True).output == env.execute(stat, shell=True).output
        assert other.execute(stat, shell=True).output.startswith("640 2 2020-01-02 03:04:05.123456789")
        # the archive does not stay behind in either environment
        assert env.execute("ls /tmp/.osguard-state.tar", shell=True).returncode != 0
        assert other.execute("ls /tmp/.osguard-state.tar", shell=True).returncode != 0
    finally:
        other.stop()


def test_pack_failure_says_what_and_why(env):
    with pytest.raises(BuildError) as caught:
        pack(env, ["/home/user"], label="fork of x", archive="/nonexistent/a.tar")
    assert str(caught.value) == ("fork of x: archiving /home/user failed: tar: /nonexistent/a.tar: Cannot open: "
                                 "No such file or directory\ntar: Error is not recoverable: exiting now")


def test_unpack_failure_says_what_and_why(env):
    with pytest.raises(BuildError) as caught:
        unpack(env, b"not a tar" * 100, label="fork of x")
    assert str(caught.value) == ("fork of x: unpacking the file state failed: tar: This does not look like a tar "
                                 "archive\ntar: Skipping to next header\ntar: Exiting with failure status due to "
                                 "previous errors")


def test_stopped_on_failure_stops_the_environment_and_reraises(local_provider):
    started = local_provider.start()
    with pytest.raises(KeyboardInterrupt):
        with stopped_on_failure(started):
            raise KeyboardInterrupt
    from osguard.errors import EnvironmentError_

    with pytest.raises(EnvironmentError_):  # its server is gone with it
        started.execute("true", shell=True)
