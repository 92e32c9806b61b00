"""Verdicts do not depend on the machine's load (issue 28, class 7).

An RL node grades beside a trainer and an inference engine. Here every core is kept busy by
spinning processes (three per core) while labelled math cases and EvalPlus programs are graded
by graders started under that load; the verdicts must equal the idle machine's and the labels,
with no ``timeout`` on an honest item, and math verdicts must not depend on the worker count.
Budgets are CPU time of the grading processes (``rlvr.sandbox.pool.Deadline``), so they hold.

Every test here runs in the slow suite (each loads every core for seconds): the cases the issue
reported, every labelled math case of ``tests/math_cases.py`` (both conformance sets, hostile ones
included), a sample of the EvalPlus fixture and the whole fixture, and the
22 code conformance cases. Spinners are killed when each test ends, die with the test process
and end themselves after ``SPIN_LIFE_S`` in any case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from code_helpers import CASES as CODE_CASES
from code_helpers import allowed_reasons, case_item
from conftest import ROOT
from math_cases import ALL_CLASSES, boxed, unpack
from rlvr.sandbox import CodeGrader, MathGrader
from rlvr.sandbox.pool import process_cpu_s

pytestmark = pytest.mark.slow

#: Busy processes per core: with the grader's own processes, every core has three or more
#: runnable processes, so a grading process gets a third of a core or less.
PER_CORE = 3
SPIN_LIFE_S = 600.0
#: The spinners must really have held the cores: their share of all the CPU time there was
#: while the graders ran (other work on the machine takes some too).
MIN_SPIN_SHARE = 0.25
SPIN = """
import ctypes, signal, time
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the test process
end = time.monotonic() + {life}
while time.monotonic() < end:
    pass
"""

#: The rows the issue reported as ``timeout`` under load (the physics gold: ``timeout`` in
#: process, ``wrong_answer`` on Ray).
ISSUE_CASES = [
    (boxed(r"\sqrt{12}"), r"2\sqrt3", True),
    (boxed(r"2\sqrt3"), r"\sqrt{12}", True),
    (boxed(r"\pi r^2"), r"r^{2}\pi", True),
    (boxed("250"), r"m_{p} c^{2}(\gamma^{2}-1)\sin^{2}\theta", False),
    (boxed(r"m_p c^2 (\gamma^2 - 1) \sin^2\theta"), r"m_{p} c^{2}(\gamma^{2}-1)\sin^{2}\theta", True),
]
#: Code conformance cases whose label assumes host-side setup (``tests/test_code_reference_cases.py``)
NEEDS_HOST_SETUP = {"hostile/host_file_canary", "hostile/env_secret_leak", "hostile/network_egress"}
EVALPLUS = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "evalplus_verdicts.jsonl").open()]
MATH_REFERENCE = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "verifier_cases_math.jsonl").open()]


@contextmanager
def busy_cores() -> Iterator[None]:
    """``PER_CORE`` spinning processes per core for the duration of the block; afterwards
    asserts that they held at least ``MIN_SPIN_SHARE`` of the machine's CPU meanwhile."""
    cores = os.cpu_count() or 1
    # each in its own session: with autogroup scheduling (the Linux default) processes of one
    # session share one core's worth of time, and the workers, in sessions of their own, would
    # barely notice them
    command = [sys.executable, "-c", SPIN.format(life=SPIN_LIFE_S)]
    spinners = [subprocess.Popen(command, start_new_session=True) for _ in range(PER_CORE * cores)]
    try:
        _until_spinning(spinners)
        cpu_before, start = _spun(spinners), time.monotonic()
        yield
        spun, wall = _spun(spinners) - cpu_before, time.monotonic() - start
        assert all(s.poll() is None for s in spinners), "a spinner ended early"
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
    assert spun >= MIN_SPIN_SHARE * cores * wall, f"spinners used {spun:.1f}s of {cores * wall:.1f}s of CPU"


def _spun(spinners: list[subprocess.Popen]) -> float:
    return sum(process_cpu_s(s.pid) or 0.0 for s in spinners)


def _until_spinning(spinners: list[subprocess.Popen], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any((process_cpu_s(s.pid) or 0.0) < 0.05 for s in spinners):
        assert time.monotonic() < deadline, "spinners did not start"
        time.sleep(0.05)


# ---- math ---------------------------------------------------------------------------------
def math_items(cases: list[tuple]) -> tuple[list[dict[str, Any]], list[bool | None]]:
    items, labels = [], []
    for case in cases:
        completion, gold, expected, options = unpack(case)
        items.append({"completion": completion, "answer": gold, **options})
        labels.append(expected)
    return items, labels


def grade_math(items: list[dict[str, Any]], workers: int) -> list[tuple]:
    """Verdicts of a fresh grader (its workers start with the batch, cold, as on a new node)."""
    grader = MathGrader(workers=workers)
    try:
        return [(v.correct, v.reason, v.extracted, v.detail) for v in grader.verify_batch(items)]
    finally:
        grader.close()


def check_math_under_load(items: list[dict[str, Any]], labels: list[bool | None], hostile: set[int]) -> None:
    """Idle with one worker, then under load with one and with two: the same verdicts, the
    labelled ones right, no ``timeout`` but on hostile items (whose verdicts must agree too)."""
    idle = grade_math(items, 1)
    with busy_cores():
        loaded = {workers: grade_math(items, workers) for workers in (1, 2)}
    for index, (item, label, verdict) in enumerate(zip(items, labels, idle)):
        if label is not None:
            assert verdict[0] is label, (item, verdict)
        if index not in hostile:
            assert verdict[1] != "timeout", (item, verdict)
    for workers, verdicts in loaded.items():
        for index, (item, calm, busy) in enumerate(zip(items, idle, verdicts)):
            # a hostile item's timeout detail says how much CPU it got: compare the verdict only
            same = calm[:2] == busy[:2] if index in hostile else calm == busy
            assert same, (workers, item, calm, busy)


def test_issue_cases_under_load():
    items, labels = math_items(ISSUE_CASES)
    check_math_under_load(items, labels, hostile=set())


def test_every_labelled_math_case_under_load():
    cases = ISSUE_CASES + [case for name, group in ALL_CLASSES.items() if name != "hostile" for case in group]
    cases += [(c["pred"], c["gold"], c["expected"]) for c in MATH_REFERENCE if not c["class"].startswith("hostile/")]
    hostile = ALL_CLASSES["hostile"] + [
        (c["pred"], c["gold"], c["expected"]) for c in MATH_REFERENCE if c["class"].startswith("hostile/")
    ]
    items, labels = math_items(cases + hostile)
    check_math_under_load(items, labels, hostile=set(range(len(cases), len(items))))


# ---- code ---------------------------------------------------------------------------------
def grade_evalplus(rows: list[dict[str, Any]]) -> list[tuple]:
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.grading import EvalGrader

    wanted = {row["task_id"] for row in rows}
    problems = {p.id: p for name in ("humanevalplus", "mbppplus") for p in load_problems(name) if p.id in wanted}
    grader = EvalGrader(workers=2)
    try:
        verdicts = grader.grade([(problems[r["task_id"]], f"```python\n{r['program'].strip()}\n```") for r in rows])
    finally:
        grader.close()
    return [(v.correct, v.reason, v.passed, v.total) for v in verdicts]


def check_evalplus_under_load(rows: list[dict[str, Any]]) -> None:
    idle = grade_evalplus(rows)
    with busy_cores():
        loaded = grade_evalplus(rows)
    for row, calm, busy in zip(rows, idle, loaded):
        if row["class"] == "canonical":
            assert calm[0] and busy[0], (row["id"], calm, busy)
        assert "sandbox_error" not in (calm[1], busy[1]), (row["id"], calm, busy)
        assert calm == busy, (row["id"], calm, busy)


def test_evalplus_sample_under_load():
    """Every fourth task's canonical solution, and two of its wrong mutants."""
    tasks = sorted({row["task_id"] for row in EVALPLUS})[::4]
    rows = [
        r
        for r in EVALPLUS
        if r["task_id"] in tasks and r["class"] in ("canonical", "wrong_sometimes", "raises_sometimes")
    ]
    check_evalplus_under_load(rows)


def test_evalplus_fixture_under_load():
    check_evalplus_under_load(EVALPLUS)


def test_code_conformance_cases_under_load():
    cases = [case for case in CODE_CASES if case["class"] not in NEEDS_HOST_SETUP]

    def grade() -> list[str]:
        grader = CodeGrader(workers=2)
        try:
            return [v.reason for v in grader.verify_batch([case_item(case) for case in cases])]
        finally:
            grader.close()

    idle = grade()
    with busy_cores():
        loaded = grade()
    for case, calm, busy in zip(cases, idle, loaded):
        assert calm in allowed_reasons(case["expected"]) and busy in allowed_reasons(case["expected"]), (
            case,
            calm,
            busy,
        )
        if case["class"] != "hostile/kill_parent":  # its verdict is either, by the survey's label
            assert calm == busy, (case["class"], calm, busy)
