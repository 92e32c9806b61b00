"""Slots: what the zygote reuses from one sandbox to the next, never for two at once.

A slot is an empty network namespace (entered with ``setns``) and a cgroup with its files open.
Making both costs more than the rest of a sandbox (a network namespace's creation and teardown
are serialised machine-wide and run partly in kernel workers), and neither carries anything of
a submission once its sandbox is gone: the slot is handed out again only after the sandbox's PID
1 is reaped (the kernel has then ended every process of its PID namespace), its cgroup is found
empty (a member left there escaped the sandbox and is killed, and the slot is not reused) and
its network namespace holds no socket (an abstract Unix socket kept alive past its processes
would otherwise be reachable by the next sandbox). One sandbox holds a slot from its build to
its reaping, so concurrent sandboxes (the program's, the tester's, the spare) never share one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rlvr.sandbox.code.isolation import seccomp
from rlvr.sandbox.code.isolation.cgroups import Cgroups, SandboxCgroup
from rlvr.sandbox.code.isolation.primitives import empty_network_namespace, network_namespace_sockets

#: Socket families a program can open: Unix only under the system-call filter.
SOCKET_FAMILIES = ("unix",) if seccomp.available() else ("unix", "tcp", "udp", "tcp6", "udp6")
#: Free slots kept; more are closed when released (a judge has at most three sandboxes at once).
MAX_FREE = 4


@dataclass
class Slot:
    netns: int
    cgroup: SandboxCgroup | None

    def fds(self) -> list[int]:
        """Descriptors a sandbox in this slot needs (everything else of the zygote's is closed)."""
        group = self.cgroup
        if group is None:
            return [self.netns]
        cg = [*group.procs_fds, *group.program_fds, group.cpu_fd, group.events_fd, group.limit_fd, group.memsw_fd]
        return [self.netns, *(fd for fd in cg if fd >= 0)]


class Slots:
    """The zygote's slots: ``acquire`` one for a sandbox; once the sandbox is reaped, ``vacate``
    and ``recycle`` (before and after the verdict when the verdict waits for the reaping; both
    after it for a sandbox released once its PID 1 said it stopped; always before reuse)."""

    def __init__(self, cgroups: Cgroups | None):
        self.cgroups = cgroups
        self.free: list[Slot] = []
        #: Members found in a released slot's cgroup (pids), and sockets left in its namespace.
        self.escapes: list[int] = []
        self.leftover_sockets = 0

    def acquire(self, memory_bytes: int, processes: int, supervisor_bytes: int, peak_bytes: int) -> Slot:
        while self.free:
            slot = self.free.pop()
            try:
                if slot.cgroup is not None and self.cgroups is not None:
                    self.cgroups.reuse(slot.cgroup, memory_bytes, processes, supervisor_bytes, peak_bytes)
                return slot
            except OSError:
                self.close(slot)
        netns = empty_network_namespace()
        try:
            cgroup = (
                self.cgroups.create(memory_bytes, processes, supervisor_bytes, peak_bytes)
                if self.cgroups is not None
                else None
            )
        except BaseException:
            os.close(netns)
            raise
        return Slot(netns, cgroup)

    def vacate(self, slot: Slot) -> bool:
        """After the sandbox's PID 1 is reaped, before the slot is reused: is its cgroup empty? A member
        found there (it escaped the PID namespace) is killed and waited for, counted in
        ``escapes``, and the slot is then not reused."""
        if slot.cgroup is None or self.cgroups is None:
            return True
        try:
            found = self.cgroups.vacate(slot.cgroup)
        except OSError:
            self.escapes.append(-1)
            return False
        self.escapes += found
        return not found

    def recycle(self, slot: Slot, clean: bool) -> None:
        """Off the verdict's path: keep a clean slot whose network namespace holds no socket
        (an abstract Unix socket that outlived its processes), close (and remove) any other."""
        if clean and len(self.free) < MAX_FREE:
            sockets = network_namespace_sockets(slot.netns, SOCKET_FAMILIES)
            if not sockets:
                self.free.append(slot)
                return
            self.leftover_sockets += sockets
        self.close(slot)

    def close(self, slot: Slot) -> None:
        os.close(slot.netns)
        if slot.cgroup is not None and self.cgroups is not None:
            try:
                self.cgroups.remove(slot.cgroup)
            except OSError:
                pass

    def close_all(self) -> None:
        while self.free:
            self.close(self.free.pop())
