"""Every shipped math benchmark row checked against its own gold and a neighbour's.

For each row, a completion boxing the row's gold answer must be correct. A completion boxing the
*next* row's gold must be wrong, unless the two golds are genuinely equivalent. Equivalent
neighbours were checked by hand and are listed below; identical strings need no listing.
"""

import gzip
import json

import pytest
from conftest import ROOT
from rlvr.sandbox import MathGrader

BENCHMARKS = ["aime2024", "aime2025", "amc2023", "gsm8k", "math500", "minerva_math", "olympiadbench"]
POLICY = {"gsm8k": "gsm8k", "minerva_math": "minerva", "olympiadbench": "olympiadbench"}
# (row id whose gold is graded, neighbour gold that is equivalent to it) -- checked by hand.
HAND_CHECKED_EQUIVALENT = {
    ("math500/0022", "x=5"),  # gold "5" vs "x=5": an assignment of the asked value is accepted
}
# Golds that cannot be read as mathematics; grading against them reports grader_error.
BROKEN_GOLDS = {
    "t(0,4]",
    "f(x)=a x+b, where b is an arbitrary integer, and a is an arbitrary positive integer with \\mho(a)=0",
}


def load(name):
    with gzip.open(ROOT / "harness" / "data" / "math" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def item(completion_answer, gold_row, name):
    out = {
        "completion": f"So the final answer is $\\boxed{{{completion_answer}}}$.",
        "answer": gold_row["answer"],
        "policy": POLICY.get(name, "math"),
    }
    if name == "olympiadbench":
        out.update(
            answer_type=gold_row.get("answer_type"),
            tolerance=gold_row.get("error"),
            multiple=gold_row.get("is_multiple_answer"),
        )
    return out


@pytest.fixture(scope="module")
def grader():
    g = MathGrader(workers=2, timeout=2.0)
    yield g
    g.close()


@pytest.mark.parametrize("name", BENCHMARKS)
def test_gold_boxed_is_correct(grader, name):
    rows = load(name)
    verdicts = grader.verify_batch([item(r["answer"], r, name) for r in rows])
    failures = [(r["id"], r["answer"], v.reason, v.detail) for r, v in zip(rows, verdicts) if not v.correct]
    assert not failures


@pytest.mark.parametrize("name", BENCHMARKS)
def test_neighbour_gold_is_wrong_unless_equivalent(grader, name):
    rows = load(name)
    pairs = [(rows[(i + 1) % len(rows)], r) for i, r in enumerate(rows)]
    verdicts = grader.verify_batch([item(other["answer"], row, name) for other, row in pairs])
    false_accepts, errors = [], []
    for (other, row), v in zip(pairs, verdicts):
        if other["answer"].strip() == row["answer"].strip():
            assert v.correct, (row["id"], v)
            continue
        if v.correct and (row["id"], other["answer"]) not in HAND_CHECKED_EQUIVALENT:
            false_accepts.append((row["id"], row["answer"], other["answer"], v.detail))
        if not v.correct and (row["id"], other["answer"]) in HAND_CHECKED_EQUIVALENT:
            false_accepts.append(("expected equivalent", row["id"], v.reason, v.detail))
        if v.reason == "grader_error" and row["answer"] not in BROKEN_GOLDS:
            errors.append((row["id"], row["answer"], other["answer"], v.detail))
    assert not false_accepts
    assert not errors


def test_row_counts():
    assert {n: len(load(n)) for n in BENCHMARKS} == {
        "aime2024": 30,
        "aime2025": 30,
        "amc2023": 40,
        "gsm8k": 1319,
        "math500": 500,
        "minerva_math": 272,
        "olympiadbench": 675,
    }
