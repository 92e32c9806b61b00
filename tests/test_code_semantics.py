"""What the code verifier computes: extraction, comparison rules, functional calls, languages."""

import gzip
import json

import pytest
from conftest import ROOT
from fixtures.lcb_solutions import CPP_SOLUTIONS, SOLUTIONS
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.sandbox import CODE_REASONS, CodeGrader
from rlvr.sandbox.code.judging.compare import stdout_matches
from rlvr.sandbox.code.judging.decoding import decode
from rlvr.sandbox.code.rules.extract import extract_program
from rlvr.sandbox.code.rules.languages import LANGUAGES, get_language
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.rules.testcases import BadTests, normalize_tests

PY = LANGUAGES["python"]
LCB = {
    json.loads(line)["id"]: json.loads(line)
    for line in gzip.open(ROOT / "harness" / "data" / "code" / "livecodebench_v5_2408_2502.jsonl.gz", "rt")
}


@pytest.fixture(scope="module")
def grader():
    g = CodeGrader(workers=2)
    yield g
    g.close()


# ---- extraction --------------------------------------------------------------------------------
def test_last_fenced_block_wins():
    text = "First try:\n```python\nprint(1)\n```\nFixed:\n```py\nprint(2)\n```\nDone."
    assert extract_program(text, PY).strip() == "print(2)"


def test_stray_empty_fence_before_a_tagged_block():
    text = "```\n\n```python\ndef f(x):\n    return x + 1\n```\n\nThis uses ```python blocks."
    assert extract_program(text, PY) == "def f(x):\n    return x + 1\n"
    # a closing fence followed by a new tagged block is not a stray fence
    two = "```python\na = 1\n```\n\n```python\nb = 2\n```"
    assert extract_program(two, PY) == "b = 2\n"


def test_untagged_block_and_other_language_blocks():
    assert extract_program("```\nprint(3)\n```", PY).strip() == "print(3)"
    assert extract_program("```cpp\nint main(){}\n```\n```python\nx=1\n```", PY).strip() == "x=1"
    assert (
        extract_program("```python\nx=1\n```\n```cpp\nint main(){}\n```", get_language("cpp")).strip() == "int main(){}"
    )


def test_whole_completion_if_it_parses_else_no_code():
    assert extract_program("def f(x):\n    return x + 1\n", PY) is not None
    assert extract_program("The answer is to loop over the list and sum.", PY) is None
    assert extract_program("", PY) is None
    assert extract_program("'just a string'", PY) is None


def test_truncated_fence_uses_its_contents():
    assert extract_program("Here:\n```python\nprint(5)\n", PY).strip() == "print(5)"


# ---- comparison rules (the rules themselves: test_code_compare.py) -----------------------------
@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(0, 1e-7))
def test_opt_in_float_tolerance_property(x, eps):
    assert stdout_matches(f"{x + eps:.10f}", f"{x:.10f}", atol=1e-6, rtol=1e-6)[0]


@settings(max_examples=100, deadline=None)
@given(st.integers(-(10**40), 10**40))
def test_integers_are_exact(n):
    assert stdout_matches(str(n), str(n))[0]
    assert not stdout_matches(str(n + 1), str(n))[0]


# ---- tests and limits validation -------------------------------------------------------------
def test_test_formats():
    import base64

    (lcb,) = normalize_tests([{"input": "1\n[2, 3]", "output": "[5, 6]", "testtype": "functional"}], "f")
    assert lcb["kind"] == "call" and lcb["rule"] == "livecodebench" and lcb["plain"]
    assert decode(base64.b64decode(lcb["args"])) == ((1, [2, 3]), {})
    assert decode(base64.b64decode(lcb["expected"])) == [5, 6]
    assert normalize_tests({"inputs": ["1\n"], "outputs": ["2\n"]})[0]["kind"] == "stdin"
    (call,) = normalize_tests([{"args": [(1, 2)], "expected": (3,)}], "f")
    assert call["rule"] == "python" and decode(base64.b64decode(call["args"])) == (((1, 2),), {})
    assert decode(base64.b64decode(call["expected"])) == (3,)
    digits = "1" + "0" * 4999 + "1"  # past the interpreter's 4300-digit conversion cap
    (big,) = normalize_tests([{"input": digits, "output": digits, "testtype": "functional"}], "f")
    assert decode(base64.b64decode(big["expected"])) == 10**5000 + 1
    (tol,) = normalize_tests([{"input": "", "output": "0.5", "float_abs_tol": 1e-6}])
    assert tol["atol"] == 1e-6
    with pytest.raises(BadTests):
        normalize_tests([], None)
    with pytest.raises(BadTests):
        normalize_tests([{"input": "1", "output": "x", "testtype": "functional"}], "f")
    with pytest.raises(BadTests):
        normalize_tests([{"input": "1", "output": "x", "testtype": "weird"}], None)
    with pytest.raises(ValueError):
        Limits.from_any({"time_s": -1})
    with pytest.raises(ValueError):
        Limits.from_any({"colour": 1})
    with pytest.raises(ValueError):
        Limits.from_any({"scratch_mb": 0})


def test_reasons_are_the_documented_ones(grader):
    verdicts = grader.verify_batch(
        [
            {"completion": "print(1)", "tests": [{"input": "", "output": "1"}]},
            {"completion": "no code here at all, sorry", "tests": [{"input": "", "output": "1"}]},
            {"completion": "```python\ndef f(:\n```", "tests": [{"input": "", "output": "1"}]},
        ]
    )
    assert [v.reason for v in verdicts] == ["ok", "no_code", "compile_error"]
    assert all(v.reason in CODE_REASONS for v in verdicts)


# ---- real problems -----------------------------------------------------------------------------
def test_livecodebench_honest_solutions_pass(grader):
    items = []
    for key, source in SOLUTIONS.items():
        row = LCB[key]
        items.append(
            {
                "completion": f"Here is my solution.\n```python\n{source}```",
                "tests": row["tests"],
                "fn_name": row["metadata"].get("func_name"),
                "starter_code": row["starter_code"],
            }
        )
    for key, source in CPP_SOLUTIONS.items():
        items.append({"completion": f"```cpp\n{source}```", "tests": LCB[key]["tests"], "language": "cpp"})
    verdicts = grader.verify_batch(items)
    assert all(v.correct for v in verdicts), [(v.reason, v.detail) for v in verdicts if not v.correct]
    assert all(v.passed == v.total for v in verdicts)


def test_livecodebench_wrong_solutions_fail(grader):
    items = []
    for key, source in SOLUTIONS.items():
        row = LCB[key]
        broken = (
            source.replace("print(", "print(1+0*") if "print(" in source else source.replace("return ", "return 1 + ")
        )
        broken = broken.replace("print(1+0*", "print('x', ") if broken == source else broken
        items.append(
            {
                "completion": f"```python\n{broken}```",
                "tests": row["tests"],
                "fn_name": row["metadata"].get("func_name"),
            }
        )
    verdicts = grader.verify_batch(items)
    assert not any(v.correct for v in verdicts)


def test_functional_class_solution_and_module_function(grader):
    tests = [{"input": "2\n3", "output": "5", "testtype": "functional"}]
    cls = "class Solution:\n    def add(self, a, b):\n        return a + b\n"
    fn = "def add(a, b):\n    return a + b\n"
    verdicts = grader.verify_batch(
        [
            {"completion": cls, "tests": tests, "fn_name": "add"},
            {"completion": fn, "tests": tests, "fn_name": "add"},
            {"completion": "def other(a, b):\n    return a + b\n", "tests": tests, "fn_name": "add"},
        ]
    )
    assert [v.reason for v in verdicts] == ["ok", "ok", "runtime_error"]


def test_starter_code_is_prepended_for_body_only_completions(grader):
    starter = "def add(a, b):\n"
    verdict = grader.verify(
        "    return a + b\n", [{"args": [1, 2], "expected": 3}], fn_name="add", starter_code=starter
    )
    assert verdict.correct, verdict


def test_functional_returns_are_serialised_and_compared_outside(grader):
    tests = [{"args": [2], "expected": [2, 4]}]
    verdicts = grader.verify_batch(
        [
            {"completion": "def f(x):\n    return (x, 2 * x)\n", "tests": tests, "fn_name": "f"},
            {"completion": "import numpy\ndef f(x):\n    return [x, 2 * x]\n", "tests": tests, "fn_name": "f"},
            {"completion": "def f(x):\n    return {x, 2 * x}\n", "tests": tests, "fn_name": "f"},
            {
                "completion": "def f(x):\n    print('debug noise')\n    return [x, 2 * x]\n",
                "tests": tests,
                "fn_name": "f",
            },
            {
                "completion": "def f(x):\n    return 3 ** 20000\n",
                "tests": [{"args": [1], "expected_json": str(3**20000) if False else "1"}],
                "fn_name": "f",
            },
        ]
    )
    # a tuple is not a list (Python's ==); numpy is importable; sets and noise as before
    assert [v.reason for v in verdicts] == ["wrong_answer", "ok", "wrong_answer", "ok", "wrong_answer"]


def test_huge_integer_results_compare_exactly(grader):
    import sys

    sys.set_int_max_str_digits(0)
    try:
        expected = str(3**20000)
    finally:
        sys.set_int_max_str_digits(4300)
    good = grader.verify("def f(x):\n    return 3 ** x\n", [{"args": [20000], "expected_json": expected}], fn_name="f")
    bad = grader.verify(
        "def f(x):\n    return 3 ** x + 1\n", [{"args": [20000], "expected_json": expected}], fn_name="f"
    )
    assert good.correct and bad.reason == "wrong_answer"


def test_stop_at_first_failure_and_partial_reward(grader):
    tests = [{"input": str(i), "output": str(i * 2)} for i in range(5)]
    program = "n = int(input())\nprint(n * 2 if n != 2 else 0)\n"
    strict = grader.verify(program, tests)
    partial = grader.verify(program, tests, partial=True)
    assert (strict.passed, strict.first_failure, strict.reward) == (2, 2, 0.0)
    assert (partial.passed, partial.first_failure, partial.reward) == (4, 2, 0.8)
    assert not partial.correct


def test_cpp_language_path(grader):
    ok = grader.verify(
        "```cpp\n#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a*b<<std::endl;}\n```",
        [{"input": "6 7", "output": "42"}],
        language="cpp",
    )
    ce = grader.verify("```cpp\nint main( { return 0 }\n```", [{"input": "", "output": ""}], language="cpp")
    rte = grader.verify(
        "```cpp\n#include <cstdlib>\nint main(){ abort(); }\n```", [{"input": "", "output": ""}], language="cpp"
    )
    tle = grader.verify(
        "```cpp\nint main(){ volatile long x=0; while(true) x++; }\n```",
        [{"input": "", "output": ""}],
        language="cpp",
        limits={"time_s": 1},
    )
    mle = grader.verify(
        "```cpp\n#include <vector>\nint main(){ std::vector<char> v; for(;;) v.resize(v.size()*2+1024); }\n```",
        [{"input": "", "output": ""}],
        language="cpp",
        limits={"memory_mb": 128},
    )
    assert [v.reason for v in (ok, ce, rte, tle, mle)] == [
        "ok",
        "compile_error",
        "runtime_error",
        "time_limit",
        "memory_limit",
    ]


def test_cpu_and_wall_limits_are_both_enforced(grader):
    cpu = grader.verify("while True:\n    pass\n", [{"input": "", "output": "1"}], limits={"time_s": 1})
    wall = grader.verify("import time\ntime.sleep(60)\n", [{"input": "", "output": "1"}], limits={"time_s": 1})
    assert cpu.reason == wall.reason == "time_limit"
    assert cpu.elapsed_ms < 3000 and wall.elapsed_ms < 3000


def test_submission_budget(grader):
    tests = [{"input": "", "output": "1"}] * 20
    verdict = grader.verify("import time\ntime.sleep(0.4)\nprint(1)\n", tests, limits={"time_s": 2, "total_s": 2})
    assert verdict.reason == "time_limit" and verdict.passed < 20


# ---- prelude (a benchmark's implicit imports and helpers) ---------------------------------------
TYPED = "```python\nclass Solution:\n    def total(self, nums: List[int]) -> int:\n        return sum(nums)\n```"
TYPED_TESTS = [{"input": "[1, 2, 3]", "output": "6", "testtype": "functional"}]


def test_prelude_supplies_imports_and_is_not_reported_as_the_model_program(grader):
    bare = grader.verify(TYPED, TYPED_TESTS, fn_name="total")
    assert bare.reason == "runtime_error" and "List" in bare.detail
    helped = grader.verify(TYPED, TYPED_TESTS, fn_name="total", prelude="from typing import *")
    assert helped.correct, helped.detail
    assert "typing" not in helped.extracted


def test_prelude_goes_after_future_imports(grader):
    program = (
        "```python\nfrom __future__ import annotations\nclass Solution:\n    def total(self, nums: List[int]) "
        "-> int:\n        return sum(nums)\n```"
    )
    verdict = grader.verify(program, TYPED_TESTS, fn_name="total", prelude="from typing import *")
    assert verdict.correct, verdict.detail


def _code_in_child(_):
    from rlvr.sandbox import verify_code

    return verify_code("```python\nprint(int(input()) * 2)\n```", [{"input": "21\n", "output": "42\n"}]).correct


def test_default_grader_works_in_a_forked_child_after_use_in_the_parent():
    import multiprocessing

    from rlvr.sandbox import verify_code

    assert verify_code("```python\nprint(1)\n```", [{"input": "", "output": "1\n"}]).correct
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(_code_in_child, range(2)) == [True, True]
    assert verify_code("```python\nprint(2)\n```", [{"input": "", "output": "2\n"}]).correct
