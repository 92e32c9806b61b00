"""A pool of killable worker processes with hard per-call deadlines.

Why not ``multiprocessing`` or signals: a deadline must hold when the caller is any thread, an
asyncio loop, a daemonic pool worker or a Ray actor, and it must *stop* the work, not abandon
it. Each worker here is a fresh interpreter started with ``subprocess.Popen`` (allowed from
daemonic processes and threads), talks length-prefixed JSON over pipes, and is SIGKILLed, reaped
and replaced when a call overruns. The caller waits with ``select``, which works in any thread.

A call's deadline is either wall-clock seconds (a plain number: for callers whose workers enforce
their own limits, such as the code judge) or a ``Deadline`` with a CPU budget: seconds of CPU
time the worker process itself uses for the call, read from the kernel's per-process CPU clock
while the caller waits, plus a wall-clock backstop several times larger. A budget in CPU time is
what makes verdicts independent of the machine's load: a worker descheduled by a busy trainer is
not killed for time it never got, one that spins is killed as soon as it has used its budget,
and one that is stuck without using CPU at all is killed at the backstop. Waiting for a worker
to start (import, warm up) is never part of any call's budget.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.sandbox.wire import (
    MAX_MESSAGE,
    Deadline,
    WorkerCrashed,
    WorkerTimeout,
    as_deadline,
    backstop,
    process_cpu_s,
    read_message,
    write_message,
)

__all__ = [
    "MAX_MESSAGE",
    "Deadline",
    "WorkerCrashed",
    "WorkerPool",
    "WorkerTimeout",
    "backstop",
    "process_cpu_s",
    "read_message",
    "renew_budget",
    "serve",
    "write_message",
]

#: The caller re-reads a loaded worker's CPU clock at least this far apart (it sleeps for the
#: budget still left, which shrinks as a starved worker advances slowly).
MIN_POLL_S = 0.005
#: The key of the message a worker sends as it picks a request up, and again each time it
#: starts a fresh budget for it (``renew_budget``): its own CPU clock at that moment.
ACK = "_picked_cpu_s"
#: Fresh budgets a call may be granted after the first (``renew_budget``); more are ignored.
MAX_RENEWALS = 4


class Worker:
    """One worker process running ``python -m <module>``."""

    def __init__(
        self, module: str, env: dict[str, str] | None = None, args: tuple[str, ...] = (), cwd: str | None = None
    ):
        self.module = module
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.ready = False
        self.calls = 0

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        hello = read_message(self.rfd, time.monotonic() + timeout)
        if hello.get("ready") is not True:
            raise WorkerCrashed(f"unexpected hello {hello!r}")
        self.ready = True

    def cpu_s(self) -> float | None:
        """This worker's CPU seconds so far (None where the platform cannot tell)."""
        return process_cpu_s(self.proc.pid)

    def call(self, request: dict[str, Any], timeout: float | Deadline) -> dict[str, Any]:
        """Send one request and wait for its answer under ``timeout`` (wall seconds or a
        ``Deadline``); ``_elapsed_ms`` is the time from the worker picking the request up.

        The CPU budget counts from the worker's acknowledgement (``ACK``, sent as it picks the
        request up), so an idle warm-up step it was finishing is not charged to the call; the
        wall clock counts from the request, so a worker stuck before the ACK is stopped too.
        """
        clock = _CallClock(as_deadline(timeout), time.monotonic())
        write_message(self.wfd, request)
        self.calls += 1
        try:
            while True:
                if clock.deadline.cpu_s is not None and clock.cpu_at is not None:
                    self._await_answer(clock)
                response = read_message(self.rfd, clock.wall_end)
                if ACK not in response:
                    break
                clock.acknowledged(float(response[ACK]))
        except WorkerTimeout as exc:
            if exc.wall_s is not None:
                raise
            raise WorkerTimeout("wall deadline", "wall", self._used(clock), time.monotonic() - clock.start) from None
        response["_elapsed_ms"] = (time.monotonic() - (clock.picked_at or clock.start)) * 1000
        return response

    def _used(self, clock: _CallClock) -> float | None:
        """CPU seconds the worker has used on its current budget (wall seconds where the
        platform cannot read its CPU clock); None before it picked the request up."""
        if clock.cpu_at is None or clock.budget_at is None:
            return None
        now = self.cpu_s()
        return time.monotonic() - clock.budget_at if now is None else now - clock.cpu_at

    def _await_answer(self, clock: _CallClock) -> None:
        """Wait until a message starts to arrive; ``WorkerTimeout`` once the worker has used its
        CPU budget or the wall clock reaches the backstop, whichever comes first.

        Each wait lasts as long as the budget left, the least the worker needs to use it up, so
        an idle machine costs one ``select`` and a loaded one a few re-reads of the CPU clock.
        """
        budget = clock.deadline.cpu_s or 0.0
        while True:
            used = self._used(clock) or 0.0
            now = time.monotonic()
            over = "cpu" if used >= budget else "wall" if now >= clock.wall_end else ""
            if over:
                if select.select([self.rfd], [], [], 0)[0]:
                    return  # it answered in time; we noticed late
                raise WorkerTimeout(f"{over} deadline", over, used, now - clock.start)
            if select.select([self.rfd], [], [], min(clock.wall_end - now, max(budget - used, MIN_POLL_S)))[0]:
                return

    def shutdown(self, grace: float = 2.0) -> None:
        """Close the worker's input so it exits on its own (cleaning up its children); kill it
        if it has not exited within ``grace`` seconds."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=grace)
        except (subprocess.TimeoutExpired, OSError):
            pass
        self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self.proc.wait()


class _CallClock:
    """Where one call's deadline stands. ``picked_at``: when the worker picked the request up;
    ``cpu_at``/``budget_at``: its CPU clock and the wall clock when its current CPU budget
    began; ``wall_end``: the wall-clock limit, from the request and, with a CPU budget, renewed
    with the budget (a worker that renews is making progress)."""

    def __init__(self, deadline: Deadline, start: float):
        self.deadline = deadline
        self.start = start
        self.wall_end = start + deadline.wall_s
        self.picked_at: float | None = None
        self.budget_at: float | None = None
        self.cpu_at: float | None = None
        self.renewals = 0

    def acknowledged(self, worker_cpu: float) -> None:
        """The worker picked the request up, or asked for a fresh budget (``renew_budget``)."""
        now = time.monotonic()
        if self.picked_at is None:
            self.picked_at = now
        elif self.deadline.cpu_s is None or self.renewals >= MAX_RENEWALS:
            return
        else:
            self.renewals += 1
        self.budget_at, self.cpu_at = now, worker_cpu
        if self.deadline.cpu_s is not None:
            self.wall_end = max(self.wall_end, now + self.deadline.wall_s)


class WorkerPool:
    """``size`` workers; ``call`` runs one request on an idle worker under a hard deadline.

    Thread-safe. A worker that overruns or dies is killed, reaped and replaced at once, so a
    hostile input costs one worker restart and never blocks other calls.
    """

    def __init__(
        self,
        module: str,
        size: int = 2,
        startup_timeout: float = 60.0,
        env: dict[str, str] | None = None,
        replacement_args: tuple[str, ...] = (),
        cwd: str | None = None,
    ):
        """``replacement_args`` go to workers started to replace a dead one (for example, to
        skip a warm-up that would compete with a loaded pool)."""
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.module = module
        self.size = size
        self.startup_timeout = startup_timeout
        self.env = env
        self.cwd = cwd
        self.replacement_args = replacement_args
        self.restarts = 0
        self.spawn_error: str | None = None
        self.owner_pid = os.getpid()
        self._idle: queue.LifoQueue[Worker] = queue.LifoQueue()
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        # Workers die with the thread that spawned them (PR_SET_PDEATHSIG is per thread), so
        # one long-lived spawner thread starts them all, whichever thread asks.
        self._spawn_requests: queue.Queue[str] = queue.Queue()
        self._spawner = threading.Thread(target=self._spawn_loop, name=f"pool-spawner-{module}", daemon=True)
        self._spawner.start()
        for _ in range(size):
            self._spawn()

    def _spawn_loop(self) -> None:
        failures = 0
        while request := self._spawn_requests.get():
            try:
                worker = Worker(
                    self.module, self.env, self.replacement_args if request == "replacement" else (), self.cwd
                )
            except OSError as exc:
                failures += 1
                self.spawn_error = f"cannot start {self.module}: {exc}"
                if failures < 3:
                    time.sleep(0.2 * failures)
                    self._spawn_requests.put(request)
                continue
            failures = 0
            self.spawn_error = None
            with self._lock:
                if self._closed:
                    worker.kill()
                    continue
                self._all.add(worker)
            self._idle.put(worker)

    def _spawn(self, replacement: bool = False) -> None:
        self._spawn_requests.put("replacement" if replacement else "initial")

    def _retire(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.restarts += 1
            closed = self._closed
        if not closed:
            self._spawn(replacement=True)

    def _checkout(self) -> Worker:
        """An idle worker; fails fast when workers cannot be started at all."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                worker = self._idle.get(timeout=0.1)
                if worker.proc.poll() is not None:  # died while idle (killed from outside)
                    self._retire(worker)
                    continue
                return worker
            except queue.Empty:
                with self._lock:
                    alive = len(self._all)
                if self.spawn_error and not alive:
                    raise WorkerCrashed(self.spawn_error)
                if time.monotonic() > deadline and not alive:
                    raise WorkerCrashed(f"no {self.module} worker started within {self.startup_timeout:g}s")

    def warm_up(self) -> None:
        """Block until every worker has finished importing (optional; calls do it lazily)."""
        workers = []
        for _ in range(self.size):
            workers.append(self._checkout())
        try:
            for w in workers:
                w.wait_ready(self.startup_timeout)
        finally:
            for w in workers:
                self._idle.put(w)

    def call(self, request: dict[str, Any], timeout: float | Deadline, retry_crash: bool = True) -> dict[str, Any]:
        """Run one request; raises ``WorkerTimeout`` or ``WorkerCrashed`` (worker replaced).

        ``timeout``: wall-clock seconds, or a ``Deadline`` (a CPU budget with a wall backstop).
        The budget starts when the request is sent to a ready worker: waiting for an idle
        worker, or for a fresh one to finish starting, is not charged to the call.
        A worker that dies before answering (killed from outside, say) is replaced and the
        request is tried once more on a fresh worker; a second crash is reported.
        """
        if self._closed:
            raise RuntimeError("pool is closed")
        worker = self._checkout()
        try:
            worker.wait_ready(self.startup_timeout)
            response = worker.call(request, timeout)
        except TypeError:  # not JSON-serialisable: raised before a byte was written
            self._idle.put(worker)
            raise
        except (WorkerTimeout, WorkerCrashed, OSError, ValueError) as exc:
            self._retire(worker)
            if isinstance(exc, WorkerTimeout):
                raise
            if retry_crash:
                return self.call(request, timeout, retry_crash=False)
            raise WorkerCrashed(str(exc)) from exc
        self._idle.put(worker)
        return response

    def map(self, requests: list[dict[str, Any]], timeout: float | Deadline) -> list[dict[str, Any] | Exception]:
        """Run many requests concurrently, one per idle worker; errors are returned in place."""

        def one(req: dict[str, Any]) -> dict[str, Any] | Exception:
            try:
                return self.call(req, timeout)
            except (WorkerTimeout, WorkerCrashed) as exc:
                return exc

        if len(requests) <= 1:
            return [one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.size, len(requests))) as executor:
            return list(executor.map(one, requests))

    def pids(self) -> list[int]:
        with self._lock:
            return [w.proc.pid for w in self._all]

    @property
    def inherited(self) -> bool:
        """True in a forked child: the workers and spawner thread belong to the parent."""
        return os.getpid() != self.owner_pid

    def close(self) -> None:
        if self.inherited:  # never shut down the parent's workers from a forked child
            return
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
        self._spawn_requests.put("")
        for w in workers:
            w.shutdown()


#: The answer pipe while a request is being handled (for ``renew_budget``), else None.
_out_fd: int | None = None


def serve(handle, idle_steps: Any = None, on_exit: Any = None) -> None:
    """Worker main loop: read requests on stdin, answer on the original stdout.

    ``idle_steps`` is an optional iterator of warm-up steps run only while no request waits, so
    warming caches never delays readiness. A request that arrives during a step waits for it to
    end, then is acknowledged with this process's CPU clock (``ACK``): the caller counts the
    request's CPU budget from there, never the step's. Stray prints from libraries go to
    stderr so they cannot corrupt the protocol. The worker dies with its parent
    (PR_SET_PDEATHSIG) and exits on EOF.
    """
    global _out_fd
    _die_with_parent()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    in_fd = 0
    write_message(out_fd, {"ready": True})
    steps = iter(idle_steps) if idle_steps is not None else None
    while True:
        while steps is not None and not select.select([in_fd], [], [], 0)[0]:
            if next(steps, StopIteration) is StopIteration:
                steps = None
        try:
            request = read_message(in_fd)
        except WorkerCrashed:
            if on_exit is not None:
                on_exit()
            return
        write_message(out_fd, {ACK: time.process_time()})
        _out_fd = out_fd
        try:
            response = handle(request)
        finally:
            _out_fd = None
        write_message(out_fd, response)


def renew_budget() -> None:
    """From inside a request's ``handle``: start a fresh CPU budget for it (the caller grants
    ``MAX_RENEWALS`` at most). For work the request should not be charged for, such as a
    worker retrying with the caches a first, cold attempt has just built."""
    if _out_fd is not None:
        write_message(_out_fd, {ACK: time.process_time()})


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:
            os._exit(0)
    except OSError:
        pass
