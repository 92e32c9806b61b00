"""HumanEval+ and MBPP+: every reference solution passes all of its inputs (expected outputs come
from running the reference once in the sandbox), and a mutated wrong solution fails.

The default run checks every 9th problem; ``-m slow`` checks all 542.
"""
import gzip
import json

import pytest

from conftest import ROOT
from harness.benchmarks.evalplus import float_tolerance, inputs_of, oracle_of, reference_program
from sandbox import CodeGrader
from sandbox.code.reference import differential_tests, expected_outputs

MUTATION = """

_rlvr_reference = {name}


def _rlvr_mutate(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, (list, tuple)):
        return type(value)(list(value) + [None])
    if isinstance(value, (set, frozenset)):
        return set(value) | {{"~"}}
    if isinstance(value, dict):
        return {{**value, "~": 0}}
    if value is None:
        return 0
    return None


def {name}(*args, **kwargs):
    return _rlvr_mutate(_rlvr_reference(*args, **kwargs))
"""


def rows(name):
    with gzip.open(ROOT / "harness" / "data" / "code" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


PROBLEMS = [r for name in ("humanevalplus", "mbppplus") for r in rows(name)]


@pytest.fixture(scope="module")
def grader():
    g = CodeGrader(workers=2)
    yield g
    g.close()


def check_problem(grader, row):
    program = reference_program(row)
    inputs = inputs_of(row)  # leaves out OVERSIZED_INPUTS
    expected = expected_outputs(program, inputs, row["entry_point"], grader)
    tests = differential_tests(inputs, expected)
    limits = {"float_abs_tol": float_tolerance(row), "total_s": min(900.0, sum(t["time_s"] for t in tests) + 10)}
    honest = grader.verify(f"```python\n{program}\n```", tests, fn_name=row["entry_point"], limits=limits, oracle=oracle_of(row))
    assert honest.correct, (row["task_id"], honest.reason, honest.detail)
    assert honest.passed == len(tests)
    mutated = grader.verify(f"```python\n{program}{MUTATION.format(name=row['entry_point'])}\n```", tests, fn_name=row["entry_point"], limits=limits, oracle=oracle_of(row))
    assert not mutated.correct, row["task_id"]
    assert mutated.reason in ("wrong_answer", "runtime_error"), (row["task_id"], mutated.reason)


def test_problem_count():
    assert len(PROBLEMS) == 542


@pytest.mark.parametrize("row", PROBLEMS[::9], ids=[r["task_id"] for r in PROBLEMS[::9]])
def test_sampled_problem(grader, row):
    check_problem(grader, row)


@pytest.mark.slow
@pytest.mark.parametrize("row", PROBLEMS, ids=[r["task_id"] for r in PROBLEMS])
def test_every_problem(grader, row):
    check_problem(grader, row)
