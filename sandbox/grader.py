"""``Grader``: the shape every batch grader shares, whatever it takes and returns.

``GradingService`` (parsed items -> verdicts), ``rlvr.harness.grading.EvalGrader`` ((problem,
completion) pairs -> verdicts), ``RayGrader`` (wire rows -> verdicts), its ``GraderActor`` and
``RewardClient`` (wire rows -> verdict dicts) all grade a batch as one call: one result per
item, in the items' order. Code that only needs that (a rollout worker, a reward adapter) asks
for a ``Grader`` and takes any of them. The server's ``grade`` is not one: it is a coroutine
with a request deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

ItemT = TypeVar("ItemT", contravariant=True)
VerdictT = TypeVar("VerdictT", covariant=True)


@runtime_checkable
class Grader(Protocol[ItemT, VerdictT]):
    """Grades a batch: one result per item, in order (the items may be graded in parallel)."""

    def grade(self, items: Sequence[ItemT], /) -> list[VerdictT]: ...
