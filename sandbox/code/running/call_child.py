"""The call child, the supervisor's side: one long-lived process per sandbox that calls the
program's function for every call-based test (``rlvr.sandbox.code.isolation.child.python_calls``),
started on first use and replaced after any failure."""

from __future__ import annotations

import os
import time

from rlvr.sandbox.code.isolation.child import python_calls, python_streams
from rlvr.sandbox.code.running.channels import COALESCE_S, TOTAL_LIMIT_NOTE, BatchReader, Feed, Outcome
from rlvr.sandbox.code.running.output import tail
from rlvr.sandbox.code.running.pump import pump
from rlvr.sandbox.code.running.runner import Supervisor


def run_calls(
    sup: Supervisor, entry: str | None, calls: list[tuple[bytes, int, float | None]], budget_s: float | None = None
) -> list[Outcome]:
    """Calls in the long-lived call child (started on first use, restarted after a
    failure), written ahead of their answers so a batch costs one round trip, each answer
    held to its own deadline and CPU budget. ``calls``: (request, argument bytes, time_s).
    Status ``raised``: the function raised; ``bad_value``: its value could not be encoded
    or the channel broke protocol (both the program's doing); ``skipped``: an earlier call
    of the batch ended the child, this one did not run."""
    path = os.path.join(sup.prog_dir, sup.language.source)
    fresh = sup.call_child is None
    if fresh:
        sup.call_child = sup.spawn(
            lambda: (python_streams(sup.isolated), python_calls(path, entry, sup.limits.result_mb << 20)),
            step="calls",
            channels=True,
        )
    child = sup.call_child
    _, oom_before = sup.counters()
    batch = BatchReader(
        lambda: sup.cpu_s(child),
        sup.limits.result_mb << 20,
        [(time_s or sup.limits.time_s, sup.wall_s(time_s)) for _, _, time_s in calls],
        fresh,
        budget_s,
        None if fresh else sup.calls_cpu,
    )
    sup.calls_cpu = None
    spare = Outcome()
    done = pump(
        child,
        spare,
        tail(),
        tail(),
        sup.reap,
        sup.cpu_s,
        batch.deadline,
        batch.cpu_limit,
        Feed(b"".join(request for request, _, _ in calls)),
        "to_child",
        batch,
        COALESCE_S if len(calls) > 1 else 0.0,
        batch.patience,
    )
    outcomes = batch.outcomes
    if done and batch.failed is None:
        sup.calls_cpu = batch.cpu()
        return outcomes
    current = outcomes[-1] if outcomes and outcomes[-1].status == "ok" and outcomes[-1].result is None else None
    if current is None:
        current = Outcome()
        outcomes.append(current)
    current.stdout, current.stderr = spare.stdout, spare.stderr
    reader = batch.reader
    if batch.failed is not None:
        current.status = "ole" if batch.failed == "oversized" else "bad_value"
        current.error = reader.error or f"return value larger than {sup.limits.result_mb} MiB"
        current.notes.append("result channel")
    elif spare.status in ("ole", "tle"):
        current.status, current.notes = spare.status, spare.notes
        if spare.status == "tle" and batch.out_of_budget():
            current.notes.append(TOTAL_LIMIT_NOTE)
    else:
        sup.classify(child, current, float("inf"), 0.0, oom_before)
        if current.status == "ok":  # exit status 0 with no answer: it answered nothing
            current.status = "no_answer"
            current.error = "the program exited (status 0) before answering"
    if reader is not None and reader.started_at:
        current.wall_ms = (time.monotonic() - reader.started_at) * 1000
    sup.close_child(child)
    sup.call_child = None
    sup.kill_everything(child)
    sup.reset_scratch()
    outcomes += [Outcome(status="skipped") for _ in range(len(calls) - len(outcomes))]
    return outcomes
