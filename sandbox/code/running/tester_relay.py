"""The supervisor's side of an assert-style test: it starts the tester child
(``rlvr.sandbox.code.running.tester``) in the tester sandbox and relays its call frames to the judge, which
runs them in the program's sandbox, feeding the answers back until the child reports the end."""

from __future__ import annotations

import json
import struct
import time
from typing import Callable

from rlvr.sandbox.code.isolation.child import python_streams
from rlvr.sandbox.code.running.channels import Feed, FrameReader, Outcome
from rlvr.sandbox.code.running.output import tail
from rlvr.sandbox.code.running.pump import pump
from rlvr.sandbox.code.running.runner import Supervisor
from rlvr.sandbox.code.running.tester import python_tester


def run_tester(sup: Supervisor, spec: bytes, wall_s: float, relay: Callable[[bytes], bytes]) -> Outcome:
    """One assert-style test in this (tester) sandbox: the tester child's call frames are
    relayed to the judge, whose answers are fed back, until the child reports the end."""
    outcome = Outcome()
    child = sup.spawn(lambda: (python_streams(sup.isolated), python_tester()), step="tester", channels=True)
    deadline = child.start + wall_s
    feed = Feed(spec)
    reader = FrameReader(sup.limits.result_mb << 21)
    stdout, stderr = tail(), tail()
    while True:
        if not pump(
            child,
            outcome,
            stdout,
            stderr,
            sup.reap,
            sup.cpu_s,
            lambda: deadline,
            lambda: None,
            feed,
            "to_child",
            reader,
        ):
            if outcome.status == "ok":
                sup.classify(child, outcome, float("inf"), 0.0, 0)
                outcome.status = "tester_died" if outcome.status in ("ok", "re") else outcome.status
            break
        frame, reader.frame = reader.frame or b"", None
        try:
            head_size = struct.unpack_from("!I", frame)[0]
            done = json.loads(frame[8 : 8 + head_size]).get("op") == "done"
        except (struct.error, ValueError, AttributeError):
            outcome.status = "tester_died"
            break
        if done:
            outcome.result = frame
            break
        reply = relay(frame)
        if not reply:
            outcome.status = "aborted"
            break
        feed = Feed(reply)
    outcome.wall_ms = (time.monotonic() - child.start) * 1000
    sup.close_child(child)
    sup.kill_everything(child)
    sup.reset_scratch()
    return outcome
