"""The local sandbox's seccomp program, read back by a classic-BPF interpreter.

The kernel refuses a malformed program (the sandbox would not start, which the provider
tests would show), but a wrong jump offset gives a valid program with the wrong
verdicts: these tests run the program on the system calls it must and must not refuse.
"""

from __future__ import annotations

import struct

import pytest

from osguard.providers._sandbox import (
    AUDIT_ARCH_X86_64, CLONE_NAMESPACE_FLAGS, SECCOMP_DENY_X86_64, seccomp_program,
)

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050001, 0x00050026


def run(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = AUDIT_ARCH_X86_64) -> int:
    """The verdict of ``program`` for one call (struct seccomp_data: nr, arch, ip, args)."""
    full = (list(args) + [0] * 6)[:6]
    data = struct.pack("<iIQ6Q", nr, arch, 0, *full)
    insns = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns) + 1):
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        else:
            raise AssertionError(f"unexpected instruction {code:#x} at {pc}")
    raise AssertionError("the program does not end")


@pytest.fixture(scope="module")
def program() -> bytes:
    built = seccomp_program("x86_64")
    assert built is not None and len(built) % 8 == 0 and len(built) // 8 < 4096
    return built


def test_every_listed_call_is_refused(program: bytes) -> None:
    for name, number in SECCOMP_DENY_X86_64.items():
        assert run(program, number) == EPERM, name


@pytest.mark.parametrize("nr", [0, 1, 2, 57, 59, 62, 231, 434, 317])  # read write open fork execve kill exit_group pidfd_open seccomp
def test_ordinary_calls_are_allowed(program: bytes, nr: int) -> None:
    assert run(program, nr) == ALLOW


def test_clone_is_refused_only_with_a_namespace_flag(program: bytes) -> None:
    threads = 0x003D0F00  # what glibc's pthread_create passes
    assert run(program, 56, (threads,)) == ALLOW
    assert run(program, 56, (17,)) == ALLOW  # fork: SIGCHLD
    for flag in (0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x00000080):
        assert flag & CLONE_NAMESPACE_FLAGS
        assert run(program, 56, (17 | flag,)) == EPERM, hex(flag)
    assert run(program, 435) == ENOSYS  # clone3: flags out of BPF's reach; libc falls back to clone


def test_tiocsti_is_refused_other_ioctls_are_not(program: bytes) -> None:
    assert run(program, 16, (0, 0x5412)) == EPERM
    assert run(program, 16, (0, 0x541C)) == EPERM
    assert run(program, 16, (0, (0xFFFFFFFF << 32) | 0x5412)) == EPERM  # high bits ignored, as the kernel does
    assert run(program, 16, (0, 0x5401)) == ALLOW  # TCGETS


def test_other_architectures_and_x32_are_refused(program: bytes) -> None:
    assert run(program, 0, arch=0x40000003) == EPERM  # i386 entry (int 0x80)
    assert run(program, 0x40000000 | 101) == EPERM  # x32 ptrace
    assert seccomp_program("aarch64") is None
