"""The supervisor's side of a child's channels: what to write and how to read what comes back.

Everything a test child sends is untrusted. ``CallReader`` parses the call protocol
(``rlvr.sandbox.code.isolation.child``) byte by byte and holds each call to one clock: from the moment the
child may start on the call (the request is there, or the previous answer is complete) until
its answer is complete, decoding the arguments and encoding the result included. Both run in
the program's process, where the program's code can run too (a class its arguments are
rebuilt into, a profile hook, a replaced internal), so no part of a call has an allowance of
its own. ``BatchReader`` chains readers over one channel for a batch of calls; ``FrameReader``
collects one bounded ``rlvr.sandbox.wire`` frame from the tester child.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable

STDERR_TAIL = 2000
#: How long the judge waits for the sandbox's answer to a call beyond the call's own limits:
#: moving the arguments and the result through the supervisor (a fixed part plus a part
#: proportional to the bytes). A backstop of the judge's patience only: the program's clock
#: in the sandbox covers the whole call, codec included.
CODEC_FIXED_S = 1.0
CODEC_BYTES_PER_S = 4 << 20
CODEC_WALL_FACTOR = 3.0
_U32 = struct.Struct("!I")
#: How many times its wall clock a program may take while the machine starves it: it is
#: runnable (not sleeping) and within its CPU budget, so the time-out would be the load's doing.
BUSY_PATIENCE = 3.0
#: The note on a ``tle`` outcome that ran into the submission's ``total_s``.
TOTAL_LIMIT_NOTE = "total time limit"
#: A batch of calls is read at most this often: answers to short calls arrive together.
COALESCE_S = 0.0005


class Feed:
    """Bytes still to be written to a child; ``pump`` consumes them without blocking, and what
    is left carries over to the next ``pump`` (calls are written ahead of their answers)."""

    def __init__(self, data: bytes = b""):
        self.data = memoryview(data)


@dataclass
class Outcome:
    """What happened when one test ran (no judgement: the judge compares outside)."""

    status: str = "ok"
    stdout: bytes = b""
    stderr: bytes = b""
    result: bytes | None = None
    error: str = ""
    exit_code: int | None = None
    signal: int | None = None
    cpu_ms: float = 0.0
    wall_ms: float = 0.0
    max_rss_kb: int = 0
    notes: list[str] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error[:500],
            "stderr": self.stderr[-STDERR_TAIL:].decode("utf-8", "replace"),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "cpu_ms": round(self.cpu_ms, 3),
            "wall_ms": round(self.wall_ms, 3),
            "max_rss_kb": self.max_rss_kb,
            "notes": self.notes,
        }

    def call_answer(self, size: int) -> dict[str, Any] | list[float]:
        """What the judge is sent about one answered call. A plain answer (``ok``, and nothing
        else observed) travels as ``[size, cpu_ms, wall_ms]``: writing and reading the full
        header was about a tenth of a call's CPU; ``call_outcome`` rebuilds it unchanged."""
        if (
            self.status == "ok"
            and not (self.error or self.stderr or self.notes or self.max_rss_kb or self.exit_code is not None)
            and self.signal is None
        ):
            return [size, round(self.cpu_ms, 3), round(self.wall_ms, 3)]
        return {**self.header(), "size": size}


def call_outcome(answer: dict[str, Any] | list[float]) -> dict[str, Any]:
    """The judge's side of ``Outcome.call_answer``: the header a plain answer stands for."""
    if isinstance(answer, dict):
        return answer
    size, cpu_ms, wall_ms = answer
    return {**_PLAIN_HEADER, "cpu_ms": cpu_ms, "wall_ms": wall_ms, "notes": [], "size": int(size)}


#: A fresh outcome's header: what ``call_answer`` leaves out of a plain answer.
_PLAIN_HEADER = Outcome().header()


class Inbox:
    """Bytes read from a child and not yet parsed: a buffer and a read position (parsing never
    moves the bytes that follow; the buffer is compacted now and then)."""

    def __init__(self, data: bytes = b""):
        self.data = bytearray(data)
        self.pos = 0

    def add(self, chunk: bytes) -> None:
        if self.pos > (1 << 20) and self.pos * 2 > len(self.data):
            del self.data[: self.pos]
            self.pos = 0
        self.data += chunk

    def left(self) -> int:
        return len(self.data) - self.pos


#: Phase -> (the byte that ends it: L, S, R; the next phase; what a different byte means).
_MARKERS = {
    "load": (76, "decode", "expected the program to load"),
    "decode": (83, "call", "expected the call to start"),
    "call": (82, "answer", "expected the call to return"),
}


class CallReader:
    """Parses the call child's untrusted channel (``S``, ``R``, then a chunked ``V`` value or an
    ``E``/``X`` message) and holds the whole call, codec included, to one deadline and one CPU
    budget (a loading child's module code first gets a budget of its own, as a test would)."""

    def __init__(
        self,
        sent_at: float,
        cpu_at: float,
        time_s: float,
        wall_s: float,
        cap: int,
        inbox: Inbox | None = None,
        loading: bool = False,
    ):
        self.inbox = inbox or Inbox()
        self.phase = "load" if loading else "decode"
        self.sent_at, self.time_s, self.wall_s, self.cap = sent_at, time_s, wall_s, cap
        self.started_at = self.returned_at = self.done_at = 0.0
        self.cpu_sent, self.cpu_started, self.cpu_returned, self.cpu_done = cpu_at, 0.0, 0.0, 0.0
        self.kind: bytes = b""
        self.chunks: list[bytes] = []
        self.received = 0
        self.payload = b""
        self.error = ""

    def feed(self, chunk: bytes, now: float, cpu: Callable[[], float]) -> bool:
        """Consume bytes; True once the answer is complete (or the channel broke its protocol)."""
        inbox = self.inbox
        if chunk:
            inbox.add(chunk)
        data = inbox.data
        markers = _MARKERS
        while inbox.pos < len(data):
            pos = inbox.pos
            if self.phase in markers:
                byte, following, why = markers[self.phase]
                if data[pos] != byte:
                    return self._broken(why)
                inbox.pos += 1
                if self.phase == "load":
                    self.sent_at, self.cpu_sent = now, cpu()
                elif self.phase == "decode":
                    self.started_at, self.cpu_started = now, cpu()
                else:
                    self.returned_at, self.cpu_returned = now, cpu()
                self.phase = following
            elif self.phase == "answer":
                kind = data[pos]
                if kind == 86:  # V
                    inbox.pos += 1
                    self.kind, self.phase = b"V", "value"
                    continue
                if kind not in (69, 88):  # E, X
                    return self._broken("expected a value")
                if len(data) - pos < 5:
                    return False
                (size,) = _U32.unpack_from(data, pos + 1)
                if size > 4096:
                    return self._broken("oversized message")
                if len(data) - pos < 5 + size:
                    return False
                self.kind, self.payload, self.phase = bytes([kind]), bytes(data[pos + 5 : pos + 5 + size]), "done"
                inbox.pos += 5 + size
                self.done_at, self.cpu_done = now, cpu()
                return True
            else:
                if len(data) - pos < 4:
                    return False
                (size,) = _U32.unpack_from(data, pos)
                if size == 0:
                    self.payload, self.phase = b"".join(self.chunks), "done"
                    inbox.pos += 4
                    self.done_at, self.cpu_done = now, cpu()
                    return True
                if self.received + size > self.cap:
                    self.phase = "oversized"
                    return True
                if len(data) - pos < 4 + size:
                    return False
                self.chunks.append(bytes(memoryview(data)[pos + 4 : pos + 4 + size]))
                self.received += size
                inbox.pos += 4 + size
        return False

    def _broken(self, why: str) -> bool:
        self.phase, self.error = "broken", why
        return True

    def deadline(self) -> float:
        """One wall clock from the request (or the load) to the complete answer."""
        return self.sent_at + self.wall_s

    def cpu_limit(self) -> float | None:
        """One CPU budget from the request (or the load) to the complete answer: decoding the
        arguments and encoding the result run in the program's process, so they are the call's."""
        return self.cpu_sent + self.time_s


class BatchReader:
    """The answers to a batch of calls, one after another over the same channel (bytes of the
    next answer that arrive with the previous one carry over). An answer that is there whole in
    its common form (``S R V``, one chunk, the zero length) is read here at once; anything else
    goes through a ``CallReader``, byte by byte, and both hold a call to the same clock.
    ``failed``: the channel broke protocol or a value was too large; ``outcomes``: one per
    answered call, the last one unfinished if the batch stopped on a failure."""

    def __init__(
        self,
        sandbox_cpu: Callable[[], float],
        result_cap: int,
        calls: list[tuple[float, float]],
        loading: bool = False,
        budget_s: float | None = None,
        cpu_from: float | None = None,
    ):
        self.sandbox_cpu, self.result_cap, self.calls = sandbox_cpu, result_cap, calls
        self.loading = loading
        #: The sandbox's CPU when the previous batch of the same call child ended: the first
        #: call's clock starts there, so what the program's processes ran between batches
        #: (a thread, a hook, a process it left running) is charged too.
        self.cpu_from = cpu_from
        #: The submission's remaining ``total_s``: no call, nor the judge's work between calls,
        #: runs past it, so a batch never outlasts what the judge waits for.
        self.hard_end = time.monotonic() + budget_s if budget_s is not None else float("inf")
        self.outcomes: list[Outcome] = []
        self.failed: str | None = None
        self.reading = (-1.0, 0.0)
        #: The current call's reader, made only when its answer is not read whole at once.
        self.reader: CallReader | None = None
        self.current = False
        self.sent_at = self.cpu_sent = self.time_s = self.wall_s = 0.0
        self.inbox = Inbox()
        self._next(time.monotonic())

    def cpu(self) -> float:
        """The sandbox's CPU, read once per moment (answers that arrive together share it)."""
        now = time.monotonic()
        if now - self.reading[0] > 1e-4:
            self.reading = (now, self.sandbox_cpu())
        return self.reading[1]

    def _next(self, now: float) -> None:
        index = len(self.outcomes)
        self.reader = None
        if index >= len(self.calls):
            self.current = False
            return
        self.current = True
        self.time_s, self.wall_s = self.calls[index]
        self.sent_at = now
        self.cpu_sent = self.cpu_from if index == 0 and self.cpu_from is not None else self.cpu()
        if self.loading and index == 0:
            self._reader()
        self.outcomes.append(Outcome())

    def _reader(self) -> CallReader:
        if self.reader is None:
            loading = self.loading and len(self.outcomes) <= 1
            self.reader = CallReader(
                self.sent_at, self.cpu_sent, self.time_s, self.wall_s, self.result_cap, self.inbox, loading
            )
        return self.reader

    def _whole(self, now: float) -> bool:
        """Read the current answer if it is there whole in its common form; what a
        ``CallReader`` would make of the same bytes."""
        data, pos = self.inbox.data, self.inbox.pos
        if len(data) - pos < 11 or data[pos : pos + 3] != b"SRV":
            return False
        (size,) = _U32.unpack_from(data, pos + 3)
        end = pos + 7 + size
        if not 0 < size <= self.result_cap or len(data) < end + 4 or data[end : end + 4] != b"\0\0\0\0":
            return False
        self.inbox.pos = end + 4
        outcome = self.outcomes[-1]
        outcome.result = bytes(memoryview(data)[pos + 7 : end])
        outcome.wall_ms = (now - self.sent_at) * 1000
        outcome.cpu_ms = (self.cpu() - self.cpu_sent) * 1000
        return True

    def feed(self, chunk: bytes, now: float, cpu: Callable[[], float]) -> bool:
        """True once every call is answered, or the channel failed."""
        if chunk:
            self.inbox.add(chunk)
        while self.current:
            if self.reader is None and self._whole(now):
                self._next(now)
                continue
            reader = self._reader()
            if not reader.feed(b"", now, self.cpu):
                return False
            if reader.phase != "done":
                self.failed = reader.phase
                return True
            outcome = self.outcomes[-1]
            outcome.wall_ms = (reader.done_at - reader.sent_at) * 1000
            outcome.cpu_ms = (reader.cpu_done - reader.cpu_sent) * 1000
            if reader.kind == b"V":
                outcome.result = reader.payload
            else:
                outcome.status = "raised" if reader.kind == b"E" else "bad_value"
                outcome.error = reader.payload.decode("utf-8", "replace")
            self._next(now)
        return True

    def deadline(self) -> float:
        if not self.current:
            return min(time.monotonic() + 60, self.hard_end)
        own = self.reader.deadline() if self.reader is not None else self.sent_at + self.wall_s
        return min(own, self.hard_end)

    def cpu_limit(self) -> float | None:
        if not self.current:
            return None
        return self.reader.cpu_limit() if self.reader is not None else self.cpu_sent + self.time_s

    def patience(self) -> float:
        if not self.current:
            return 0.0
        return hard_patience(BUSY_PATIENCE * self.wall_s, self.deadline(), self.hard_end)

    def out_of_budget(self) -> bool:
        return time.monotonic() >= self.hard_end


def hard_patience(patience: float, deadline: float, hard_end: float) -> float:
    """Extra wall time for a starved program that never reaches past the submission's end."""
    return max(0.0, min(patience, hard_end - deadline))


class DoneReader:
    """The stdin runner's untrusted channel: ``D`` and one status byte end a test. ``status``
    stays None when anything else arrives (the program wrote there: the test fails)."""

    def __init__(self) -> None:
        self.buf = b""
        self.status: int | None = None

    def feed(self, chunk: bytes, now: float, cpu: Callable[[], float]) -> bool:
        self.buf += chunk
        if len(self.buf) < 2 and self.buf in (b"", b"D"):
            return False
        if len(self.buf) == 2 and self.buf[:1] == b"D":
            self.status = self.buf[1]
        return True


class FrameReader:
    """Collects one ``rlvr.sandbox.wire`` frame from the tester child (bounded)."""

    def __init__(self, cap: int):
        self.buf = bytearray()
        self.cap = cap
        self.frame: bytes | None = None

    def feed(self, chunk: bytes, now: float, cpu: Callable[[], float]) -> bool:
        """Consume bytes; True once a whole frame is buffered (``frame``; empty when oversized)."""
        self.buf += chunk
        if len(self.buf) < 8:
            return False
        head, blob = struct.unpack_from("!II", self.buf)
        if head + blob > self.cap:
            self.frame = b""
            return True
        if len(self.buf) < 8 + head + blob:
            return False
        self.frame = bytes(self.buf[: 8 + head + blob])
        del self.buf[: 8 + head + blob]
        return True
