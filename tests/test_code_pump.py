"""The supervisor's pump reading a batch of call answers (``rlvr.sandbox.code.running.pump``).

Answers to many short calls are read together: once answers are arriving, the supervisor wakes
at most every ``coalesce_s``. It never sleeps before the first answer: a batch the call child
answers at once is read at once (a sleep there left a core idle, 1,556 times in one HumanEval+
run on 2 cores).
"""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time

import pytest
from rlvr.sandbox.code.running import pump as pump_module
from rlvr.sandbox.code.running.channels import BatchReader, Feed, Outcome
from rlvr.sandbox.code.running.output import tail
from rlvr.sandbox.code.running.pump import Child, pump

#: ``time.sleep`` itself: the stand-in call child's pauses are not the pump's.
PAUSE = time.sleep
#: Longer than the supervisor's 0.5 ms, so that no step of a loaded machine outlasts it.
COALESCE_S = 0.2


def answer(value: bytes) -> bytes:
    return b"SRV" + struct.pack("!I", len(value)) + value + b"\0\0\0\0"


def answers(first: int, end: int) -> bytes:
    return b"".join(answer(b"%d" % i) for i in range(first, end))


def run_batch(monkeypatch, calls: int, ready: bytes, later: bytes, gap_s: float) -> tuple[list[Outcome], list[float]]:
    """Pump a batch of ``calls`` calls against a stand-in call child: ``ready`` is in the
    channel before the pump starts; a thread reads the requests, waits ``gap_s`` and writes
    ``later``. Returns the outcomes and the coalescing sleeps the pump took."""
    sleeper = subprocess.Popen(["sleep", "30"])  # a live process for the pidfd
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    os.set_blocking(to_w, False)
    requests = b"request" * calls
    os.write(from_w, ready)

    def call_child() -> None:
        got = b""
        while len(got) < len(requests):
            got += os.read(to_r, 1 << 16)
        PAUSE(gap_s)
        if later:
            os.write(from_w, later)

    sleeps: list[float] = []
    main = threading.get_ident()  # ``time.sleep`` is patched process-wide: count the pump's only
    monkeypatch.setattr(
        pump_module.time, "sleep", lambda s: (threading.get_ident() == main and sleeps.append(s), PAUSE(s))
    )
    thread = threading.Thread(target=call_child)
    thread.start()
    child = Child(
        sleeper.pid,
        os.pidfd_open(sleeper.pid),
        time.monotonic(),
        {"stdin": None, "stdout": None, "stderr": None, "to_child": to_w, "from_child": from_r},
    )
    batch = BatchReader(lambda: time.process_time(), 1 << 20, [(5.0, 10.0)] * calls)
    try:
        done = pump(
            child,
            Outcome(),
            tail(),
            tail(),
            lambda c: False,
            lambda c: 0.0,
            batch.deadline,
            batch.cpu_limit,
            Feed(requests),
            "to_child",
            batch,
            COALESCE_S,
            batch.patience,
        )
    finally:
        monkeypatch.undo()
        thread.join(30)
        sleeper.kill()
        sleeper.wait()
        for fd in (to_r, to_w, from_r, from_w, child.pidfd):
            os.close(fd)
    assert done and batch.failed is None
    return batch.outcomes, sleeps


@pytest.mark.parametrize("calls", [2, 8, 64])
def test_a_batch_answered_at_once_is_read_without_a_sleep(monkeypatch, calls):
    """The answers come after the requests are written (the pump's first pass only writes):
    the pump waits for them in ``select``, not in a sleep, and reads them whole."""
    outcomes, sleeps = run_batch(monkeypatch, calls, b"", answers(0, calls), 0.005)
    assert [o.result for o in outcomes] == [b"%d" % i for i in range(calls)]
    assert sleeps == []


def test_answers_still_arriving_are_gathered(monkeypatch):
    """The first answer is there, the other seven come 100 ms after the requests: one
    coalescing sleep after the first read, in which the rest arrives, then one read."""
    outcomes, sleeps = run_batch(monkeypatch, 8, answer(b"0"), answers(1, 8), 0.1)
    assert [o.result for o in outcomes] == [b"%d" % i for i in range(8)]
    assert len(sleeps) == 1 and 0 < sleeps[0] <= COALESCE_S
    assert outcomes[0].wall_ms < 100 <= outcomes[1].wall_ms  # the first answer kept its own time
