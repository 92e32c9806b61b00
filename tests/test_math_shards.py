"""Sharded extraction, the symbolic-answer cache and GSM8K's ``#### X`` under the default policy."""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from rlvr.sandbox import MathGrader, verify_math
from rlvr.sandbox.math.extract import extract_answer
from rlvr.sandbox.math.policy import PRESETS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from math_workloads import pairs  # noqa: E402

HOSTILE = [
    {"completion": "\\boxed{" * 5000, "answer": "1"},
    {"completion": "x" * 200_000 + "\\boxed{2}", "answer": "2"},
    {"completion": 7, "answer": "7"},
    {"completion": "\\boxed{1}", "answer": "1", "policy": "no-such-policy"},
    {"completion": "The answer is $\\boxed{\\frac{x^2-1}{x-1}}$", "answer": "x+1"},
]


def _key(v):
    return (v.correct, v.reason, v.extracted, v.detail, v.verifier)


def test_final_hash_line_is_read_by_the_default_policy():
    assert verify_math("Adding up, 3 + 4 = 7.\n#### 7", "7").correct
    assert verify_math("Adding up, 3 + 4 = 7.\n####  7 \n\n", "7").reason == "ok"
    assert extract_answer("#### 7", PRESETS["math"]).rule == "final_hash"
    # only as the last line: a '####' in the middle of the text is not an answer
    assert extract_answer("#### 7\nthen we carry on and never conclude", PRESETS["math"]).answer is None
    # a box still comes first
    assert extract_answer("\\boxed{5}\n#### 7", PRESETS["math"]).answer == "5"
    assert verify_math("so 7.\n#### 8", "7").reason == "wrong_answer"


def test_sharded_batch_gives_the_in_process_verdicts_in_order():
    items = pairs(600, "reasoning") + HOSTILE + pairs(200, "short")
    single = MathGrader(workers=2, shards=1)
    sharded = MathGrader(workers=2, shards=2)
    try:
        assert sharded.shards.wanted(len(items))
        a = single.verify_batch(items)
        b = sharded.verify_batch(items)
        assert sharded.shards._pool is not None and sharded.shards._pool.pids()  # really sharded
    finally:
        single.close()
        sharded.close()
    assert [_key(v) for v in a] == [_key(v) for v in b]
    labels = [p.get("label") for p in items]
    assert sum(v.correct == lab for v, lab in zip(a, labels) if lab is not None) >= 795


def test_items_holding_python_objects_fall_back_to_in_process():
    items = [{"completion": f"\\boxed{{{i}}}", "answer": str(i), "policy": PRESETS["aime"]} for i in range(300)]
    grader = MathGrader(workers=1, shards=2)
    try:
        verdicts = grader.verify_batch(items)
    finally:
        grader.close()
    assert all(v.correct for v in verdicts)


@pytest.mark.slow
def test_a_shard_killed_mid_batch_loses_no_item():
    items = pairs(4000, "reasoning")
    grader = MathGrader(workers=2, shards=2)
    reference = MathGrader(workers=2, shards=1)
    try:
        # both warm: a cold symbolic worker can miss the 1 s deadline under load (a timeout verdict
        # in one grader and not the other, which says nothing about the kill)
        grader.warm_up()
        reference.warm_up()
        victims = grader.shards.pool.pids()

        def kill_soon():
            time.sleep(0.05)
            for pid in victims[:1]:
                os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_soon)
        killer.start()
        got = grader.verify_batch(items)
        killer.join()
        assert grader.shards.pool.restarts >= 1  # the kill landed while slices were out
        want = reference.verify_batch(items)
    finally:
        grader.close()
        reference.close()
    assert len(got) == len(items)
    assert [_key(v) for v in got] == [_key(v) for v in want]


def test_repeated_symbolic_answers_are_judged_once():
    items = [{"completion": "\\boxed{\\frac{x^2-1}{x+1}}", "answer": "x-1"}] * 50
    grader = MathGrader(workers=1, shards=1)
    try:
        first = grader.verify_batch(items)
        calls = grader.pool._all.copy().pop().calls
        again = grader.verify_batch(items[:5])
        assert grader.pool._all.copy().pop().calls == calls  # answered from the cache
    finally:
        grader.close()
    assert {_key(v) for v in first + again} == {_key(first[0])}
    assert first[0].detail.startswith("symbolic")


@pytest.mark.parametrize("shards", [0, -1])
def test_bad_shard_count_is_refused(shards):
    with pytest.raises(ValueError):
        MathGrader(shards=shards)
