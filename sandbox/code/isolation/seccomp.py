"""A system-call filter for test programs: a small classic-BPF program, installed with
``prctl(PR_SET_SECCOMP)`` after the privilege drop, that refuses what a test program never
needs.

Denied (``EPERM``): new namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*``
flag), mounts and root changes, ``ptrace`` and cross-process memory access, kernel keyrings,
``io_uring``, ``perf_event_open``, ``bpf``, ``userfaultfd``, ``inotify`` / ``fanotify`` (which see
the host's activity on the read-only binds), pidfds, file handles, kernel modules, reboot,
clock setting, swap, accounting, quota and the kernel log. Sockets: only ``AF_UNIX``
(``EAFNOSUPPORT`` otherwise: no ``AF_INET``, ``AF_VSOCK``, ``AF_NETLINK``...). ``clone3`` gets
``ENOSYS``, so the C library falls back to ``clone``, whose flags the filter can read. Any other
architecture than the one the filter was built for, and the x32 ABI, are refused outright.

The table is for x86-64, the architecture this project runs on; elsewhere ``available()`` is
False and the sandbox runs without the filter, which the verdict's detail and the README say.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

from rlvr.sandbox.code.isolation.primitives import libc_function

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
AF_UNIX = 1
#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

#: x86-64 system-call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED_X86_64 = {
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "modify_ldt": 154,
    "pivot_root": 155,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "inotify_init": 253,
    "inotify_add_watch": 254,
    "inotify_rm_watch": 255,
    "unshare": 272,
    "inotify_init1": 294,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "fanotify_mark": 301,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "process_mrelease": 448,
}
NR_CLONE, NR_CLONE3, NR_SOCKET, NR_SOCKETPAIR = 56, 435, 41, 53

BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16


def available() -> bool:
    return sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "AMD64")


#: Calls decided by their first argument or refused with another errno: each has its own block.
SPECIAL = {NR_CLONE: "clone", NR_CLONE3: "clone3", NR_SOCKET: "socket", NR_SOCKETPAIR: "socket"}
#: Calls compared one by one at a leaf of the search tree.
LEAF_SIZE = 4

Instruction = tuple[int, int, int, int]


def build_filter() -> list[Instruction]:
    """The filter program: (code, jt, jf, k) instructions. After the architecture checks, a
    binary search over the call numbers the filter names (``JGE`` splits down to leaves of at
    most ``LEAF_SIZE`` ``JEQ``), so any call is decided in at most 14 instructions, where a walk
    down the list of ~60 took up to 73. Attaching a filter makes the kernel run it once for every
    call number (to cache the ones always allowed), and every test process attaches it: 115-118
    CPU-µs with the list, 57-66 with the search (``benchmarks/fork_floor.py``)."""
    actions = {n: "deny" for n in DENIED_X86_64.values()} | SPECIAL
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    code: list[tuple[int, int | str, int | str, int] | str] = [
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        (BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        (BPF_JGE_K, "deny", 0, X32_SYSCALL_BIT),
    ]
    code += _search(sorted(actions), actions)
    code += [
        "deny",
        (BPF_RET_K, 0, 0, deny),
        "clone3",  # ENOSYS: the C library falls back to clone, whose flags are checked below
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        "socket",  # socket / socketpair: the domain (first argument) must be AF_UNIX
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        (BPF_JEQ_K, "allow", 0, AF_UNIX),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
        "clone",  # no namespace flag in its first argument
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        (BPF_JSET_K, 0, "allow", CLONE_NEW_FLAGS),
        (BPF_RET_K, 0, 0, deny),
        "allow",
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return _resolve(code)


def _search(numbers: list[int], actions: dict[int, str]) -> list:
    """Code that jumps to ``actions[n]``'s label for each of ``numbers`` (sorted) and allows
    every other call: ``JGE`` on the middle number, the lower half falling through."""
    if len(numbers) <= LEAF_SIZE:
        return [(BPF_JEQ_K, actions[n], 0, n) for n in numbers] + [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    middle = len(numbers) // 2
    upper = f"ge{numbers[middle]}"
    return [
        (BPF_JGE_K, upper, 0, numbers[middle]),
        *_search(numbers[:middle], actions),
        upper,
        *_search(numbers[middle:], actions),
    ]


def _resolve(code: list) -> list[Instruction]:
    """Labels (strings in the list) to classic BPF's jumps: forward only, 0-255 places."""
    where: dict[str, int] = {}
    program: list[tuple] = []
    for item in code:
        if isinstance(item, str):
            where[item] = len(program)
        else:
            program.append(item)
    resolved = []
    for i, (op, jt, jf, k) in enumerate(program):
        offsets = [where[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= o <= 255 for o in offsets):
            raise ValueError(f"seccomp filter: jump out of range at {i}")
        resolved.append((op, offsets[0], offsets[1], k))
    return resolved


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


#: Built once at import (in the zygote), so each test child only makes the one system call.
_PROGRAM = b"".join(struct.pack("HBBI", *ins) for ins in build_filter())
_BUFFER = ctypes.create_string_buffer(_PROGRAM, len(_PROGRAM))
_FPROG = _SockFprog(len(_PROGRAM) // 8, ctypes.cast(_BUFFER, ctypes.c_void_p))
_FPROG_ADDRESS = ctypes.addressof(_FPROG)
#: Declared once: a test child's call converts plain ints and makes no ctypes objects.
_PRCTL = libc_function(
    "prctl", ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong
)


def install() -> None:
    """Install the filter on the calling thread's process (needs ``no_new_privs`` or
    CAP_SYS_ADMIN); inherited by every child and kept across ``execve``."""
    if _PRCTL(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, _FPROG_ADDRESS, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {errno.errorcode.get(err, err)}")
