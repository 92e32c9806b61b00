"""Grading worker process: runs the symbolic judge on requests from a ``WorkerPool``.

The parent enforces the hard deadline by killing this process once it has used its CPU budget
for the request (or at the wall-clock backstop). Inside, a soft CPU-time timer (``ITIMER_PROF``:
this process's CPU time, the clock the parent reads) ends most slow comparisons a little earlier
with a ``timeout`` verdict, which saves a restart. Both count CPU time, so neither depends on
the machine's load. Address space is capped so a blow-up ends in ``MemoryError`` here instead
of swapping the host.
"""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path
from typing import Any

from rlvr.sandbox.math.judge import judge, parse_gold
from rlvr.sandbox.math.policy import GoldSpec, MathPolicy
from rlvr.sandbox.pool import renew_budget, serve

MEMORY_LIMIT_BYTES = 2 * 1024**3
#: Parses (warm-up lines and requests) after which this worker's parser caches count as warm.
#: ANTLR builds its prediction cache (DFA) as it goes, so a fresh worker can spend a whole
#: budget on work a warm one never repeats (a physics gold took 0.6-1.1 s of CPU cold, 0.07 s
#: warm): until then a comparison that runs out of time is tried again (``handle``).
WARM_AFTER_PARSES = 150
#: Fresh budgets a comparison may get while the worker is cold (``rlvr.sandbox.pool.MAX_RENEWALS``
#: caps what the caller grants).
COLD_RETRIES = 3


class SoftTimeout(BaseException):
    """A ``BaseException`` so that sympy's many ``except Exception`` blocks cannot swallow it."""


_fired = False
_parses = 0


def _on_soft_timeout(signum: int, frame: Any) -> None:
    global _fired
    _fired = True
    raise SoftTimeout()


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Judge one request. A comparison that runs out of time while this worker's parser caches
    are still cold is judged again on a fresh budget (``renew_budget``), up to ``COLD_RETRIES``
    times: each try keeps the caches the last one built (but for a try whose interrupt a library
    swallowed: ``_forget_interrupted_work``), so the verdict is a warm worker's and warming up is
    never charged to the item."""
    if request.get("warm"):
        for _ in _WARM_UP:
            pass
        return {"warm": True}
    soft = float(request.get("soft_timeout") or 0)
    for tries in range(1, COLD_RETRIES + 2):
        cold = _parses < WARM_AFTER_PARSES
        answer = _judge_once(request, soft)
        if answer["reason"] != "timeout" or not cold or tries > COLD_RETRIES:
            break
        renew_budget()
    if answer["reason"] == "timeout" and tries > 1:
        answer["detail"] += f" ({tries} tries while this worker warmed up)"
    return answer


def _judge_once(request: dict[str, Any], soft: float) -> dict[str, Any]:
    global _fired, _parses
    timed_out = {"correct": False, "reason": "timeout", "detail": f"comparison stopped after {soft:g}s of CPU time"}
    _fired = False
    _parses += 1
    stopped_cleanly = False
    if soft > 0:
        signal.setitimer(signal.ITIMER_PROF, soft)
    try:
        gold = GoldSpec(**request["gold"])
        result = judge(request["answer"], gold, MathPolicy.from_dict(request["policy"]), symbolic=True)
        # A library may still have caught the interrupt (a bare ``except:``, or a ``gc`` callback
        # it landed in) and answered from half a computation; such an answer is not trusted.
        if _fired:
            return timed_out
        return {"correct": result.correct, "reason": result.reason, "detail": result.detail}
    except SoftTimeout:
        stopped_cleanly = True
        return timed_out
    except MemoryError:
        return {"correct": False, "reason": "grader_error", "detail": "memory limit exceeded"}
    except RecursionError:
        return {"correct": False, "reason": "unparseable", "detail": "nesting too deep"}
    except Exception as exc:  # a grader bug must become a verdict, never kill the worker
        return {"correct": False, "reason": "grader_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        if soft > 0:
            signal.setitimer(signal.ITIMER_PROF, 0)
        if _fired and not stopped_cleanly:
            _forget_interrupted_work()


def _forget_interrupted_work() -> None:
    """Empty the parse caches and sympy's after a comparison whose interrupt a library swallowed
    (a bare ``except:``, a ``gc`` callback): whatever it stored may come from half a computation,
    and a retry (or a later item with the same gold) answering from it would get a verdict no
    full computation gives. An interrupt that reached us left nothing: caches store only what
    returned. The ANTLR prediction cache that warm-up builds is not among these."""
    from rlvr.sandbox.math.symbolic import to_sympy
    from sympy.core.cache import clear_cache

    parse_gold.cache_clear()
    to_sympy.cache_clear()
    clear_cache()


def main() -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGPROF, _on_soft_timeout)
    import rlvr.sandbox.math.symbolic  # noqa: F401  (pay the sympy import before saying ready)

    # A replacement for a killed worker joins a busy pool: it warms up by working instead.
    serve(handle, idle_steps=None if "--no-warm" in sys.argv else _WARM_UP)


def _warm_parser():
    """Parse a corpus of typical answers while idle: ANTLR's prediction cache (DFA) is per
    process and a cold one makes the first few hundred parses several times slower."""
    from rlvr.sandbox.math.symbolic import to_sympy

    global _parses
    corpus = (Path(__file__).with_name("warmup_corpus.txt")).read_text(encoding="utf-8").splitlines()
    for text in corpus:
        try:
            to_sympy(text)
        except Exception:  # warm-up must never kill a worker
            pass
        _parses += 1
        yield
    to_sympy.cache_clear()


_WARM_UP = _warm_parser()

if __name__ == "__main__":
    main()
