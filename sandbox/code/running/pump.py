"""Moving bytes between the supervisor and one child process, never blocking on it: input fed as
the child reads it, output drained under a cap, the wall clock and the CPU budget enforced, the
child reaped when it exits. The supervisor (``rlvr.sandbox.code.running.runner``) decides what runs; this
module only watches it."""

from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass
from typing import Any, Callable

from rlvr.sandbox.code.running.channels import Feed, Outcome
from rlvr.sandbox.code.running.output import Sink

#: Pipes to and from children are enlarged to this (fewer wakeups for large values).
PIPE_BYTES = 1 << 20
#: stderr's pipe keeps the kernel's default size (no comparison reads it), so it is read in
#: pieces of that size: a read asks ``os.read`` for a buffer of the size requested, and a buffer
#: of ``PIPE_BYTES`` for at most 64 KiB is a fresh mapping whose pages each read faults in again.
STDERR_READ = 1 << 16


class SetupFailed(RuntimeError):
    """The child died before the program started: a sandbox fault, never the program's."""


@dataclass
class Child:
    pid: int
    pidfd: int
    start: float
    fds: dict[str, int | None]
    exited: bool = False
    status: int = 0
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    #: CPU its earlier work used (a stdin runner's earlier tests): left out of ``cpu_s``.
    cpu_base: float = 0.0


def pump(
    child: Child,
    outcome: Outcome,
    stdout: Sink,
    stderr: Sink,
    reap: Callable[[Child], bool],
    cpu_s: Callable[[Child], float],
    deadline: Callable[[], float],
    cpu_limit: Callable[[], float | None],
    feed: Feed | None = None,
    feed_key: str = "stdin",
    reader: Any = None,
    coalesce_s: float = 0.0,
    patience: Callable[[], float] = lambda: 0.0,
) -> bool:
    """Move bytes until the child exits or ``reader`` has a complete message, keeping output
    in ``stdout`` / ``stderr`` (a sink that refuses more is ``ole``), enforcing the wall clock
    and the CPU budget (``cpu_s`` of the child, which ``reap`` collects once it exits). Never
    blocks on the child. Returns True when the reader is satisfied. ``coalesce_s``: once
    answers are arriving (a read that did not complete the reader), wake at most this often, so
    answers to many short calls are read together (timings are then this coarse). Never after
    a write or before the first answer: a batch the child answers at once is read at once,
    instead of the supervisor sleeping while the machine idles. ``patience``: how much longer
    than its wall clock a runnable program under its CPU budget may take."""
    feed = feed or Feed()
    fds = child.fds
    if not feed.data and feed_key == "stdin" and fds["stdin"] is not None:
        os.close(fds["stdin"])
        fds["stdin"] = None
    exited_at, next_cpu_check = None, 0.0
    satisfied, woke, streaming = False, 0.0, False
    try:
        while True:
            now = time.monotonic()
            if streaming and now - woke < coalesce_s:
                time.sleep(coalesce_s - (now - woke))
                now = time.monotonic()
            woke, streaming = now, False
            limit = cpu_limit()
            if now >= deadline():
                # A program that is runnable (starved by a busy machine, not sleeping) and
                # still within its CPU budget gets more wall time, up to ``patience``.
                if (
                    exited_at is None
                    and limit is not None
                    and now < deadline() + patience()
                    and _runnable(child.pid)
                    and cpu_s(child) < limit
                ):
                    if "machine busy: wall clock extended" not in outcome.notes:
                        outcome.notes.append("machine busy: wall clock extended")
                else:
                    outcome.status = "tle"
                    outcome.notes.append("wall clock limit")
                    break
            if limit is not None and now >= next_cpu_check:
                next_cpu_check = now + 0.02
                if cpu_s(child) >= limit:
                    outcome.status = "tle"
                    outcome.notes.append("cpu time limit")
                    break
            reads = [fd for fd in (fds["stdout"], fds["stderr"], fds["from_child"]) if fd is not None]
            writes = [fds[feed_key]] if feed.data and fds[feed_key] is not None else []
            if exited_at is None and reap(child):
                exited_at = now
            if exited_at is not None and (not reads or now - exited_at > 0.05):
                break
            watch = reads + ([child.pidfd] if exited_at is None else [])
            timeout = min(
                max(deadline() - now, 0),
                0.02 if limit is not None else 0.25,
                0.01 if exited_at is not None else 1.0,
            )
            try:
                r_ready, w_ready, _ = select.select(watch, writes, [], timeout)
            except InterruptedError:
                continue
            for fd in w_ready:
                try:
                    feed.data = feed.data[os.write(fd, feed.data[: 1 << 16]) :]
                except BlockingIOError:
                    continue
                except OSError:
                    feed.data = memoryview(b"")
                if not feed.data and feed_key == "stdin":
                    os.close(fd)
                    fds["stdin"] = None
            for fd in r_ready:
                if fd == child.pidfd:
                    continue
                key = "stdout" if fd == fds["stdout"] else "stderr" if fd == fds["stderr"] else "from_child"
                try:
                    chunk = os.read(fd, STDERR_READ if key == "stderr" else PIPE_BYTES)
                except OSError:
                    chunk = b""
                if not chunk:
                    os.close(fd)
                    fds[key] = None
                    continue
                if key in ("stdout", "stderr"):
                    if not (stdout if key == "stdout" else stderr).add(chunk):
                        outcome.status = "ole"
                        outcome.notes.append(f"{key} limit")
                        return False
                elif reader is not None and reader.feed(
                    chunk, time.monotonic(), getattr(reader, "cpu", None) or (lambda: cpu_s(child))
                ):
                    satisfied = True
                else:
                    streaming = bool(coalesce_s)  # answers are arriving: let the rest gather
            if satisfied:
                return True
    finally:
        outcome.stdout, outcome.stderr = stdout.value(), stderr.value()
    return False


def _runnable(pid: int) -> bool:
    """Is the process running or waiting for a CPU (state ``R``), as opposed to sleeping?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"R"
    except (OSError, IndexError):
        return False
