"""One sandbox as the judge drives it: opened by the zygote, fed frames, stopped, reaped.

The judge process talks to its zygote (``rlvr.sandbox.code.isolation.zygote``, set in ``ZYGOTE`` by the judge's
``main``) over one socket; a ``Box`` asks it for a sandbox, exchanges ``rlvr.sandbox.wire`` frames
with the sandbox's supervisor, and on ``close`` makes sure nothing of the submission still runs.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Any

from rlvr.sandbox.code.rules.limits import Limits, late_limits
from rlvr.sandbox.wire import WorkerCrashed, WorkerTimeout, read_frame, recv_json, send_json, write_frame

#: Seconds the judge waits beyond an operation's own limits before it calls the sandbox dead.
MARGIN_S = 10.0
#: How long a verdict waits for the zygote to reap the sandbox and empty its cgroup. The zygote may be
#: building the next spare sandbox first (seconds on a loaded machine); only a dead zygote takes this long.
REAP_WAIT_S = 30.0
#: ``(pid, socket)`` of this judge's zygote, set once by the judge at start-up.
ZYGOTE: Any = None


class SandboxDown(RuntimeError):
    """A sandbox could not start or stopped answering (never the program's doing)."""


class Box:
    """One sandbox as the judge drives it: opened by the zygote, fed frames, stopped, reaped."""

    def __init__(self, language: str, limits: Limits):
        self.language, self.limits = language, limits
        self.pid = self.pidfd = self.ctl = self.res = -1
        self.info: dict[str, Any] = {}
        self.pending = 0

    def open(self, files: dict[str, str], entry: str | None) -> dict[str, Any]:
        sock = ZYGOTE[1]
        send_json(sock, {"open": {"language": self.language, "limits": self.limits.to_dict()}})
        reply, fds = recv_json(sock, want_fds=3)
        while reply is not None and "reaped" in reply and not fds:  # a late answer to a reap
            reply, fds = recv_json(sock, want_fds=3)
        if reply is None or "error" in reply or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise SandboxDown(f"zygote: {(reply or {}).get('error', 'closed')}")
        self.ctl, self.res, self.pidfd = fds
        self.pid, self.info = reply["pid"], reply
        try:
            # The sandbox was built without ``LATE_LIMITS``: its supervisor takes them from here.
            write_frame(self.ctl, {"files": files, "entry": entry, "late": late_limits(self.limits)})
            header, _ = read_frame(self.res, time.monotonic() + self.limits.compile_time_s * 1.5 + MARGIN_S + 5)
        except (WorkerTimeout, WorkerCrashed, OSError) as exc:
            raise SandboxDown(f"sandbox setup did not answer ({type(exc).__name__})") from exc
        if "fatal" in header:
            raise SandboxDown(f"sandbox setup failed: {header['fatal']}")
        return header["compile"]

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        try:
            write_frame(self.ctl, header, blob)
            if "op" in header:  # an operation PID 1 answers (not a reply to a relayed call)
                self.pending += 1
        except OSError as exc:
            raise SandboxDown(f"sandbox stopped answering ({type(exc).__name__})") from exc

    def receive(self, wait_s: float) -> tuple[dict[str, Any], bytes]:
        try:
            frame = read_frame(self.res, time.monotonic() + wait_s)
        except (WorkerTimeout, WorkerCrashed, OSError, ValueError) as exc:
            raise SandboxDown(f"sandbox stopped answering ({type(exc).__name__})") from exc
        if "relay" not in frame[0]:
            self.pending -= 1
        return frame

    def op(self, header: dict[str, Any], blob: bytes, wait_s: float) -> tuple[dict[str, Any], bytes]:
        self.send(header, blob)
        reply, payload = self.receive(wait_s)
        return reply["outcome"], payload

    def close(self, grace: float = 2.0) -> None:
        """Stop the supervisor; kill the sandbox if it lingers. Returns once nothing of the
        submission runs: PID 1 said it killed and reaped every other process of its namespace
        (the zygote then reaps PID 1 and checks its cgroup before the slot is reused), or, when
        it does not say so (unsafe mode, a crash, work sent ahead still running), once PID 1
        has exited and the zygote has reaped it and found its cgroup empty."""
        if self.pid < 0:
            return
        try:
            write_frame(self.ctl, {"op": "stop"})
        except OSError:
            pass
        sock = ZYGOTE[1]
        end = time.monotonic() + grace
        if not self.pending and self._stopped(end):
            send_json(sock, {"release": self.pid})
        else:
            # Work sent ahead is still running and nobody wants its answer, or PID 1 did not
            # say it stopped: its exit (the kernel then ends its whole namespace) is the proof.
            wait = 0.0 if self.pending else max(end - time.monotonic(), 0.0)
            if not select.select([self.pidfd], [], [], wait)[0]:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                select.select([self.pidfd], [], [], 10.0)
            send_json(sock, {"reap": self.pid})  # the zygote reaps it (then removes its cgroup)
            if select.select([sock], [], [], REAP_WAIT_S)[0]:
                recv_json(sock)
        for fd in (self.ctl, self.res, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pid = -1

    def _stopped(self, end: float) -> bool:
        """Did PID 1 answer ``stop`` with ``{"stopped": true}`` by ``end``?"""
        try:
            header, _ = read_frame(self.res, end)
        except (WorkerTimeout, WorkerCrashed, OSError, ValueError):
            return False
        return isinstance(header, dict) and header.get("stopped") is True
