"""Length-prefixed JSON messages: over pipes (with deadlines) and over Unix sockets (with file
descriptors), and the deadlines a worker's answer is awaited under: wall clock, or a budget of
the worker process's own CPU time (``Deadline``, read with ``process_cpu_s``) with a wall-clock
backstop. Kept dependency-light: sandboxed processes are forked from code that imports it."""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct("!I")
#: ``json.dumps(x, separators=(",", ":"))`` without building an encoder per message (a forked
#: supervisor pays for every object it makes in copied pages).
compact_json = json.JSONEncoder(separators=(",", ":")).encode
MAX_MESSAGE = 256 * 1024 * 1024


class WorkerTimeout(Exception):
    """The call overran its deadline; the worker was killed and replaced.

    ``clock`` says which limit ended the call: ``"cpu"`` when the worker's own CPU time reached
    the call's budget, ``"wall"`` when the wall clock reached its deadline (for a CPU budget: the
    backstop, so a worker starved by load was given several times its budget first).
    ``cpu_s`` and ``wall_s`` are what the call had used when it was stopped (None: not measured).
    """

    def __init__(self, message: str = "", clock: str = "wall", cpu_s: float | None = None, wall_s: float | None = None):
        super().__init__(message)
        self.clock = clock
        self.cpu_s = cpu_s
        self.wall_s = wall_s


class WorkerCrashed(Exception):
    """The worker died (crash, memory limit) before answering; it was replaced."""


#: The wall-clock backstop of a CPU budget is ``WALL_FACTOR * cpu_s + WALL_GRACE_S``: a worker
#: gets ten times its budget in wall time (every core busy with three runnable processes each
#: still leaves it a quarter of a core), and five seconds more so that short budgets survive a
#: few scheduling hiccups (page faults, a swapped-out page, a frequency drop).
WALL_FACTOR = 10.0
WALL_GRACE_S = 5.0
#: Linux's clock id for a process's CPU clock is ``(~pid << 3) | CPUCLOCK_SCHED``: what glibc's
#: ``clock_getcpuclockid`` returns, which Python does not wrap.
_CPUCLOCK_SCHED = 2


@dataclass(frozen=True)
class Deadline:
    """How long one call may take: ``cpu_s`` seconds of the worker process's own CPU time (None:
    no CPU limit) and ``wall_s`` seconds of wall clock at most, whatever the CPU says."""

    wall_s: float
    cpu_s: float | None = None

    @classmethod
    def cpu(cls, cpu_s: float) -> Deadline:
        """A CPU budget with the standard wall-clock backstop (see ``WALL_FACTOR``)."""
        return cls(wall_s=backstop(cpu_s), cpu_s=cpu_s)


def backstop(cpu_s: float) -> float:
    """The wall-clock seconds after which a call with a CPU budget of ``cpu_s`` is killed anyway."""
    return WALL_FACTOR * cpu_s + WALL_GRACE_S


def as_deadline(timeout: float | Deadline) -> Deadline:
    """A plain number is a wall-clock deadline, as it always was."""
    return timeout if isinstance(timeout, Deadline) else Deadline(wall_s=float(timeout))


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) that process ``pid`` has used; None if unknown.

    The kernel's per-process CPU clock (nanoseconds) where it exists, else ``/proc/<pid>/stat``
    (clock ticks). Only meaningful for a process we have not reaped: its pid cannot be reused.
    """
    try:
        return time.clock_gettime((~pid << 3) | _CPUCLOCK_SCHED)
    except (OSError, OverflowError, AttributeError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def write_message(fd: int, payload: dict[str, Any]) -> None:
    data = compact_json(payload).encode()
    buf = _HEADER.pack(len(data)) + data
    view = memoryview(buf)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise WorkerTimeout()
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise WorkerTimeout()
        chunk = os.read(fd, min(remaining, 1 << 22))
        if not chunk:
            raise WorkerCrashed("worker closed its pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float | None = None) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE:
        raise WorkerCrashed("oversized message")
    return json.loads(_read_exact(fd, size, deadline))


_FRAME = struct.Struct("!II")
MAX_BLOB = 1 << 30


def write_frame(fd: int, header: dict[str, Any], blob: bytes | bytearray | memoryview = b"") -> None:
    """A JSON header plus raw bytes (outputs, encoded values): no base64, no text conversion.
    For trusted peers (judge <-> supervisor); blocking."""
    head = compact_json(header).encode()
    write_all(fd, [_FRAME.pack(len(head), len(blob)) + head, blob])


def write_all(fd: int, parts: list[bytes | bytearray | memoryview]) -> None:
    """``writev`` until every part is out (no concatenation of large buffers); blocking."""
    views = [memoryview(p) for p in parts if p]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]


def read_frame(fd: int, deadline: float | None = None) -> tuple[dict[str, Any], bytes]:
    head_size, blob_size = _FRAME.unpack(_read_exact(fd, _FRAME.size, deadline))
    if head_size > MAX_MESSAGE or blob_size > MAX_BLOB:
        raise WorkerCrashed("oversized frame")
    header = json.loads(_read_exact(fd, head_size, deadline))
    return header, _read_exact(fd, blob_size, deadline) if blob_size else b""


def send_json(sock: socket.socket, payload: dict[str, Any], fds: list[int] | None = None) -> None:
    data = compact_json(payload).encode()
    frame = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [frame], fds)
        if sent < len(frame):
            sock.sendall(frame[sent:])
    else:
        sock.sendall(frame)


def _recv_exact(sock: socket.socket, size: int, first: bytes = b"") -> bytes | None:
    chunks = [first]
    got = len(first)
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_json(sock: socket.socket, want_fds: int = 0):
    """Read one message; with ``want_fds`` returns ``(payload, fds)``."""
    fds: list[int] = []
    if want_fds:
        data, fds, _, _ = socket.recv_fds(sock, _HEADER.size, want_fds)
        head = _recv_exact(sock, _HEADER.size, data) if data else None
    else:
        head = _recv_exact(sock, _HEADER.size)
    if not head:
        return (None, fds) if want_fds else None
    (size,) = _HEADER.unpack(head)
    body = _recv_exact(sock, size)
    payload = json.loads(body) if body is not None else None
    return (payload, fds) if want_fds else payload
