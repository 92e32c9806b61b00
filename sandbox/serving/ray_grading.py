"""Grading on a Ray cluster: one grading actor per core, the same verdicts as in process.

Each ``GraderActor`` holds a ``GradingService`` (its warm math workers and code judge), so a
verdict on the cluster comes from exactly the function that grades in process. ``RayGrader``
cuts a batch into chunks and runs them through ``rlvr.sandbox.serving.ray_dispatch.ordered_map``: at most
``in_flight`` chunks per actor outstanding (back-pressure: a slow cluster slows the caller, it
never queues the whole batch), verdicts back in input order, and a chunk whose actor or node
dies sent again; its verdicts come from the first attempt that returns, so nothing is lost and
nothing is graded twice in the answer. Ray is imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.sandbox.service import BadItem, GradingService, Item, parse_item
from rlvr.sandbox.serving.ray_dispatch import DispatchStats, kill_actors, ordered_map, start_actors
from rlvr.sandbox.verdict import Verdict

CHUNK_ITEMS = 128
IN_FLIGHT_PER_ACTOR = 2


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached; the message says what to do."""


def connect(address: str | None = None) -> dict[str, Any]:
    """Join a Ray cluster and say how: ``address`` (``ray://...``, ``host:port``) or, when None or
    ``auto``, ``RAY_ADDRESS``, else a cluster already running on this machine, else a new local one."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable("Ray is not installed: pip install 'ray==2.60.0'") from exc
    if ray.is_initialized():
        return {"address": "connected", "started_local": False}
    target = address if address not in (None, "", "auto") else os.environ.get("RAY_ADDRESS")
    if target and not _reachable(target):
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {target!r}; start one with `ray start --head` or fix --ray / RAY_ADDRESS"
        )
    try:
        if target:
            ray.init(address=target, log_to_driver=False, logging_level="ERROR")
            return {"address": target, "started_local": False}
        try:
            ray.init(address="auto", log_to_driver=False, logging_level="ERROR")
            return {"address": "auto", "started_local": False}
        except ConnectionError:
            ray.init(log_to_driver=False, logging_level="ERROR")
            return {"address": "local", "started_local": True}
    except ConnectionError as exc:
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {target!r} ({exc}); start one with `ray start --head` or fix --ray"
        ) from exc


def _reachable(address: str, timeout: float = 3.0) -> bool:
    """Is anything listening at ``[ray://]host:port``? (``ray.init`` itself retries for minutes.)"""
    import socket

    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return True  # not host:port: let Ray interpret it
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


class GraderActor:
    """One grading service on one Ray worker (wrapped with ``ray.remote`` by ``RayGrader``)."""

    def __init__(self, options: dict[str, Any]):
        self.service = GradingService(**options)
        self.service.math.start()

    def grade(self, raw_items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Wire rows in, verdict dicts out, in order; a row that cannot be read is ``bad_input``."""
        parsed: list[Any] = []
        for index, raw in enumerate(raw_items):
            try:
                parsed.append(parse_item(raw, index))
            except BadItem as exc:
                parsed.append(exc)
        items = [p for p in parsed if not isinstance(p, BadItem)]
        verdicts = iter(self.service.grade(items))
        return [(Verdict.bad_input(str(p)) if isinstance(p, BadItem) else next(verdicts)).to_dict() for p in parsed]

    def where(self) -> dict[str, Any]:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def close(self) -> None:
        self.service.close()


class RayGrader:
    """Spread grading over ``actors`` Ray actors (default: one per CPU in the cluster)."""

    def __init__(
        self,
        actors: int | None = None,
        *,
        address: str | None = None,
        cpus_per_actor: float = 1.0,
        chunk_items: int = CHUNK_ITEMS,
        in_flight: int = IN_FLIGHT_PER_ACTOR,
        workers: int = 1,
        math_timeout: float = 1.0,
        code_limits: Any = None,
        unsafe: bool = False,
        shards: int = 1,
        test_details: bool = False,
    ):
        """``test_details`` keeps the judge's failure details (they quote hidden expected values):
        off for rewards, on for offline grading (``rlvr grade --ray``)."""
        import ray

        connect(address)
        if actors is None:
            actors = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_actor))
        options = {
            "workers": workers,
            "math_timeout": math_timeout,
            "code_limits": code_limits,
            "unsafe": unsafe,
            "shards": shards,
            "test_details": test_details,
        }
        self.actors = start_actors(GraderActor, actors, {"num_cpus": cpus_per_actor}, options)
        self.chunk_items = max(1, chunk_items)
        self.in_flight = max(1, in_flight)
        self.stats = DispatchStats()

    def placement(self) -> list[dict[str, Any]]:
        import ray

        return ray.get([a.where.remote() for a in self.actors])

    def grade_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Verdict dicts for wire rows (``{"kind", "completion", "answer" | "tests", ...}``), in order."""
        chunks = [(list(rows[i : i + self.chunk_items]),) for i in range(0, len(rows), self.chunk_items)]
        return [row for chunk in ordered_map(self.actors, "grade", chunks, self.in_flight, self.stats) for row in chunk]

    def grade(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        return [Verdict.from_dict(d) for d in self.grade_rows(rows)]

    def grade_items(self, items: Sequence[Item]) -> list[Verdict]:
        """The ``client`` interface of the TRL / verl / OpenRLHF adapters (``rlvr.sandbox.serving.rewards``):
        ``trl_reward(client=RayGrader())``, ``compute_score_batch(..., client=grader)``."""
        return self.grade([{"id": it.id, "kind": it.kind, "completion": it.completion, **it.payload} for it in items])

    def close(self) -> None:
        kill_actors(self.actors)
        self.actors = []
