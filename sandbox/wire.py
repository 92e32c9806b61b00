"""Length-prefixed JSON over a Unix socket, with optional file descriptors (SCM_RIGHTS)."""
from __future__ import annotations

import json
import socket
import struct
from typing import Any

_HEADER = struct.Struct("!I")


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
