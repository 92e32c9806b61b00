"""Admission of code items to the judges: one slot per judge, handed out round-robin by request.

Why the server schedules code items itself instead of queueing them inside the judge pool: only
here can it tell an item that waited (its request's deadline passed before a judge was free:
never run, a maskable verdict) from one that ran (it keeps its own limits and gets the verdict
the run gave). An item holds a slot exactly while it is on a judge, so ``busy`` never exceeds the
judges, and a request's deadline only ever bounds the time its items wait. Waiting items of
different requests take turns, so one request full of stalling programs delays another request
by at most one item's hold per judge, not by its whole batch.

Everything here runs on the event loop's thread (``release`` is called there too), so no lock.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from itertools import count


class JudgeSlots:
    """``size`` slots; ``acquire`` waits (until a deadline) for one, ``release`` hands it on."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError("at least one judge slot is needed")
        self.size = size
        self._free = size
        self._waiting: OrderedDict[int, deque[asyncio.Future[int]]] = OrderedDict()
        self._until: dict[int, float] = {}
        self._tokens = count(1)

    @property
    def busy(self) -> int:
        return len(self._until)

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, request: int, deadline: float, hold_s: float) -> int | None:
        """A slot token, or None when ``deadline`` (monotonic) passed first. ``hold_s`` is how
        long the holder may keep it (used only to tell callers when to retry)."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return self._occupy(hold_s)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(request, deque()).append(future)
        try:
            await asyncio.wait([future], timeout=max(0.0, deadline - time.monotonic()))
        except BaseException:
            self._withdraw(request, future)
            raise
        if future.done():
            self._until[future.result()] = time.monotonic() + hold_s
            return future.result()
        self._withdraw(request, future)
        return None

    def release(self, token: int) -> None:
        """Give the slot to the next waiting item, taking requests in turn."""
        self._until.pop(token, None)
        while self._waiting:
            request, queue = next(iter(self._waiting.items()))
            future = queue.popleft()
            if queue:
                self._waiting.move_to_end(request)
            else:
                del self._waiting[request]
            if not future.done():
                future.set_result(self._occupy(0.0))
                return
        self._free += 1

    def retry_after(self) -> int:
        """Seconds until a slot is expected to free up (for ``Retry-After``), 1 to 60."""
        if not self._until or self._free > 0:
            return 1
        soonest = min(self._until.values()) - time.monotonic()
        return max(1, min(60, math.ceil(soonest)))

    def _occupy(self, hold_s: float) -> int:
        token = next(self._tokens)
        self._until[token] = time.monotonic() + hold_s
        return token

    def _withdraw(self, request: int, future: asyncio.Future[int]) -> None:
        """Leave the queue; a slot handed over at the same moment is passed on, not lost."""
        queue = self._waiting.get(request)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[request]
        if future.done() and not future.cancelled():
            self.release(future.result())
        else:
            future.cancel()
