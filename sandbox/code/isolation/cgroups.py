"""Per-sandbox control groups: memory, process count and CPU time for the whole sandbox.

rlimits are per process: twelve forks of 200 MiB each pass a 256 MiB ``RLIMIT_AS``. A cgroup
holds every process of one sandbox to one memory and process budget, counts their CPU time
together (threads and children included), and records out-of-memory kills, which is how the
supervisor *observes* a memory-limit verdict instead of inferring it from what the program
printed.

Both hierarchies are supported: cgroup v1 (``memory``, ``pids`` and ``cpuacct`` controllers, as
on this project's machines) and cgroup v2 where the ``memory`` and ``pids`` controllers are
delegated to the judge's cgroup. The zygote (unconfined, root) creates one cgroup per sandbox
under its own, opens the files the supervisor needs before the sandbox's root is built, and
removes the cgroup when the sandbox is reaped. Where neither is usable, ``detect`` says why and
the sandbox falls back to per-process rlimits (the verdict's detail says so).
"""

from __future__ import annotations

import os
import resource
import signal
import time
from dataclasses import dataclass, field

from rlvr.sandbox.code.isolation.primitives import read_bytes

V1_CONTROLLERS = ("memory", "pids", "cpuacct")
#: Memory of the supervisor's own (its interpreter), before the buffers it fills with the
#: program's output and results.
SUPERVISOR_MB = 32
PREFIX = "rlvr-sbx"
#: The program's own memory cgroup inside the sandbox's (and, on v2, the supervisor's).
PROGRAM_DIR, SUPERVISOR_DIR = "prog", "sup"


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, hierarchy root, fs type, super options) of each cgroup mount."""
    out = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4], fields[3], tail[0], set(tail[2].split(","))))
    except OSError:
        pass
    return out


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path."""
    paths = {}
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    paths[name] = path
    except OSError:
        pass
    return paths


def _join(mount: str, root: str, path: str) -> str:
    if root != "/" and path.startswith(root):
        path = path[len(root) :]
    return os.path.join(mount, path.lstrip("/"))


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


@dataclass
class SandboxCgroup:
    """One sandbox's cgroup, as the supervisor uses it (file descriptors opened outside the
    sandbox's root, so they work after the chroot)."""

    version: int
    dirs: list[str]
    procs_fds: list[int] = field(default_factory=list)
    program_fds: list[int] = field(default_factory=list)
    cpu_fd: int = -1
    events_fd: int = -1
    limit_fd: int = -1
    memsw_fd: int = -1
    #: The limits last written (a reused slot rewrites them only when they change).
    limits: tuple[int, int, int] = (0, 0, 0)
    #: CPU the cgroup had counted when this sandbox's supervisor joined (a slot's cgroup is
    #: reused: earlier sandboxes' CPU is not this one's).
    cpu_base_ns: int = 0
    #: The directories in creation order (``dirs`` is innermost first, for removal).
    created: list[str] = field(default_factory=list)

    def join(self) -> None:
        """Move the calling process (the supervisor) into the sandbox's cgroup; its count
        starts here (less what the supervisor had already used, which it subtracts itself)."""
        me = str(os.getpid()).encode()
        for fd in self.procs_fds:
            os.write(fd, me)
        self.cpu_base_ns = 0
        own = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_base_ns = self.cpu_ns() - int((own.ru_utime + own.ru_stime) * 1e9)

    def join_program(self) -> None:
        """Move the calling process (a test child, before it runs anything of the program's)
        into the program's memory cgroup."""
        me = str(os.getpid()).encode()
        for fd in self.program_fds:
            os.write(fd, me)

    def cpu_ns(self) -> int:
        raw = os.pread(self.cpu_fd, 4096, 0).decode()
        if self.version == 1:
            return int(raw.split()[0]) - self.cpu_base_ns
        for line in raw.splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) * 1000 - self.cpu_base_ns
        return 0

    def oom_kills(self) -> int:
        """Processes of this sandbox the kernel killed for exceeding the memory limit."""
        raw = os.pread(self.events_fd, 4096, 0).decode()
        for line in raw.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def set_memory(self, limit_bytes: int) -> None:
        """Change the memory limit (the compiler gets its own); v1 orders memory and swap."""
        text = str(limit_bytes).encode()
        if self.memsw_fd < 0:
            os.pwrite(self.limit_fd, text, 0)
            return
        # v1 keeps memory+swap >= memory at every moment: raise it first, lower it last.
        current = int(os.pread(self.limit_fd, 64, 0).split()[0])
        for fd in (self.memsw_fd, self.limit_fd) if limit_bytes > current else (self.limit_fd, self.memsw_fd):
            os.pwrite(fd, text, 0)

    def close(self) -> None:
        for fd in [*self.procs_fds, *self.program_fds, self.cpu_fd, self.events_fd, self.limit_fd, self.memsw_fd]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.procs_fds, self.program_fds = [], []
        self.cpu_fd, self.events_fd, self.limit_fd, self.memsw_fd = -1, -1, -1, -1


class Cgroups:
    """Where this process may create sandbox cgroups, found once (``detect``)."""

    def __init__(self, version: int, parents: dict[str, str]):
        self.version = version
        self.parents = parents
        self.counter = 0

    @classmethod
    def detect(cls) -> tuple["Cgroups | None", str]:
        """A usable hierarchy and "" , or None and the reason (checked by creating one)."""
        if os.environ.get("RLVR_SANDBOX_CGROUPS", "").lower() in ("off", "0", "false", "no"):
            return None, "cgroups switched off by RLVR_SANDBOX_CGROUPS"
        if os.geteuid() != 0:
            return None, "creating cgroups needs root"
        mounts, own = _mounts(), _own_paths()
        reasons = []
        v1 = {}
        for mount, root, fstype, options in mounts:
            if fstype != "cgroup":
                continue
            for name in V1_CONTROLLERS:
                if name in options and name in own and name not in v1:
                    v1[name] = _join(mount, root, own[name])
        if set(v1) == set(V1_CONTROLLERS):
            found = cls._probe(cls(1, v1))
            if found[0] is not None:
                return found
            reasons.append(found[1])
        elif any(fstype == "cgroup" for *_, fstype, _ in mounts):
            reasons.append(f"cgroup v1 lacks controllers {sorted(set(V1_CONTROLLERS) - set(v1))}")
        for mount, root, fstype, _ in mounts:
            if fstype == "cgroup2" and "" in own:
                parent = _join(mount, root, own[""])
                try:
                    enabled = open(os.path.join(parent, "cgroup.subtree_control")).read().split()
                except OSError:
                    enabled = []
                if not {"memory", "pids"} <= set(enabled):
                    try:
                        _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
                    except OSError as exc:
                        reasons.append(f"cgroup v2 at {parent} does not delegate memory and pids ({exc.strerror})")
                        continue
                found = cls._probe(cls(2, {"": parent}))
                if found[0] is not None:
                    return found
                reasons.append(found[1])
        return None, "; ".join(reasons) or "no cgroup hierarchy is mounted"

    @classmethod
    def _probe(cls, candidate: "Cgroups") -> tuple["Cgroups | None", str]:
        try:
            probe = candidate.create(64 << 20, 8, 32 << 20)
            candidate.remove(probe)
            return candidate, ""
        except OSError as exc:
            return None, f"cgroup v{candidate.version}: {exc.strerror or exc}"

    def create(self, memory_bytes: int, processes: int, supervisor_bytes: int, peak_bytes: int = 0) -> SandboxCgroup:
        """A fresh cgroup with the limits set and its files open: the program's memory cgroup
        holds ``memory_bytes`` (raised to at most ``peak_bytes`` for a compiler), the sandbox's
        that plus ``supervisor_bytes``."""
        self.counter += 1
        name = f"{PREFIX}-{os.getpid()}-{self.counter}"
        if self.version == 1:
            mem, pids, cpu = (os.path.join(self.parents[c], name) for c in V1_CONTROLLERS)
            dirs = [mem, os.path.join(mem, PROGRAM_DIR), pids, cpu]
        else:
            top = os.path.join(self.parents[""], name)
            dirs = [top, os.path.join(top, PROGRAM_DIR), os.path.join(top, SUPERVISOR_DIR)]
        made = []
        try:
            for path in dirs:
                os.mkdir(path, 0o700)
                made.append(path)
                if self.version == 2 and path == dirs[0]:
                    _write(os.path.join(path, "cgroup.subtree_control"), "+memory +pids")
            total = max(memory_bytes, peak_bytes) + supervisor_bytes
            group = self._configure(dirs, memory_bytes, total, processes)
            group.limits = (memory_bytes, total, processes)
            group.created = list(dirs)
        except OSError:
            for path in reversed(made):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            raise
        group.dirs = sorted(dirs, key=lambda d: -d.count(os.sep))  # removed innermost first
        return group

    def set_limits(self, dirs: list[str], program_bytes: int, total_bytes: int, processes: int) -> None:
        """Write the memory and process limits (``dirs`` in creation order)."""
        if self.version == 1:
            mem, prog, pids, _ = dirs
            for path, limit in ((mem, total_bytes), (prog, program_bytes)):
                memory = os.path.join(path, "memory.limit_in_bytes")
                memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                if not os.path.exists(memsw):
                    _write(memory, str(limit))
                    continue
                try:  # memory+swap >= memory at every moment: lowering, memory goes first
                    _write(memory, str(limit))
                    _write(memsw, str(limit))
                except OSError:
                    _write(memsw, str(limit))
                    _write(memory, str(limit))
            _write(os.path.join(pids, "pids.max"), str(processes))
            return
        top, prog, _ = dirs
        for path, limit in ((top, total_bytes), (prog, program_bytes)):
            _write(os.path.join(path, "memory.max"), str(limit))
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _write(os.path.join(path, "memory.swap.max"), "0")
        _write(os.path.join(top, "pids.max"), str(processes))

    def _configure(self, dirs: list[str], program_bytes: int, total_bytes: int, processes: int) -> SandboxCgroup:
        self.set_limits(dirs, program_bytes, total_bytes, processes)
        if self.version == 1:
            mem, prog, pids, cpu = dirs
            group = SandboxCgroup(1, dirs)
            group.procs_fds = [
                os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in (mem, pids, cpu)
            ]
            group.program_fds = [os.open(os.path.join(prog, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)]
            group.cpu_fd = os.open(os.path.join(cpu, "cpuacct.usage"), os.O_RDONLY | os.O_CLOEXEC)
            group.events_fd = os.open(os.path.join(prog, "memory.oom_control"), os.O_RDONLY | os.O_CLOEXEC)
            group.limit_fd = os.open(os.path.join(prog, "memory.limit_in_bytes"), os.O_RDWR | os.O_CLOEXEC)
            memsw = os.path.join(prog, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                group.memsw_fd = os.open(memsw, os.O_RDWR | os.O_CLOEXEC)
            return group
        top, prog, sup = dirs
        group = SandboxCgroup(2, dirs)
        group.procs_fds = [os.open(os.path.join(sup, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)]
        group.program_fds = [os.open(os.path.join(prog, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)]
        group.cpu_fd = os.open(os.path.join(top, "cpu.stat"), os.O_RDONLY | os.O_CLOEXEC)
        group.events_fd = os.open(os.path.join(prog, "memory.events"), os.O_RDONLY | os.O_CLOEXEC)
        group.limit_fd = os.open(os.path.join(prog, "memory.max"), os.O_RDWR | os.O_CLOEXEC)
        return group

    def reuse(
        self, group: SandboxCgroup, memory_bytes: int, processes: int, supervisor_bytes: int, peak_bytes: int = 0
    ) -> None:
        """Give a vacated cgroup the limits of its next sandbox (all of them where they change;
        the program's memory always, as a sandbox killed while compiling leaves the compiler's)."""
        limits = (memory_bytes, max(memory_bytes, peak_bytes) + supervisor_bytes, processes)
        if limits != group.limits:
            self.set_limits(group.created, limits[0], limits[1], processes)
            group.limits = limits
        else:
            group.set_memory(memory_bytes)

    def vacate(self, group: SandboxCgroup, wait_s: float = 5.0) -> list[int]:
        """Kill whatever is still in the cgroup and wait until it is empty; returns the pids
        found (none once its sandbox's PID 1 is reaped: a member here escaped the sandbox's
        PID namespace). Raises ``OSError`` if it cannot be emptied in ``wait_s``."""
        found: list[int] = []
        deadline = time.monotonic() + wait_s
        pause = 0.0002
        for path in group.dirs:
            while True:
                members = _members(path)
                if not members:
                    break
                found += [pid for pid in members if pid not in found]
                for pid in members:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if time.monotonic() > deadline:
                    raise OSError(f"cgroup {path} still has members {members}")
                time.sleep(pause)
                pause = min(2 * pause, 0.005)
        return found

    def remove(self, group: SandboxCgroup, wait_s: float = 5.0) -> None:
        """Kill anything still in the cgroup, then remove it, nested cgroups first (retrying
        while the kernel finishes tearing the processes down)."""
        group.close()
        deadline = time.monotonic() + wait_s
        for path in group.dirs:
            _remove_tree(path, deadline)

    def sweep(self) -> None:
        """Remove sandbox cgroups left by zygotes that no longer exist (a judge killed hard)."""
        for parent in self.parents.values():
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            for name in names:
                parts = name.split("-")
                if not name.startswith(PREFIX + "-") or len(parts) != 4 or not parts[2].isdigit():
                    continue
                if int(parts[2]) != os.getpid() and os.path.exists(f"/proc/{parts[2]}"):
                    continue
                try:
                    self.remove(SandboxCgroup(self.version, [os.path.join(parent, name)]), wait_s=0.5)
                except OSError:
                    pass


def _remove_tree(path: str, deadline: float) -> None:
    try:
        children = [entry.path for entry in os.scandir(path) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return
    except OSError:
        children = []
    for child in children:
        _remove_tree(child, deadline)
    # A killed member is usually released within a millisecond: poll soon, then back off.
    pause = 0.0002
    while True:
        for pid in _members(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(2 * pause, 0.005)


def _members(path: str) -> list[int]:
    try:
        return [int(pid) for pid in read_bytes(os.path.join(path, "cgroup.procs")).split()]
    except OSError:
        return []
