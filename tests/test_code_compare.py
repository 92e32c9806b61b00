"""Comparison rules, case by case as the benchmarks' own graders decide.

LiveCodeBench cases follow ``lcb_runner/evaluation/testing_util.py`` (``grade_stdio``: strip the
output and each line, equal line counts, each line equal as text or token-wise as exact
``Decimal`` values; ``grade_call_based``: a tuple result becomes a list, then ``==``). EvalPlus
cases follow ``evalplus/eval/__init__.py`` 0.3.1 (``unsafe_execute``: ``==``, the special
oracles, then for a failed match with a tolerance in force: same type, same length,
``np.allclose(rtol=1e-7, atol)``; a float or flat all-float expected value switches the
tolerance on, 1e-6, for the rest of its group).
"""

import numpy as np
import pytest
from rlvr.sandbox.code.judging.compare import Comparison, ResultJudge, stdout_matches
from rlvr.sandbox.code.running.values import encode


# ---- LiveCodeBench: stdin -------------------------------------------------------------------
@pytest.mark.parametrize(
    "got, want, verdict",
    [
        ("5\n", "5", True),  # whole output stripped
        ("  5  \n\n\n", "5\n", True),
        ("\n\n5", "5", True),
        ("1 2 3", "1  2 3", True),  # lines differ as text, equal token-wise
        ("1\n2", "1 2", False),  # line counts differ
        ("5\n\n6", "5\n6", False),  # an inner blank line is a line
        ("1 2", "1 2 3", False),
        ("2.0", "2", True),  # Decimal("2.0") == Decimal("2")
        ("1e3", "1000", True),
        ("+5", "5", True),
        ("-0", "0", True),
        ("1_000", "1000", True),  # Decimal accepts underscores
        ("Infinity", "inf", True),
        ("nan", "nan", True),  # equal as text
        ("NaN", "nan", False),  # Decimal NaN equals nothing
        ("0.333333", "0.3333333333", False),  # exact, no tolerance
        ("999999000.0", "999999999", False),
        ("123456789012345678901234567891", "123456789012345678901234567890", False),
        ("Yes", "yes", False),
        ("abc 1", "abc 1.0", False),  # a line with a non-number is text only
        ("1\r\n2\r\n", "1\n2", True),
    ],
)
def test_livecodebench_stdin_rule(got, want, verdict):
    assert stdout_matches(got, want)[0] is verdict


@pytest.mark.parametrize(
    "got, want, verdict",
    [
        ("0.333333", "0.3333333333", True),
        ("0.334", "0.3333333333", False),
        ("1.0000001", "1.0", True),
        ("999999000.0", "999999999", False),  # an integer expectation is never tolerant
        ("1e-7", "0", False),
        ("3", "3.0000001", True),
        ("x 0.5000001", "x 0.5", False),  # a line with text is compared as text
    ],
)
def test_opt_in_float_tolerance_applies_to_non_integer_expected_tokens_only(got, want, verdict):
    assert stdout_matches(got, want, atol=1e-6, rtol=1e-6)[0] is verdict


def test_enormous_tokens_are_compared_in_bounded_time():
    import time

    start = time.perf_counter()
    assert not stdout_matches("1" * 2_000_000, "2")[0]
    assert not stdout_matches("1e999999999999", "1")[0]
    assert not stdout_matches("1" * 2_000_000 + ".5", "0.5", atol=1e-6, rtol=1e-6)[0]
    assert time.perf_counter() - start < 2.0


# ---- functional results ---------------------------------------------------------------------
def check(got, want, rule="python", oracle="exact", atol=0.0, args=(), group="base", judge=None):
    judge = judge or ResultJudge(Comparison(rule, oracle, atol))
    test = {"expected": encode(want), "args": encode((tuple(args), {})), "group": group, "plain": False}
    return judge.check(test, encode(got))[0]


@pytest.mark.parametrize(
    "got, want, verdict",
    [
        ((1, 2), [1, 2], True),  # a tuple result becomes a list
        ([(1, 2)], [[1, 2]], False),  # ... at the top level only
        (True, 1, True),
        (1, True, True),
        (1.0, 1, True),
        (0.30000000000000004, 0.3, False),  # no tolerance
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ([1, 2], [2, 1], False),
        (None, None, True),
        ("a", "a", True),
    ],
)
def test_livecodebench_call_rule(got, want, verdict):
    assert check(got, want, "livecodebench") is verdict


@pytest.mark.parametrize(
    "got, want, verdict",
    [
        ((1, 2), [1, 2], False),
        ([1, 2], (1, 2), False),
        (1, True, True),
        (True, 1, True),
        (0, False, True),  # Python's ==
        (10**18 + 12345, 10**18, False),
        (float(10**18), 10**18 + 12345, False),
        ({1, 2}, {2, 1}, True),
        (frozenset({1}), {1}, True),
    ],
)
def test_python_rule(got, want, verdict):
    assert check(got, want) is verdict


@pytest.mark.parametrize(
    "got, want, atol, verdict",
    [
        (0.5000001, 0.5, 0.0, True),  # a float expectation switches on atol 1e-6
        (0.500002, 0.5, 0.0, False),
        (1, 1.0, 0.0, True),  # == first
        (1, 1.0000001, 0.0, False),  # then same type required: int is not float
        ([0.1 + 1e-7, 0.2], [0.1, 0.2], 0.0, True),
        ((0.1 + 1e-7, 0.2), [0.1, 0.2], 0.0, False),
        ([[0.1 + 1e-7]], [[0.1]], 0.0, False),  # nested: not "floats", so exact
        ([[0.1 + 1e-7]], [[0.1]], 1e-4, True),  # ... unless the task has an atol
        (0.50005, 0.5, 1e-4, True),
        (float(10**18), 10**18 + 12345, 0.0, False),
        (np.float64(0.5), 0.5, 0.0, True),  # numpy scalar == float
        (np.float64(0.5000001), 0.5, 0.0, False),  # not equal, and not of type float
        (np.array([1, 2]), [1, 2], 0.0, False),  # an array's == is ambiguous: EvalPlus fails it
        (np.array([3]), [3], 0.0, True),
    ],
)
def test_evalplus_rule(got, want, atol, verdict):
    assert check(got, want, "evalplus", atol=atol) is verdict


def test_evalplus_tolerance_stays_on_for_the_rest_of_the_group():
    judge = ResultJudge(Comparison("evalplus"))
    assert check(10**18 + 12345, 10**18, "evalplus", judge=judge) is False
    assert check(0.5, 0.5, "evalplus", judge=judge)  # a float expectation in group "base"
    # EvalPlus then compares with allclose: an integer within rtol 1e-7 passes (its quirk, kept)
    assert check(10**18 + 12345, 10**18, "evalplus", judge=judge) is True
    assert check(10**18 + 12345, 10**18, "evalplus", judge=judge, group="plus") is False


@pytest.mark.parametrize(
    "oracle, got, want, args, verdict",
    [
        ("set", [3, 1, 3], [1, 3], (), True),
        ("set", [1], [1, 3], (), False),
        ("set", [[1]], [[1]], (), False),  # unhashable: set() raises, EvalPlus fails it
        ("not_none", True, True, (), True),  # bool(re.search(...)) for a task whose reference returns a match
        ("not_none", False, True, (), False),
        ("not_none", None, True, (), False),
        ("not_none", None, False, (), True),
        ("sum_div", 0, 7, (), True),  # Mbpp/295
        ("surface_area", 35, 33, (3, 4), True),  # Mbpp/581: round(9 + 2 * 3 * sqrt(1.5**2 + 16)) = 35
        ("surface_area", 34, 33, (3, 4), False),
        ("digit_distance", 5, 9, (123, 45), True),  # Mbpp/558: 123 vs 045
        ("any_value", "anything", 1, (), True),  # Mbpp/164
        ("find_zero", 2.0, 0.0, ([-4, 0, 1],), True),  # HumanEval/32: any root
        ("find_zero", 1.0, 2.0, ([-4, 0, 1],), False),
        ("find_zero", 10**400, 2.0, ([-4, 0, 1],), False),  # overflow is a failure, not a crash
        ("find_zero", "x", 2.0, ([-4, 0, 1],), False),
    ],
)
def test_evalplus_oracles(oracle, got, want, args, verdict):
    with_atol = 1e-4 if oracle == "find_zero" else 0.0
    assert check(got, want, "evalplus", oracle, with_atol, args) is verdict


def test_comparison_settings_are_validated():
    with pytest.raises(ValueError):
        Comparison("fuzzy")
    with pytest.raises(ValueError):
        Comparison("python", "sum_div")  # an EvalPlus-only oracle
    with pytest.raises(ValueError):
        Comparison.from_any({"rule": "python", "tolerance": 1})
    assert Comparison.from_any("evalplus", "set") == Comparison("evalplus", "set")


def test_large_results_are_read_up_to_twice_the_expected_size():
    """Mbpp/255's expected value has 6 M elements: a correct answer whose bytes differ (floats for
    ints) is still read and compared; a flood far beyond the expected value is not."""
    want = list(range(4_500_000))
    assert check([float(v) for v in want], want)
    assert not check(list(range(4_100_000)), [0, 1, 2])


def test_close_rule_is_an_explicit_tolerance():
    judge = ResultJudge(Comparison("close", atol=1e-6))
    assert check([0.1 + 1e-8, (2, 0.5)], [0.1, (2, 0.5 + 1e-8)], judge=judge)
    assert not check([0.1 + 1e-4], [0.1], judge=judge)
    assert not check((1,), [1], judge=judge)


def test_values_the_comparison_cannot_handle_are_wrong_answers():
    judge = ResultJudge(Comparison("evalplus", atol=1e-6))
    test = {"expected": encode(0.5), "args": encode(((), {})), "group": "base"}
    assert judge.check(test, b"\x01\xff")[0] is False  # not an encoding
    assert judge.check(test, encode(10**400))[0] is False  # allclose overflows
    assert judge.check({**test, "expected": encode([1.5])}, encode(["x"]))[0] is False
