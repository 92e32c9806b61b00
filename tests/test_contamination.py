"""Contamination: planted copies of AIME and MATH500 problems (reworded around, upper-cased,
prefixed) are flagged problem by problem, the filtered file omits exactly those rows, shared
boilerplate phrases are not contamination, and `rlvr train` warns when its data overlaps the
benchmark it evaluates on."""

import json
import random

import pytest
from eval_helpers import rlvr
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.benchmarks.registry import load_problems
from rlvr.harness.contamination import BenchmarkIndex, contamination_report, normalise


def _filler(i: int) -> dict:
    return {
        "question": f"A train leaves station {i} at {i % 12} o'clock going {30 + i % 50} km per hour; how far has it "
        "gone by noon?",
        "answer": str(i % 97),
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    rng = random.Random(0)
    rows = [_filler(i) for i in range(3000)]
    chosen = rng.sample(load_problems("aime2024"), 4) + rng.sample(load_problems("math500"), 8)
    # one short MATH500 problem (under 13 words), which only whole containment can find
    chosen.append(next(p for p in load_problems("math500") if 3 <= len(normalise(p.question)) < 13))
    slots = rng.sample(range(len(rows)), len(chosen))
    for slot, problem in zip(slots, chosen):
        text = problem.question.upper() if slot % 2 else problem.question
        rows[slot] = {"question": f"Problem {slot}: {text}\n\nShow your work.", "solution": problem.gold["answer"]}
    path = tmp_path_factory.mktemp("contamination") / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, {slot: p.id for slot, p in zip(slots, chosen)}, rows


def test_planted_problems_are_flagged_and_filtered_out(planted, tmp_path):
    path, truth, rows = planted
    result = rlvr(
        "contamination",
        "--train",
        str(path),
        "--benchmarks",
        "aime2024,aime2025,math500,gsm8k",
        "--fields",
        "answer=solution",
        "--out",
        str(tmp_path / "c"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    flagged = {b: set(entry["contaminated_problem_ids"]) for b, entry in report["benchmarks"].items()}
    assert flagged["aime2024"] | flagged["math500"] == set(truth.values())
    assert flagged["aime2025"] == flagged["gsm8k"] == set()
    assert report["benchmarks"]["aime2024"]["with_answer"] == 4  # the answers came along (--fields answer=solution)
    assert report["flagged_train_rows"] == len(truth)
    kept = [json.loads(line) for line in (tmp_path / "c" / "train.filtered.jsonl").read_text().splitlines()]
    assert kept == [row for index, row in enumerate(rows) if index not in truth]
    example = report["benchmarks"]["math500"]["examples"][0]
    assert example["kind"] in ("ngram", "contained", "exact") and example["evidence"]


def test_a_shared_phrase_is_not_a_copied_problem():
    long_a = Problem(
        "a",
        "b",
        "math",
        "Let m and n be integers where n is not divisible by the square of any prime and the sum of the first "
        "hundred terms of the sequence is one; find m + n.",
        {"answer": "7"},
    )
    other = (
        "A triangle has area m root n where n is not divisible by the square of any prime and whose sides are three "
        "four and five "
        "in some unit; find m + n."
    )
    assert BenchmarkIndex([long_a]).matches(0, other) == []
    copy = BenchmarkIndex([long_a]).matches(0, "Solve this: " + long_a.question + " Answer: 7", "7")
    assert [(m.kind, m.answer_match) for m in copy] == [("ngram", True)]


def test_exact_and_contained_short_problems():
    short = Problem("s", "b", "math", "Compute $\\dbinom{8}{4}$.", {"answer": "70"})
    index = BenchmarkIndex([short])
    assert [m.kind for m in index.matches(0, "compute \\dbinom{8}{4}")] == ["exact"]
    assert [m.kind for m in index.matches(1, "Homework 3. Compute $\\dbinom{8}{4}$. Then rest.")] == ["contained"]
    assert index.matches(2, "Compute $\\dbinom{8}{5}$.") == []  # different numbers are a different problem
    assert index.matches(3, "What is 3 - 4?") == []


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200))
def test_normalisation_ignores_case_and_punctuation(text):
    assert normalise(text.upper()) == normalise(text)
    assert normalise(f"  {text}, .?!") == normalise(text)
    assert normalise(text.replace(" ", "  ")) == normalise(text)


def test_normalisation_folds_unicode_width():
    assert normalise("ＷＨＡＴ ｉｓ　１＋２？") == normalise("what is 1+2?") == ["what", "is", "1", "+", "2"]


@pytest.mark.slow
def test_train_warns_when_its_data_contains_the_held_out_benchmark(tmp_path, tiny_model):
    copied = [{"question": p.question, "answer": p.gold["answer"]} for p in load_problems("arith")[:3]]
    data = tmp_path / "leaky.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in copied))
    report, flagged = contamination_report(copied, load_problems("arith"), ["arith"])
    assert report["benchmarks"]["arith"]["contaminated_problems"] == 3 and flagged == [0, 1, 2]
    result = rlvr(
        "train",
        "drgrpo",
        "--config",
        "cpu-demo",
        "--model",
        tiny_model,
        "--set",
        "backend=hf",
        "--max-steps",
        "0",
        "--out",
        str(tmp_path / "run"),
        "--set",
        f"stages=[{{name: a, sources: [{data}]}}]",
        "--set",
        "eval_benchmarks=[arith]",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "warning: the training data contains 3 of 110 problems of held-out arith" in result.stderr
