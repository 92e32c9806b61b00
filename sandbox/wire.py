"""Length-prefixed JSON messages: over pipes (with deadlines) and over Unix sockets (with file
descriptors). Kept dependency-light: sandboxed processes are forked from code that imports it."""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("!I")
MAX_MESSAGE = 256 * 1024 * 1024


class WorkerTimeout(Exception):
    """The call overran its deadline; the worker was killed and replaced."""


class WorkerCrashed(Exception):
    """The worker died (crash, memory limit) before answering; it was replaced."""


def write_message(fd: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload, separators=(",", ":")).encode()
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
    head = json.dumps(header, separators=(",", ":")).encode()
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
    data = json.dumps(payload, separators=(",", ":")).encode()
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
