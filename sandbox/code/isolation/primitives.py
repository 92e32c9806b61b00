"""Linux isolation primitives: namespaces, a minimal read-only root, privilege drop, rlimits.

Everything here runs as root (our machines run everything as root), so nothing relies on being
unprivileged: each submission gets fresh PID, mount, network, IPC and UTS namespaces, a root
file system built from read-only bind mounts of what programs need (``/usr``, the Python
installation) plus a private tmpfs scratch directory, and runs as a dedicated unprivileged uid
with ``no_new_privs``. Python 3.11 has no ``os.unshare``, so the syscalls go through ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import resource
import sys
from dataclasses import dataclass
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SANDBOX_NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

MNT_DETACH = 2
NR_KEYCTL = 250 if os.uname().machine in ("x86_64", "AMD64") else 219
KEYCTL_JOIN_SESSION_KEYRING = 1

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

#: Sandboxed programs run as a uid drawn at random from [SANDBOX_UID_BASE, SANDBOX_UID_END), a
#: range no host account uses (2^31 - 2^21 values: two sandboxes alive at once practically
#: never share one, and nothing of a sandbox outlives it that a later owner could find).
SANDBOX_UID_BASE = 2_000_000
SANDBOX_UID_END = 2**31 - 1


#: The operating system's randomness (``secrets`` would load ``hmac``, ``hashlib`` and OpenSSL
#: into the zygote, whose pages every sandbox process then maps, copies at fork and frees).
_SYSTEM_RANDOM = random.SystemRandom()


def sandbox_uid() -> int:
    return _SYSTEM_RANDOM.randrange(SANDBOX_UID_BASE, SANDBOX_UID_END)


_libc = ctypes.CDLL(None, use_errno=True)


def libc_function(name: str, restype: Any, *argtypes: Any) -> Any:
    """A C library function with its argument types declared once: a call converts plain ints
    and bytes and makes no ctypes objects (a supervisor or test child calls these right after a
    fork, where every object made costs copied pages). Its errors read with ``ctypes.get_errno``."""
    function = _libc[name]
    function.argtypes, function.restype = argtypes, restype
    return function


_unshare = libc_function("unshare", ctypes.c_int, ctypes.c_int)
_setns = libc_function("setns", ctypes.c_int, ctypes.c_int, ctypes.c_int)
_mount = libc_function(
    "mount", ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p
)
_umount2 = libc_function("umount2", ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
_prctl = libc_function(
    "prctl", ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong
)
_syscall3 = libc_function("syscall", ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_void_p)


class IsolationError(OSError):
    """A namespace, mount or privilege operation failed."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_setns(fd, nstype), "setns")


def empty_network_namespace() -> int:
    """A descriptor of a new network namespace with nothing in it (its loopback down), made
    without leaving the caller's own: sandboxes enter it with ``setns``."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        unshare(CLONE_NEWNET)
        try:
            return os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            setns(own, CLONE_NEWNET)
    finally:
        os.close(own)


def read_bytes(path: str) -> bytes:
    """A whole file through plain system calls: no Python file object, whose buffers and codec
    a forked zygote or supervisor would pay for in copied pages."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_bytes(path: str, data: bytes, mode: int) -> None:
    """``path`` holding exactly ``data``, with permissions ``mode``, through plain system calls."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def network_namespace_sockets(fd: int, families: tuple[str, ...] = ("unix",)) -> int:
    """Sockets of ``families`` (``/proc/net`` names) that still exist in the network namespace
    ``fd``. Unix sockets are the only family a filtered program may open; reading ``tcp`` walks
    the machine's whole connection table, so it is asked for only where there is no filter."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    count = 0
    try:
        setns(fd, CLONE_NEWNET)
        try:
            for name in families:
                try:
                    count += max(0, len(read_bytes(f"/proc/self/net/{name}").splitlines()) - 1)
                except OSError:
                    pass
        finally:
            setns(own, CLONE_NEWNET)
    finally:
        os.close(own)
    return count


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(_prctl(option, arg, 0, 0, 0), "prctl")


def bind_readonly(source: str, target: str) -> None:
    """Bind ``source`` at ``target`` read-only, nosuid, nodev (files or directories)."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    mount(source, target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


@dataclass(frozen=True)
class RootLayout:
    """What the sandboxed program can see besides its program and scratch directories."""

    readonly_dirs: tuple[str, ...]
    readonly_files: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]
    packages: tuple[tuple[str, str], ...] = ()


#: Third-party packages the benchmarks' own runners let solutions import (EvalPlus and
#: LiveCodeBench solutions may use numpy; LeetCode's Python has sortedcontainers), bound
#: read-only at ``/site`` and nothing else of the judge's environment.
SANDBOX_PACKAGES = ("numpy", "numpy.libs", "sortedcontainers")
SITE_DIR = "/site"
PROGRAM_DIR = "/prog"
SCRATCH_DIR = "/tmp"


def _package_dirs() -> tuple[tuple[str, str], ...]:
    found = []
    for entry in sys.path:
        for name in SANDBOX_PACKAGES:
            path = os.path.join(entry, name)
            if os.path.isdir(path) and not any(n == name for _, n in found):
                found.append((os.path.realpath(path), name))
    return tuple(found)


def default_layout() -> RootLayout:
    """``/usr`` (compilers, libraries), this Python's installation and the allowed packages; no
    ``/etc``, no ``/home``."""
    dirs = ["/usr"]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr"):
        dirs.append(prefix)
    files = [f for f in ("/etc/ld.so.cache",) if os.path.exists(f)]
    links = []
    for name in ("bin", "lib", "lib64", "sbin"):
        path = f"/{name}"
        if os.path.islink(path):
            links.append((os.readlink(path), name))
        elif os.path.isdir(path):
            dirs.append(path)
    return RootLayout(tuple(dirs), tuple(files), tuple(links), _package_dirs())


def _tmpfs(target: str, size_kb: int, inodes: int, mode: str, flags: int = 0) -> None:
    mount(
        "tmpfs",
        target,
        "tmpfs",
        MS_NOSUID | MS_NODEV | flags,
        f"size={max(size_kb, 4)}k,nr_inodes={inodes},mode={mode}",
    )


#: Where the read-only root template lives inside the zygote's own mount namespace.
TEMPLATE_ROOT = "/tmp/root"


def build_template(layout: RootLayout) -> str:
    """Assemble the read-only root every sandbox starts from, once, in the calling process's
    (already private) mount namespace; returns its path.

    Nothing is created on the host: a tmpfs first covers ``/tmp`` in this namespace only, and
    the root is a second small tmpfs inside it, read-only once built. It holds read-only,
    ``nosuid``/``nodev`` binds of what programs need, the device nodes, a stub ``passwd`` and
    empty mount points for ``/tmp``, ``/prog`` and ``/proc``, which each sandbox covers with its
    own (``enter_root``) in a copy of this namespace.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Hold every bind source open before the tmpfs covers /tmp: an interpreter or a virtual
    # environment that lives under /tmp (a CI checkout, say) stays reachable through its descriptor.
    sources = [*layout.readonly_dirs, *layout.readonly_files, *(source for source, _ in layout.packages)]
    held = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in dict.fromkeys(sources)}
    _tmpfs("/tmp", 1024, 16, "0700")
    root = TEMPLATE_ROOT
    os.mkdir(root)
    _tmpfs(root, 16 << 10, 512, "0755")
    try:
        for directory in layout.readonly_dirs:
            bind_readonly(f"/proc/self/fd/{held[directory]}", root + directory)
        for path in layout.readonly_files:
            bind_readonly(f"/proc/self/fd/{held[path]}", root + path)
        for source, name in layout.packages:
            bind_readonly(f"/proc/self/fd/{held[source]}", f"{root}{SITE_DIR}/{name}")
    finally:
        for fd in held.values():
            os.close(fd)
    for target, name in layout.symlinks:
        os.symlink(target, os.path.join(root, name))
    for directory in (SCRATCH_DIR, PROGRAM_DIR, "/proc", "/dev", "/etc"):
        os.makedirs(root + directory, exist_ok=True)
    for name, minor in (("null", 3), ("zero", 5), ("full", 7), ("random", 8), ("urandom", 9)):
        os.mknod(f"{root}/dev/{name}", 0o666 | 0o020000, os.makedev(1, minor))
        os.chmod(f"{root}/dev/{name}", 0o666)
    with open(root + "/etc/passwd", "w") as fh:
        fh.write("sandbox:x:%d:%d:sandbox:/tmp:/bin/false\n" % (65534, 65534))
    mount(None, root, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root


def enter_root(root: str, scratch_mb: int, scratch_files: int, program_kb: int) -> None:
    """In a fresh copy of the template's mount namespace: a new ``/tmp`` (size and inode caps)
    and ``/prog`` (receives the program, then sealed read-only) over the template's mount points,
    then chroot into it. ``/proc`` is mounted by PID 1 once it is PID 1."""
    _tmpfs(root + SCRATCH_DIR, scratch_mb << 10, scratch_files, "1777")
    _tmpfs(root + PROGRAM_DIR, program_kb, 64, "0755")
    os.chroot(root)
    os.chdir("/")


def build_root(layout: RootLayout, scratch_mb: int, scratch_files: int, program_kb: int) -> None:
    """The template built and entered in one go (inside a private mount namespace)."""
    enter_root(build_template(layout), scratch_mb, scratch_files, program_kb)


def fresh_scratch(scratch_mb: int, scratch_files: int) -> None:
    """Replace the sandbox's ``/tmp`` with an empty tmpfs (nothing survives from one test to the
    next). Called by PID 1 once no process of the previous test is left."""
    _check(_umount2(SCRATCH_DIR.encode(), MNT_DETACH), "umount /tmp")
    _tmpfs(SCRATCH_DIR, scratch_mb << 10, scratch_files, "1777")


def seal_program_dir() -> None:
    """Make ``/prog`` read-only for everyone, root included: no test can change the program or
    the binary the next test runs."""
    mount(None, PROGRAM_DIR, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def join_fresh_keyring() -> None:
    """Give this process (and everything it forks) a new, empty session keyring instead of the
    caller's: keys the caller holds are not reachable from the sandbox."""
    if _syscall3(NR_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"keyctl join session keyring: {os.strerror(err)}")


def mount_proc() -> None:
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def drop_privileges(uid: int) -> None:
    """Become ``uid`` for good: no supplementary groups, no capabilities, no new privileges."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise IsolationError(errno.EPERM, "privilege drop failed")


@dataclass(frozen=True)
class ResourceLimits:
    """Per-process rlimits. ``memory_bytes`` None: no address-space cap (the sandbox's cgroup
    limits resident memory instead, and an out-of-memory kill is then observable)."""

    cpu_s: float
    memory_bytes: int | None
    processes: int
    open_files: int
    file_bytes: int
    stack_bytes: int | None = None


def apply_rlimits(limits: ResourceLimits) -> None:
    cpu = max(1, int(limits.cpu_s + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.stack_bytes:
        resource.setrlimit(resource.RLIMIT_STACK, (limits.stack_bytes, limits.stack_bytes))


def isolation_available() -> tuple[bool, str]:
    """Can this process build the sandbox? Returns (ok, reason when not).

    ``RLVR_SANDBOX_ISOLATION=off`` in the environment turns isolation off on purpose (then
    nothing runs unless the caller also asks for ``unsafe``).
    """
    if os.environ.get("RLVR_SANDBOX_ISOLATION", "").lower() in ("off", "0", "false", "no"):
        return False, "isolation switched off by RLVR_SANDBOX_ISOLATION"
    if not sys.platform.startswith("linux"):
        return False, f"namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return False, "namespaces, mounts and the uid switch need root (this process is not root)"
    pid = os.fork()
    if pid == 0:
        try:
            unshare(SANDBOX_NAMESPACES)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m")
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return False, "unshare/mount were refused (is this a container without CAP_SYS_ADMIN?)"
    return True, ""
