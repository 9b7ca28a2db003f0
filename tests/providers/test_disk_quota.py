"""Disk quota: an environment's writable space and its log are bounded.

`head -c 2000M /dev/zero > ~/big` once grew host disk use by 2 GB. Now the home is a
sparse ext4 image of ``disk_mb`` (as root; a tmpfs of that size otherwise), /tmp and
/var/tmp are tmpfs of that size, and the sandbox's output reaches its log through a
pipe that keeps ``ENV_LOG_BYTES``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from osguard.errors import OsguardError
from osguard.providers import _state
from osguard.providers.local import LocalProvider
from osguard.server.limits import ENV_LOG_BYTES

pytestmark = pytest.mark.usefixtures("private_state_dir")
MIB = 1024 * 1024


def _disk_use(folder: Path) -> int:
    """Bytes of host disk allocated below ``folder`` (sparse files count what they use;
    a mounted home image is counted once, as its image file)."""
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(root, d))]
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def test_writing_past_the_quota_fails_inside_and_the_host_grows_less(local_provider):
    """Filling the home, /tmp or /var/tmp must stop at the quota with ENOSPC, and the
    host's disk must grow by less than the quota."""
    with LocalProvider(gui=False, disk_mb=64).start(timeout=60) as env:
        env_dir = Path(env.info.extra["env_dir"])
        before = _disk_use(env_dir)
        targets = ["~/big", "/tmp/big", "/var/tmp/big"]
        if os.geteuid() == 0:
            # the terminal folder, the only other host folder bound writable: not the agent's
            # (the socket folder is no longer bound at all)
            targets.append("/run/osguard/term/big")
        for target in targets:
            # (chmod: an agent owning a folder could make it writable, as finding 1 did)
            result = env.run_bash(f"chmod u+w $(dirname {target}) 2>/dev/null; head -c 100M /dev/zero > {target}; "
                                  f"echo status=$?; rm -f {target}", timeout=120)
            refused = "No space left on device" in result.output or (
                target.startswith("/run/") and "Permission denied" in result.output)
            assert refused and "status=1" in result.output, (target, result.output)
        result = env.run_bash("head -c 100M /dev/zero > ~/big; df -m ~ | tail -1", timeout=120)
        assert "No space left on device" in result.output
        grown = _disk_use(env_dir) - before
        assert grown < 64 * MIB, f"host disk use grew by {grown / MIB:.0f} MiB"
        assert env.run_bash("rm ~/big && echo ok > ~/Desktop/f && cat ~/Desktop/f").output == "ok\n"
        notes = env.capabilities.notes
        if os.geteuid() == 0:
            assert not [n for n in notes if n.startswith("disk:")]
        else:
            assert "disk: not root: the home is a tmpfs of that size instead (in memory)" in notes
    assert not env_dir.exists()


def test_the_environment_log_is_bounded(local_provider):
    """Whatever the sandbox writes to its own stdout/stderr (the log) stops at ENV_LOG_BYTES."""
    with LocalProvider(gui=False).start(timeout=60) as env:
        log = _state.state_dir() / f"{env.info.id}.log"
        result = env.run_bash("head -c 20M /dev/zero | tr '\\0' x > /proc/1/fd/2; echo $?", timeout=60)
        size = log.stat().st_size
        assert size <= ENV_LOG_BYTES + 200, f"log is {size} bytes ({result.output!r})"
        if result.output.strip() == "0":
            assert log.read_bytes().endswith(f"[osguard: log truncated at {ENV_LOG_BYTES} bytes; "
                                             "the rest is dropped]\n".encode())


def test_a_bad_disk_size_is_a_clear_error():
    with pytest.raises(OsguardError) as err:
        LocalProvider(disk_mb="1G")
    assert str(err.value) == "local provider: disk_mb must be a whole number of MiB, at least 16, got '1G'"


def test_the_fallback_home_is_a_sized_tmpfs(local_provider, monkeypatch):
    """Where no home image can be mounted (unprivileged, or no mkfs.ext4: simulated here
    with a PATH without /sbin), the home is a tmpfs of the quota: ENOSPC past it, the
    host's disk untouched, and the notes say so."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if os.path.exists("/usr/bin/mkfs.ext4"):
        pytest.skip("mkfs.ext4 is in /usr/bin here: cannot simulate its absence")
    with LocalProvider(gui=False, disk_mb=32).start(timeout=60) as env:
        env_dir = Path(env.info.extra["env_dir"])
        notes = env.capabilities.notes
        expected = ("disk: not root: the home is a tmpfs of that size instead (in memory)" if os.geteuid() != 0 else
                    "disk: mkfs.ext4 or mount is missing (apt install e2fsprogs mount): the home is a sized tmpfs instead")
        assert expected in notes
        before = _disk_use(env_dir)
        result = env.run_bash("ls ~; head -c 50M /dev/zero > ~/big; echo status=$?", timeout=120)
        assert "Desktop" in result.output and "No space left on device" in result.output
        assert "status=1" in result.output
        assert _disk_use(env_dir) - before < MIB


@pytest.mark.skipif(os.geteuid() != 0, reason="host mounts need root")
def test_tmp_folders_are_sized_host_mounts_the_judge_reads(local_provider):
    """/tmp and /var/tmp must be bounded *and* stay host folders beside the home (the
    trusted view reads them there): never again an unbounded host folder, nor a private
    tmpfs the host cannot see."""
    with LocalProvider(gui=False, disk_mb=32).start(timeout=60) as env:
        env_dir = Path(env.info.extra["env_dir"])
        for inside, name in (("/tmp", "tmp"), ("/var/tmp", "vartmp")):
            assert os.path.ismount(env_dir / name), name
            assert os.statvfs(env_dir / name).f_blocks * os.statvfs(env_dir / name).f_frsize == 32 * MIB
            assert env.run_bash(f"echo seen > {inside}/marker && echo ok").output == "ok\n"
            assert (env_dir / name / "marker").read_text() == "seen\n"
        assert os.path.ismount(env_dir / "home")
    assert not env_dir.exists()
