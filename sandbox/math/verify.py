"""Public math verifier: ``verify_math`` and ``verify_math_batch``.

Flow for one item: extract the final answer (linear time), normalise it and try the exact fast
path (integers, fractions, decimals, text): in the caller's thread, or for a large batch in
shard processes, one per core (``rlvr.sandbox.math.shards``). Only answers that need sympy go to an
isolated worker process, which is killed if it overruns the deadline. The same function
and settings serve training rewards and evaluation grades.

The deadline (``timeout``) is CPU time of the worker process, not wall time: an RL node grades
beside a trainer and an inference engine, and a verdict must not depend on how busy the machine
is. The worker's own timer stops a slow comparison at ``SOFT_FRACTION`` of the budget (a
``timeout`` verdict, no restart); the caller kills a worker that reaches the whole budget, or
the wall-clock backstop (``rlvr.sandbox.pool.backstop``, ten times the budget plus 5 s) if it is
stuck without using CPU. Starting and warming a worker are never charged to an item: the budget
starts when the worker picks the request up, and a comparison a still-cold worker could not
finish is retried there on a fresh budget (``rlvr.sandbox.math.worker``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rlvr.sandbox.math.policy import GoldSpec, MathPolicy, resolve_policy
from rlvr.sandbox.math.prepare import Pending, gold_spec, is_literal_number, make_verdict, prepare, prepare_item
from rlvr.sandbox.math.shards import MathShards, default_shards
from rlvr.sandbox.pool import Deadline, WorkerCrashed, WorkerPool, WorkerTimeout, backstop
from rlvr.sandbox.process_wide import ProcessWide
from rlvr.sandbox.verdict import UNVERIFIABLE_REASONS, Verdict

__all__ = ["MathGrader", "default_grader", "gold_spec", "is_literal_number", "verify_math", "verify_math_batch"]

DEFAULT_TIMEOUT = 1.0
SOFT_FRACTION = 0.7
#: CPU budget of the one-off warm-up call per worker (parsing the warm-up corpus)
WARM_CPU_S = 120.0
SYMBOLIC_CACHE = 65536


class MathGrader:
    """Grades math answers with a warm pool of ``workers`` isolated symbolic processes.

    ``shards`` processes (default: one per core this process may use on 4 or more cores, else
    1 = the caller's thread only) read answers out of large batches in parallel. Use one grader per process
    (``default_grader()`` is shared); it is thread-safe. ``timeout`` is each symbolic comparison's
    budget in CPU seconds of its worker (see the module docstring).

    ``verify(completion, answer, **options)`` grades one completion (the options of
    ``verify_math``), ``verify_batch(items, **options)`` many ``{"completion", "answer", ...}``
    items. Workers start on first use; ``close()`` stops them, and a ``with MathGrader(...) as
    grader:`` block closes it on the way out::

        with MathGrader(workers=2, timeout=2.0) as grader:
            grader.verify(r"\boxed{4}", "4").correct                           # True
            [v.reason for v in grader.verify_batch([{"completion": "7", "answer": "8"}])]  # ['wrong_answer']
    """

    def __init__(self, workers: int | None = None, timeout: float = DEFAULT_TIMEOUT, shards: int | None = None):
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if shards is not None and shards < 1:
            raise ValueError("shards must be at least 1")
        self.workers = workers or min(4, os.cpu_count() or 1)
        self.timeout = timeout
        self.shards = MathShards(shards or default_shards())
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()
        # Settled symbolic answers by request: RL groups repeat the same answer to the same
        # problem many times, and sympy is where the time goes. Timeouts and errors are not kept.
        self._symbolic: OrderedDict[str, dict[str, Any]] = OrderedDict()

    @property
    def pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is not None and self._pool.inherited:
                self._pool = None  # forked: the parent's workers are not ours to use
            if self._pool is None:
                self._pool = WorkerPool("rlvr.sandbox.math.worker", self.workers, replacement_args=("--no-warm",))
            return self._pool

    def start(self) -> None:
        """Begin starting the workers without waiting for them (they import sympy meanwhile)."""
        self.pool  # the property spawns the pool

    def warm_up(self) -> None:
        """Start every worker and let it finish warming its parser caches (optional)."""
        self.pool.warm_up()
        self.pool.map([{"warm": True}] * self.workers, Deadline.cpu(WARM_CPU_S))
        self.shards.warm_up()

    def close(self) -> None:
        """Stop the worker and shard processes (a later call starts them again)."""
        self.shards.close()
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def __enter__(self) -> "MathGrader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- one item ------------------------------------------------------------------------
    def _finish(
        self, response: dict[str, Any] | Exception, extracted: str | None, prepared_ms: float, timeout: float
    ) -> Verdict:
        now = time.perf_counter()
        if isinstance(response, WorkerTimeout):
            waited_s = response.wall_s if response.wall_s is not None else timeout
            return make_verdict(
                False, "timeout", extracted, now, timeout_detail(response, timeout), prepared_ms + waited_s * 1000
            )
        if isinstance(response, Exception):
            return make_verdict(False, "grader_error", extracted, now, f"worker crashed: {response}", prepared_ms)
        detail = response.get("detail", "")
        worker_ms = float(response.get("_elapsed_ms", 0.0))
        return make_verdict(
            bool(response["correct"]),
            response["reason"],
            extracted,
            now,
            f"symbolic: {detail}",
            prepared_ms + worker_ms,
        )

    def verify(
        self,
        completion: str,
        answer: "str | GoldSpec | Mapping[str, Any]",
        *,
        policy: "str | MathPolicy | None" = None,
        timeout: float | None = None,
        answer_type: str | None = None,
        tolerance: float | None = None,
        multiple: bool = False,
        **options: Any,
    ) -> Verdict:
        """Grade one completion against a gold answer with this grader's pool and timeout; the
        options are ``verify_math``'s (``policy``, ``timeout``, gold declarations, policy fields)."""
        start = time.perf_counter()
        resolved = resolve_policy(policy, **options)
        gold = gold_spec(answer, answer_type=answer_type, tolerance=tolerance, multiple=multiple)
        deadline = timeout or self.timeout
        done, request, extracted = prepare(completion, gold, resolved, start)
        if done is not None:
            return done
        assert request is not None
        request["soft_timeout"] = deadline * SOFT_FRACTION
        prepared_ms = (time.perf_counter() - start) * 1000
        return self._finish(self._call(request, deadline), extracted, prepared_ms, deadline)

    def _call(self, request: dict[str, Any], cpu_s: float) -> dict[str, Any] | Exception:
        """One symbolic request under a budget of ``cpu_s`` seconds of the worker's CPU time."""
        try:
            return self.pool.call(request, Deadline.cpu(cpu_s))
        except (WorkerTimeout, WorkerCrashed) as exc:
            return exc

    def _call_cached(self, key: str, request: dict[str, Any], deadline: float) -> dict[str, Any] | Exception:
        with self._lock:
            hit = self._symbolic.get(key)
            if hit is not None:
                self._symbolic.move_to_end(key)
                return {**hit, "_elapsed_ms": 0.0}
        response = self._call(request, deadline)
        if isinstance(response, dict) and response.get("reason") not in UNVERIFIABLE_REASONS:
            with self._lock:
                self._symbolic[key] = response
                if len(self._symbolic) > SYMBOLIC_CACHE:
                    self._symbolic.popitem(last=False)
        return response

    # ---- many items ----------------------------------------------------------------------
    def verify_batch(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        policy: "str | MathPolicy | None" = None,
        timeout: float | None = None,
        **options: Any,
    ) -> list[Verdict]:
        """Grade many ``{"completion", "answer", ...}`` items; verdicts come back in order.

        An item may carry its own ``policy``, ``answer_type``, ``tolerance`` and ``multiple``.
        """
        deadline = timeout or self.timeout
        soft = deadline * SOFT_FRACTION
        base = resolve_policy(policy, **options)
        items = items if isinstance(items, list) else list(items)
        results: list[Verdict | None] = [None] * len(items)
        pending: list[tuple[int, Future, Pending]] = []
        asked: dict[str, Future] = {}  # identical requests in one batch share one worker call
        # Items that need sympy go to the pool as soon as they are found, so workers grade
        # while the rest are still being extracted and fast-pathed.
        with ThreadPoolExecutor(max_workers=self.workers) as dispatch:

            def settle(index: int, outcome: Verdict | Pending) -> None:
                if isinstance(outcome, Pending):
                    key = json.dumps(outcome.request, sort_keys=True)
                    if key not in asked:
                        asked[key] = dispatch.submit(self._call_cached, key, outcome.request, deadline)
                    pending.append((index, asked[key], outcome))
                else:
                    results[index] = outcome

            if self.shards.wanted(len(items)):
                for offset, outcomes in self.shards.prepare(items, base, soft):
                    for k, outcome in enumerate(outcomes):
                        settle(offset + k, outcome)
            else:
                for index, item in enumerate(items):
                    settle(index, prepare_item(item, base, soft))
            for index, future, job in pending:
                results[index] = self._finish(future.result(), job.extracted, job.prepared_ms, deadline)
        return results  # type: ignore[return-value]


def timeout_detail(stopped: WorkerTimeout, cpu_s: float) -> str:
    """Which limit stopped the worker: its CPU budget, or the wall-clock backstop (a worker
    that was starved or stuck rather than busy), and what it had used by then."""
    if stopped.cpu_s is None:
        return f"no verdict within the {backstop(cpu_s):g}s wall-clock backstop (not started on); worker killed"
    used = f"{stopped.cpu_s:.2f}s of CPU" + (f" in {stopped.wall_s:.2f}s" if stopped.wall_s is not None else "")
    if stopped.clock == "cpu":
        return f"no verdict within the {cpu_s:g}s CPU budget (used {used}); worker killed"
    return f"no verdict within the {backstop(cpu_s):g}s wall-clock backstop (used {used}); worker killed"


_default = ProcessWide(lambda: MathGrader())


def default_grader() -> MathGrader:
    """The process-wide grader used by ``verify_math`` (created on first use)."""
    return _default.get()


def verify_math(completion: str, answer: "str | GoldSpec | Mapping[str, Any]", **options: Any) -> Verdict:
    """Grade one completion against a gold answer.

    Options: ``policy`` (preset name or ``MathPolicy``), ``timeout`` (CPU seconds the grading
    worker may use, default 1; a wall-clock backstop of ten times that plus 5 s stops a worker
    that is stuck), ``answer_type``, ``tolerance``, ``multiple`` (gold declarations), and
    any ``MathPolicy`` field as an override (e.g. ``extract=("boxed",)``).
    """
    return default_grader().verify(completion, answer, **options)


def verify_math_batch(items: Iterable[Mapping[str, Any]], **options: Any) -> list[Verdict]:
    """Grade many items across the worker pool; see ``MathGrader.verify_batch``."""
    return default_grader().verify_batch(items, **options)
