"""Run payloads on a set of Ray actors, results in input order, resent when an actor dies.

The one scheduling loop behind cluster grading, cluster evaluation and cluster populations: at
most ``in_flight`` calls per actor are outstanding (back-pressure), the least-loaded actor takes
the next payload, and a call whose actor or node died is sent again (to the restarted actor or
another one) up to ``max_attempts`` times. A payload's result is taken from the first attempt
that returns, so every payload yields exactly one result. Errors raised by the method itself
are not retried: they are bugs, and they propagate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MAX_ATTEMPTS = 6


def start_actors(cls: type, count: int, resources: dict[str, Any], *args: Any) -> list[Any]:
    """``count`` actors of ``cls`` spread over the nodes, restarted whenever they die."""
    import ray

    remote = ray.remote(**resources, max_restarts=-1, max_task_retries=0)(cls)
    return [remote.options(scheduling_strategy="SPREAD").remote(*args) for _ in range(count)]


def kill_actors(actors: Sequence[Any]) -> None:
    import ray

    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # its node is already gone
            pass


@dataclass
class DispatchStats:
    calls: int = 0
    resent: int = 0


def ordered_map(
    actors: Sequence[Any],
    method: str,
    payloads: Sequence[tuple],
    in_flight: int = 2,
    stats: DispatchStats | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> Iterator[Any]:
    """Yield ``actor.<method>(*payload)`` for every payload, in order."""
    import ray
    from ray.exceptions import ObjectLostError, RayActorError

    if not actors:
        raise ValueError("no actors to run on")
    stats = stats if stats is not None else DispatchStats()
    results: dict[int, Any] = {}
    attempts = [0] * len(payloads)
    waiting = list(range(len(payloads)))[::-1]
    running: dict[Any, tuple[int, int]] = {}
    load = [0] * len(actors)
    next_out = 0
    while next_out < len(payloads):
        while waiting and len(running) < in_flight * len(actors):
            index = waiting.pop()
            actor = min(range(len(actors)), key=lambda a: (load[a], (a - attempts[index]) % len(actors)))
            attempts[index] += 1
            stats.calls += 1
            running[getattr(actors[actor], method).remote(*payloads[index])] = (index, actor)
            load[actor] += 1
        if running and next_out not in results:
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                index, actor = running.pop(ref)
                load[actor] -= 1
                try:
                    results[index] = ray.get(ref)
                except (RayActorError, ObjectLostError) as exc:
                    if attempts[index] >= max_attempts:
                        raise RuntimeError(f"payload {index} failed {attempts[index]} times on the cluster: {exc}")
                    stats.resent += 1
                    time.sleep(0.2 * attempts[index])
                    waiting.append(index)
        while next_out in results:
            yield results.pop(next_out)
            next_out += 1
