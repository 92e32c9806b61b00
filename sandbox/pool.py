"""A pool of killable worker processes with hard per-call deadlines.

Why not ``multiprocessing`` or signals: a deadline must hold when the caller is any thread, an
asyncio loop, a daemonic pool worker or a Ray actor, and it must *stop* the work, not abandon
it. Each worker here is a fresh interpreter started with ``subprocess.Popen`` (allowed from
daemonic processes and threads), talks length-prefixed JSON over pipes, and is SIGKILLed, reaped
and replaced when a call overruns. The caller waits with ``select``, which works in any thread.
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

from sandbox.wire import MAX_MESSAGE, WorkerCrashed, WorkerTimeout, read_message, write_message

__all__ = ["MAX_MESSAGE", "WorkerCrashed", "WorkerPool", "WorkerTimeout", "read_message", "serve", "write_message"]


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

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its answer; ``_elapsed_ms`` is the round trip."""
        start = time.monotonic()
        write_message(self.wfd, request)
        self.calls += 1
        response = read_message(self.rfd, start + timeout)
        response["_elapsed_ms"] = (time.monotonic() - start) * 1000
        return response

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

    def call(self, request: dict[str, Any], timeout: float, retry_crash: bool = True) -> dict[str, Any]:
        """Run one request; raises ``WorkerTimeout`` or ``WorkerCrashed`` (worker replaced).

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

    def map(self, requests: list[dict[str, Any]], timeout: float) -> list[dict[str, Any] | Exception]:
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


def serve(handle, idle_steps: Any = None, on_exit: Any = None) -> None:
    """Worker main loop: read requests on stdin, answer on the original stdout.

    ``idle_steps`` is an optional iterator of warm-up steps run only while no request waits, so
    warming caches never delays readiness or a request. Stray prints from libraries go to
    stderr so they cannot corrupt the protocol. The worker dies with its parent
    (PR_SET_PDEATHSIG) and exits on EOF.
    """
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
        write_message(out_fd, handle(request))


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
