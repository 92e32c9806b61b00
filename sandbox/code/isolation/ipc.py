"""System V IPC objects left in a sandbox's IPC namespace, removed after every test.

Shared memory segments, semaphore sets and message queues outlive the processes that made
them: a segment keeps its pages charged to the sandbox's memory cgroup after every process of
the test is dead. The sandbox has an IPC namespace of its own, so every object in it is the
program's; the supervisor (PID 1 of that namespace) removes them all once a test's processes
are gone, so the next test starts with nothing of the last one's.
"""

from __future__ import annotations

import ctypes

from rlvr.sandbox.code.isolation.primitives import libc_function

IPC_RMID = 0
#: (info command, stat command) per kind: ``*_INFO`` returns the highest index in use,
#: ``*_STAT`` turns an index into the object's identifier.
SHM_INFO, SHM_STAT = 14, 13
SEM_INFO, SEM_STAT = 19, 18
MSG_INFO, MSG_STAT = 12, 11

_BUFFER = ctypes.create_string_buffer(1024)  # larger than every *_ds / *info structure
_BUFFER_ADDRESS = ctypes.addressof(_BUFFER)
#: Declared once: PID 1 calls these after every test, and a declared call makes no ctypes
#: objects (each object made after a fork costs copied pages).
_SHMCTL = libc_function("shmctl", ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_MSGCTL = libc_function("msgctl", ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_SEMCTL = libc_function("semctl", ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _sweep(control: object, info: int, stat: int, with_semnum: bool) -> int:
    def call(ident: int, command: int, buffer: int | None) -> int:
        if with_semnum:
            return control(ident, 0, command, buffer)  # type: ignore[operator]
        return control(ident, command, buffer)  # type: ignore[operator]

    highest = call(0, info, _BUFFER_ADDRESS)
    removed = 0
    for index in range(highest + 1):
        ident = call(index, stat, _BUFFER_ADDRESS)
        if ident >= 0 and call(ident, IPC_RMID, None) == 0:
            removed += 1
    return removed


def remove_ipc_objects() -> int:
    """Remove every System V shared memory segment, semaphore set and message queue of this
    IPC namespace; returns how many were removed. Only for a process in the sandbox's own
    namespace (never the host's)."""
    return (
        _sweep(_SHMCTL, SHM_INFO, SHM_STAT, False)
        + _sweep(_SEMCTL, SEM_INFO, SEM_STAT, True)
        + _sweep(_MSGCTL, MSG_INFO, MSG_STAT, False)
    )
