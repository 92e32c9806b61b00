"""Grading worker process: runs the symbolic judge on requests from a ``WorkerPool``.

The parent enforces the hard wall-clock deadline by killing this process. Inside, a soft
CPU-time timer (``ITIMER_PROF``, this process's own main thread) ends most slow comparisons a
little earlier with a ``timeout`` verdict, which saves a restart. Address space is capped so a
blow-up ends in ``MemoryError`` here instead of swapping the host.
"""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path
from typing import Any

from sandbox.math.judge import judge
from sandbox.math.policy import GoldSpec, MathPolicy
from sandbox.pool import serve

MEMORY_LIMIT_BYTES = 2 * 1024**3


class SoftTimeout(BaseException):
    """A ``BaseException`` so that sympy's many ``except Exception`` blocks cannot swallow it."""


_fired = False


def _on_soft_timeout(signum: int, frame: Any) -> None:
    global _fired
    _fired = True
    raise SoftTimeout()


def handle(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("warm"):
        for _ in _WARM_UP:
            pass
        return {"warm": True}
    global _fired
    soft = float(request.get("soft_timeout") or 0)
    timed_out = {"correct": False, "reason": "timeout", "detail": "comparison exceeded its time budget"}
    _fired = False
    if soft > 0:
        signal.setitimer(signal.ITIMER_PROF, soft)
    try:
        gold = GoldSpec(**request["gold"])
        result = judge(request["answer"], gold, MathPolicy.from_dict(request["policy"]), symbolic=True)
        # A library may still have caught the interrupt (a bare ``except:``) and answered from
        # half a computation; such an answer is not trusted.
        if _fired:
            return timed_out
        return {"correct": result.correct, "reason": result.reason, "detail": result.detail}
    except SoftTimeout:
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


def main() -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGPROF, _on_soft_timeout)
    import sandbox.math.symbolic  # noqa: F401  (pay the sympy import before saying ready)

    # A replacement for a killed worker joins a busy pool: it warms up by working instead.
    serve(handle, idle_steps=None if "--no-warm" in sys.argv else _WARM_UP)


def _warm_parser():
    """Parse a corpus of typical answers while idle: ANTLR's prediction cache (DFA) is per
    process and a cold one makes the first few hundred parses several times slower."""
    from sandbox.math.symbolic import to_sympy

    corpus = (Path(__file__).with_name("warmup_corpus.txt")).read_text(encoding="utf-8").splitlines()
    for text in corpus:
        try:
            to_sympy(text)
        except Exception:  # warm-up must never kill a worker
            pass
        yield
    to_sympy.cache_clear()


_WARM_UP = _warm_parser()

if __name__ == "__main__":
    main()
