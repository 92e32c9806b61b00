"""The seccomp filter's decisions, read off the program itself by a classic-BPF interpreter, for
every call number, against the rule the module's docstring states; and how few instructions
decide a call (the kernel runs the filter for every call number when a test process attaches it).
That the kernel accepts the program and enforces it is pinned by every isolated test
(``tests/test_code_isolation.py``: ``Seccomp: 2``) and the red-team batteries."""

from __future__ import annotations

import errno

import pytest
from rlvr.sandbox.code.isolation import seccomp

ALLOW = seccomp.SECCOMP_RET_ALLOW
KILL = seccomp.SECCOMP_RET_KILL_PROCESS
EPERM = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
EAFNOSUPPORT = seccomp.SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
AUDIT_ARCH_I386 = 0x40000003
CLONE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
#: What fork, threads and subprocess pass to clone (SIGCHLD, CLONE_VM|CLONE_THREAD|...).
HARMLESS_CLONE = (0x11, 0x3D0F00, 0x1200011)
DOMAINS = {"AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17, "AF_VSOCK": 40, "AF_BLUETOOTH": 31}


def run(program: list[tuple[int, int, int, int]], nr: int, arch: int = seccomp.AUDIT_ARCH_X86_64, arg0: int = 0):
    """Interpret the filter on one call: (action, instructions executed). Only the instructions
    the module emits; any other opcode, a jump out of the program or falling off its end fails."""
    words = {seccomp.OFFSET_NR: nr, seccomp.OFFSET_ARCH: arch, seccomp.OFFSET_ARG0: arg0 & 0xFFFFFFFF}
    pc, a, executed = 0, 0, 0
    while True:
        assert 0 <= pc < len(program), f"pc {pc} outside the program"
        code, jt, jf, k = program[pc]
        executed += 1
        if code == seccomp.BPF_LD_W_ABS:
            a, pc = words[k], pc + 1
        elif code == seccomp.BPF_RET_K:
            return k, executed
        elif code in (seccomp.BPF_JEQ_K, seccomp.BPF_JGE_K, seccomp.BPF_JSET_K):
            taken = {seccomp.BPF_JEQ_K: a == k, seccomp.BPF_JGE_K: a >= k, seccomp.BPF_JSET_K: bool(a & k)}[code]
            pc += 1 + (jt if taken else jf)
        else:
            pytest.fail(f"unexpected opcode {code:#x}")


def expected(nr: int, arch: int = seccomp.AUDIT_ARCH_X86_64, arg0: int = 0) -> int:
    """The rule, written independently of the program's layout."""
    if arch != seccomp.AUDIT_ARCH_X86_64:
        return KILL
    if nr >= seccomp.X32_SYSCALL_BIT or nr in seccomp.DENIED_X86_64.values():
        return EPERM
    if nr == seccomp.NR_CLONE3:
        return ENOSYS
    if nr in (seccomp.NR_SOCKET, seccomp.NR_SOCKETPAIR):
        return ALLOW if arg0 == seccomp.AF_UNIX else EAFNOSUPPORT
    if nr == seccomp.NR_CLONE:
        return EPERM if arg0 & seccomp.CLONE_NEW_FLAGS else ALLOW
    return ALLOW


@pytest.fixture(scope="module")
def program():
    return seccomp.build_filter()


def test_every_call_number_gets_the_rules_action(program):
    for nr in range(1024):
        assert run(program, nr)[0] == expected(nr), nr


def test_named_calls_are_refused_and_their_neighbours_are_not(program):
    for name, nr in seccomp.DENIED_X86_64.items():
        assert run(program, nr)[0] == EPERM, name
    for nr in {n - 1 for n in seccomp.DENIED_X86_64.values()} | {n + 1 for n in seccomp.DENIED_X86_64.values()}:
        assert run(program, nr)[0] == expected(nr), nr
    for name in ("read", "write", "openat", "mmap", "exit_group", "wait4", "pipe2"):
        nr = {"read": 0, "write": 1, "openat": 257, "mmap": 9, "exit_group": 231, "wait4": 61, "pipe2": 293}[name]
        assert run(program, nr)[0] == ALLOW, name


def test_x32_calls_and_other_architectures_are_refused(program):
    for nr in (0, 1, 56, 101, 272, 512, 547):
        assert run(program, seccomp.X32_SYSCALL_BIT | nr)[0] == EPERM
        assert run(program, nr, arch=AUDIT_ARCH_I386)[0] == KILL
        assert run(program, nr, arch=0)[0] == KILL
    assert run(program, 0xFFFFFFFF)[0] == EPERM


def test_sockets_only_of_the_unix_domain(program):
    for nr in (seccomp.NR_SOCKET, seccomp.NR_SOCKETPAIR):
        assert run(program, nr, arg0=seccomp.AF_UNIX)[0] == ALLOW
        for name, domain in DOMAINS.items():
            assert run(program, nr, arg0=domain)[0] == EAFNOSUPPORT, name


def test_clone_without_namespace_flags_only_and_clone3_falls_back(program):
    for flags in HARMLESS_CLONE:
        assert run(program, seccomp.NR_CLONE, arg0=flags)[0] == ALLOW
        for name, flag in CLONE_FLAGS.items():
            assert run(program, seccomp.NR_CLONE, arg0=flags | flag)[0] == EPERM, name
    assert run(program, seccomp.NR_CLONE3)[0] == ENOSYS


def test_any_call_is_decided_in_a_few_instructions(program):
    """The list of ~60 numbers compared one by one that this replaced took up to 73 (66 on
    average over the call numbers); the search takes at most 14."""
    worst = max(run(program, nr, arg0=arg0)[1] for nr in range(1024) for arg0 in (0, seccomp.AF_UNIX))
    assert worst <= 14, worst
