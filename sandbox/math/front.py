"""Shard worker process: extraction and the exact fast path for a slice of a batch.

A ``MathGrader`` spreads large batches over these (one per core), so reading answers out of
long completions uses every core instead of the caller's one thread. Each item comes back as a
finished verdict or as the request the symbolic workers must judge; the worker never runs sympy,
so a slow comparison cannot stall a slice. Same code as in-process: ``prepare_item``.
"""

from __future__ import annotations

import resource
from typing import Any

from rlvr.sandbox.math.policy import MathPolicy
from rlvr.sandbox.math.prepare import Pending, prepare_item
from rlvr.sandbox.pool import serve

MEMORY_LIMIT_BYTES = 2 * 1024**3


def encode(outcome: Any) -> dict[str, Any]:
    """The wire form of ``prepare_item``'s result."""
    if isinstance(outcome, Pending):
        return {"s": outcome.request, "x": outcome.extracted, "ms": outcome.prepared_ms}
    return {"v": outcome.to_dict()}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    base = MathPolicy.from_dict(request["base"])
    soft = float(request["soft_timeout"])
    return {"out": [encode(prepare_item(item, base, soft)) for item in request["items"]]}


def main() -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ValueError, OSError):
        pass
    serve(handle)


if __name__ == "__main__":
    main()
