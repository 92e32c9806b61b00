"""The per-submission stdin runner (``stdin_process="submission"``), the supervisor's side.

One Python process runs all of a submission's stdin tests, as LiveCodeBench's runner does: each
test's input arrives on a fresh fd 0, and the runner marks the end of the test with ``D`` and its
exit status on its own channel. Every clock and cap is still the supervisor's: the test's CPU is
read from the kernel, its output from the pipes, never from what the program reports. Anything
other than a clean end replaces the runner, and the runner never outlives the sandbox.
"""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import time
from typing import Any

from rlvr.sandbox.code.isolation.child import python_stdin_runner, python_streams
from rlvr.sandbox.code.running.channels import BUSY_PATIENCE, TOTAL_LIMIT_NOTE, DoneReader, Feed, Outcome, hard_patience
from rlvr.sandbox.code.running.output import Sink, tail
from rlvr.sandbox.code.running.pump import PIPE_BYTES, Child, pump
from rlvr.sandbox.code.running.runner import Supervisor, tree_cpu_s


def run_stdin_test(
    sup: Supervisor,
    stdin: bytes,
    time_s: float | None,
    budget_s: float | None = None,
    graded: dict[str, Any] | None = None,
    shared: bool = False,
) -> Outcome:
    """One stdin test: in the submission's runner when ``shared`` and the sandbox can hold one
    (isolated, a warm language, an input small enough for a memory file), else in a fresh
    process (``Supervisor.run_stdin``)."""
    if shared and sup.isolated and sup.language.warm and len(stdin) <= sup.limits.file_kb << 10:
        return _run_in_runner(sup, stdin, time_s, budget_s, graded, bool(graded and graded.get("system_exit")))
    return sup.run_stdin(stdin, time_s, budget_s, graded)


def _run_in_runner(
    sup: Supervisor,
    stdin: bytes,
    time_s: float | None,
    budget_s: float | None,
    graded: dict[str, Any] | None,
    system_exit: bool,
) -> Outcome:
    """One stdin test in the submission's stdin runner (``python_stdin_runner``), held to
    the same clocks and caps as a fresh process: its CPU is the sandbox's from the moment
    the input is written to the runner's ``D`` (read by the supervisor, never reported by
    the program), its output what reached stdout before that. A runner that dies, runs out
    of a limit or breaks the channel takes this test with it and is replaced for the next
    one. The runner lives only as long as this sandbox: no state crosses submissions."""
    limit = time_s or sup.limits.time_s
    wall_s = sup.wall_s(time_s)
    if sup.stdin_child is None:
        path = os.path.join(sup.prog_dir, sup.language.source)
        sup.stdin_child = sup.spawn(
            lambda: (python_streams(sup.isolated), python_stdin_runner(path, system_exit)),
            step="runner",
            channels=True,
        )
    child = sup.stdin_child
    outcome, stdout, stderr, done = Outcome(), sup.kept_stdout(graded), tail(), DoneReader()
    sup.calls_cpu = None
    cpu_before, oom_before = sup.counters()
    if sup.cgroup is None:
        cpu_before = sup.cpu_s(child)
    child.cpu_base = tree_cpu_s(child.pid)  # its earlier tests' CPU is theirs
    child.start = time.monotonic()
    hard_end = child.start + budget_s if budget_s is not None else float("inf")
    answered = pump(
        child,
        outcome,
        stdout,
        stderr,
        sup.reap,
        sup.cpu_s,
        lambda: min(child.start + wall_s, hard_end),
        lambda: cpu_before + limit,
        Feed(struct.pack("!Q", len(stdin)) + stdin),
        "to_child",
        done,
        patience=lambda: hard_patience(BUSY_PATIENCE * wall_s, child.start + wall_s, hard_end),
    )
    if answered and done.status is not None and _drain(child, outcome, stdout, stderr):
        outcome.wall_ms = (time.monotonic() - child.start) * 1000
        outcome.cpu_ms = (sup.cpu_s(child) - cpu_before) * 1000
        outcome.exit_code = done.status
        if outcome.cpu_ms >= limit * 1000:
            outcome.status = "tle"
            outcome.notes.append("cpu time limit")
        elif sup.cgroup is not None and sup.cgroup.oom_kills() > oom_before:
            outcome.status = "mle"
        elif done.status != 0:
            outcome.status = "re"
        return outcome
    if outcome.status == "tle" and time.monotonic() >= hard_end:
        outcome.notes.append(TOTAL_LIMIT_NOTE)
    sup.classify(child, outcome, limit, cpu_before, oom_before)
    if answered and outcome.status == "ok":  # something other than ``D`` + status arrived
        outcome.status = "re"
        outcome.error = "the program wrote to the stdin runner's channel"
    sup.close_child(child)
    sup.stdin_child = None
    sup.kill_everything(child)
    sup.reset_scratch()
    return outcome


def _drain(child: Child, outcome: Outcome, stdout: Sink, stderr: Sink) -> bool:
    """Read what the runner wrote to stdout and stderr before its ``D``: all of it is in the
    pipes by then (it flushed first), so exactly the bytes there now, never more (a thread
    still writing cannot keep the supervisor here). False when that overflows a cap."""
    for key, sink in (("stdout", stdout), ("stderr", stderr)):
        fd = child.fds[key]
        waiting = _pipe_bytes(fd) if fd is not None else 0
        while waiting > 0:
            chunk = os.read(fd, min(waiting, PIPE_BYTES))
            if not chunk:
                break
            waiting -= len(chunk)
            if not sink.add(chunk) and key == "stdout":
                outcome.status = "ole"
                outcome.notes.append("stdout limit")
                outcome.stdout = stdout.value()
                return False
    outcome.stdout, outcome.stderr = stdout.value(), stderr.value()
    return True


def _pipe_bytes(fd: int) -> int:
    """How many bytes a pipe holds now (``FIONREAD``)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0
