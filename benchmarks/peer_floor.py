"""The floor a code grader's wall time is stated against (``bench_code_peers.py``), and the one
rule for which programs are timed.

F = (the timed programs' own CPU + the time limits they burn) / cores: what any grader of those
programs on these cores spends before a sandbox, a process or a comparison costs anything.

- *Own CPU*: the task's canonical solution run in-process on every input (trusted dataset code,
  CPU time, arguments copied before the clock starts), counted once for every timed program our
  grader passes (a passing program ran every input to the end; the mutants that pass compute the
  canonical result and only re-type it). A failing program stopped early somewhere we do not
  know: counted 0. LiveCodeBench's programs look their answer up: counted 0.
- *Burns*: the limit of every timed program our verdict says reached a time limit.

Both parts are lower bounds, so F is one; when the peer is slower than ours, a lower F gives a
lower (peer - F) / (ours - F): the ratio printed is never flattered by the estimate.
"""

from __future__ import annotations

import copy
import os
import re
import time
from typing import Any

from lcb_programs import SLOW

#: The exclusion rule, the same for both peers' comparisons: programs of the classes built to wait
#: out a time limit are not timed (they measure the limit rule, not the grader: CPU seconds for
#: us, a wall-clock alarm or a per-input wall limit for the peers). Both tools still grade them,
#: in a separate untimed run, for the verdict agreement.
WAITS_OUT_LIMIT = frozenset({"hangs_sometimes", *SLOW})
RULE = (
    "timed: every program except the classes built to wait out a time limit "
    f"({', '.join(sorted(WAITS_OUT_LIMIT))}), left out of both peers' timed runs alike and graded untimed"
)
_LIMIT = re.compile(r"(?:exceeded (?:its total of )?|within )([0-9.]+)s")


def timed(programs: list[dict]) -> list[dict]:
    return [p for p in programs if p["class"] not in WAITS_OUT_LIMIT]


def untimed(programs: list[dict]) -> list[dict]:
    return [p for p in programs if p["class"] in WAITS_OUT_LIMIT]


def cores() -> int:
    return len(os.sched_getaffinity(0))


def canonical_cpu_s(rows: list[dict]) -> dict[str, float]:
    """CPU seconds of each task's canonical solution over all its inputs, in this process."""
    from rlvr.harness.benchmarks.evalplus import inputs_of, reference_program

    seconds = {}
    for row in rows:
        namespace: dict = {}
        exec(compile(reference_program(row), row["task_id"], "exec"), namespace)  # trusted dataset code
        function, calls = namespace[row["entry_point"]], copy.deepcopy(inputs_of(row))
        start = time.process_time()
        for args in calls:
            try:
                function(*args)
            except Exception:
                pass
        seconds[row["task_id"]] = time.process_time() - start
    return seconds


def burn_s(reason: str, detail: str) -> float:
    """The limit a time-limited verdict waited out (0 for any other verdict)."""
    if reason != "time_limit":
        return 0.0
    found = _LIMIT.search(detail)
    return float(found.group(1)) if found else 0.0


def floor_s(verdicts: list[tuple[bool, str, str, float]]) -> dict[str, float]:
    """F from ``(passed, reason, detail, own CPU if it passes)`` per timed program."""
    own = sum(cpu for passed, _, _, cpu in verdicts if passed)
    burns = sum(burn_s(reason, detail) for _, reason, detail, _ in verdicts)
    return {"own_cpu_s": own, "burns_s": burns, "cores": cores(), "F_s": (own + burns) / cores()}


def versus_floor(peer_s: float, ours_s: float, floor: float) -> dict[str, Any]:
    """Both tools' wall time as multiples of F, and (peer - F) / (ours - F)."""
    return {
        "ours_x_F": ours_s / floor if floor > 0 else None,
        "peer_x_F": peer_s / floor if floor > 0 else None,
        "above_F_ratio": (peer_s - floor) / (ours_s - floor) if ours_s > floor else None,
    }
