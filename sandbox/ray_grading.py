"""Grading on a Ray cluster: one grading actor per core, the same verdicts as in process.

Each ``GraderActor`` holds a ``GradingService`` (its warm math workers and code judge), so a
verdict on the cluster comes from exactly the function that grades in process. ``RayGrader``
cuts a batch into chunks, keeps at most ``in_flight`` chunks per actor outstanding
(back-pressure: a slow cluster slows the caller, it never queues the whole batch), and puts
verdicts back in input order. A chunk whose actor or node dies is sent again, to a restarted or
another actor; a chunk's verdicts are taken from the first attempt that returns, so nothing is
lost and nothing is graded twice in the answer. Ray is imported only here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.service import BadItem, GradingService, parse_item
from sandbox.verdict import Verdict

CHUNK_ITEMS = 128
IN_FLIGHT_PER_ACTOR = 2
MAX_ATTEMPTS = 6


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


class GraderActor:
    """One grading service on one Ray worker (wrapped with ``ray.remote`` by ``RayGrader``)."""

    def __init__(self, options: dict[str, Any]):
        self.service = GradingService(**options)
        self.service.math.start()

    def grade(self, raw_items: list[dict[str, Any]], policy: str | None = None) -> list[dict[str, Any]]:
        """Wire rows in, verdict dicts out, in order; a row that cannot be read is ``bad_input``."""
        parsed: list[Any] = []
        for index, raw in enumerate(raw_items):
            if policy and raw.get("kind", "math") == "math" and "policy" not in raw and "tests" not in raw:
                raw = {**raw, "policy": policy}
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
    ):
        import ray

        self.connection = connect(address)
        if actors is None:
            actors = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_actor))
        options = {
            "workers": workers,
            "math_timeout": math_timeout,
            "code_limits": code_limits,
            "unsafe": unsafe,
            "shards": shards,
        }
        remote = ray.remote(num_cpus=cpus_per_actor, max_restarts=-1, max_task_retries=0)(GraderActor)
        self.actors = [remote.options(scheduling_strategy="SPREAD").remote(options) for _ in range(actors)]
        self.chunk_items = max(1, chunk_items)
        self.in_flight = max(1, in_flight)
        self.resent_chunks = 0

    def placement(self) -> list[dict[str, Any]]:
        import ray

        return ray.get([a.where.remote() for a in self.actors])

    def grade_rows(self, rows: Sequence[Mapping[str, Any]], policy: str | None = None) -> list[dict[str, Any]]:
        """Verdict dicts for wire rows (``{"kind", "completion", "answer" | "tests", ...}``), in order."""
        import ray
        from ray.exceptions import ObjectLostError, RayActorError

        chunks = [list(rows[i : i + self.chunk_items]) for i in range(0, len(rows), self.chunk_items)]
        results: list[list[dict[str, Any]] | None] = [None] * len(chunks)
        attempts = [0] * len(chunks)
        waiting = list(range(len(chunks)))[::-1]
        running: dict[Any, tuple[int, int]] = {}
        load = [0] * len(self.actors)
        while waiting or running:
            while waiting and len(running) < self.in_flight * len(self.actors):
                index = waiting.pop()
                actor = min(range(len(self.actors)), key=lambda a: (load[a], (a - attempts[index]) % len(load)))
                attempts[index] += 1
                running[self.actors[actor].grade.remote(chunks[index], policy)] = (index, actor)
                load[actor] += 1
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                index, actor = running.pop(ref)
                load[actor] -= 1
                try:
                    results[index] = ray.get(ref)
                except (RayActorError, ObjectLostError) as exc:
                    if attempts[index] >= MAX_ATTEMPTS:
                        raise RuntimeError(f"chunk {index} failed {attempts[index]} times on the cluster: {exc}")
                    self.resent_chunks += 1
                    time.sleep(0.2 * attempts[index])
                    waiting.append(index)
        return [row for chunk in results for row in chunk or ()]

    def grade(self, rows: Sequence[Mapping[str, Any]], policy: str | None = None) -> list[Verdict]:
        return [Verdict.from_dict(d) for d in self.grade_rows(rows, policy)]

    def close(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # an actor on a node already gone
                pass
        self.actors = []
