"""Spread the sympy-free half of math grading over one process per core.

Extraction and the exact fast path run in the caller's thread unless a batch is large enough to
pay for the pipe: then contiguous slices go to ``rlvr.sandbox.math.front`` workers, and each slice's
results are yielded as it finishes, so the symbolic workers start on its hard items while other
slices are still being read. A slice whose worker overruns its deadline or dies is retried item
by item; an item that still overruns gets a ``timeout`` verdict, one that still crashes a
``grader_error`` (our fault, never the model's): no item is lost and none is graded twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from rlvr.sandbox.math.policy import MathPolicy
from rlvr.sandbox.math.prepare import Pending, prepare_item
from rlvr.sandbox.pool import Deadline, WorkerCrashed, WorkerPool, WorkerTimeout
from rlvr.sandbox.verdict import Verdict
from rlvr.sandbox.version import MATH_VERIFIER

#: below this many items per shard a batch is cheaper to prepare in the caller's thread
MIN_ITEMS_PER_SHARD = 64
#: slices stay small enough that a retry after a crash is cheap and results stream back early
MAX_SLICE = 512
#: a slice's budget in CPU seconds of its shard (with the pool's wall-clock backstop, so a busy
#: machine does not turn a slow slice into timeouts): extraction is linear, so this is generous
#: for any honest input
SLICE_BASE_S = 10.0
SLICE_PER_ITEM_S = 0.05


#: on fewer cores the shards only compete with the symbolic workers and the caller (measured on
#: 2 cores: 0.89x of one shard), so the default there is the caller's thread
MIN_CORES_TO_SHARD = 4


def default_shards() -> int:
    cores = available_cores()
    return cores if cores >= MIN_CORES_TO_SHARD else 1


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def decode(wire: dict[str, Any]) -> Verdict | Pending:
    if "v" in wire:
        return Verdict.from_dict(wire["v"])
    return Pending(wire["s"], wire["x"], float(wire["ms"]))


class MathShards:
    """``size`` shard processes; ``prepare`` yields ``(offset, outcomes)`` per finished slice."""

    def __init__(self, size: int):
        self.size = size
        self._pool: WorkerPool | None = None

    @property
    def pool(self) -> WorkerPool:
        if self._pool is not None and self._pool.inherited:
            self._pool = None
        if self._pool is None:
            self._pool = WorkerPool("rlvr.sandbox.math.front", self.size)
        return self._pool

    def wanted(self, n_items: int) -> bool:
        return self.size > 1 and n_items >= 2 * MIN_ITEMS_PER_SHARD

    def warm_up(self) -> None:
        if self.size > 1:
            self.pool.warm_up()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _slices(self, n_items: int) -> list[tuple[int, int]]:
        per = min(MAX_SLICE, max(MIN_ITEMS_PER_SHARD, -(-n_items // (2 * self.size))))
        return [(i, min(i + per, n_items)) for i in range(0, n_items, per)]

    def _run(self, items: Sequence[Any], base: dict[str, Any], soft: float) -> list[Verdict | Pending]:
        request = {"base": base, "soft_timeout": soft, "items": list(items)}
        try:
            response = self.pool.call(request, Deadline.cpu(SLICE_BASE_S + SLICE_PER_ITEM_S * len(items)))
            return [decode(w) for w in response["out"]]
        except TypeError:  # an item holds Python objects (a MathPolicy, say): prepare it here
            return [prepare_item(item, MathPolicy.from_dict(base), soft) for item in items]
        except WorkerTimeout:
            if len(items) == 1:
                return [Verdict(False, 0.0, "timeout", None, 0.0, MATH_VERIFIER, "answer extraction overran; killed")]
        except WorkerCrashed as exc:
            if len(items) == 1:
                return [Verdict(False, 0.0, "grader_error", None, 0.0, MATH_VERIFIER, f"shard crashed: {exc}")]
        return [self._run([item], base, soft)[0] for item in items]

    def prepare(
        self, items: Sequence[Any], base: MathPolicy, soft: float
    ) -> Iterator[tuple[int, list[Verdict | Pending]]]:
        wire_base = base.to_dict()
        spans = self._slices(len(items))
        with ThreadPoolExecutor(max_workers=self.size) as executor:
            jobs = {executor.submit(self._run, items[lo:hi], wire_base, soft): lo for lo, hi in spans}
            for job in as_completed(jobs):
                yield jobs[job], job.result()
