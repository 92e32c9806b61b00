"""Property tests: the verifier on open-ended inputs."""

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox import MATH_REASONS, verify_math
from sandbox.math.judge import judge
from sandbox.math.policy import PRESETS, GoldSpec

MATH = PRESETS["math"]
SOUP_TOKENS = ["\\frac", "\\sqrt", "\\boxed", "\\pi", "\\infty", "\\cup", "\\pm", "\\left", "\\right", "\\text", "\\le"]
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_integers_equal_only_themselves(n):
    assert judge(str(n), GoldSpec(str(n)), MATH).correct
    assert not judge(str(n + 1), GoldSpec(str(n)), MATH).correct


@FAST
@given(st.integers(-(10**6), 10**6), st.integers(1, 10**6), st.integers(1, 50))
def test_fractions_by_value(p, q, k):
    gold = Fraction(p, q)
    assert judge(rf"\frac{{{p * k}}}{{{q * k}}}", GoldSpec(f"{gold.numerator}/{gold.denominator}"), MATH).correct
    other = gold + Fraction(1, q * k + 1)
    assert not judge(
        rf"\frac{{{other.numerator}}}{{{other.denominator}}}", GoldSpec(rf"\frac{{{p}}}{{{q}}}"), MATH
    ).correct


@FAST
@given(st.decimals(min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False, places=4))
def test_exact_decimals_equal_their_fractions(d):
    value = Fraction(d)
    assert judge(f"{d}", GoldSpec(rf"\frac{{{value.numerator}}}{{{value.denominator}}}"), MATH).correct


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    verdict = verify_math(text, "42")
    assert verdict.reason in MATH_REASONS
    assert verdict.correct is (verdict.reason == "ok")
    assert verdict.elapsed_ms < 16_000  # CPU budget; the wall clock is bounded by the backstop


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list("0123456789+-*/^{}()[]\\,.=<>x_ !$%") + SOUP_TOKENS), max_size=40).map("".join))
def test_latex_soup_is_graded_within_deadline(text):
    verdict = verify_math(r"\boxed{" + text + "}", r"\frac{1}{2}")
    assert verdict.reason in MATH_REASONS
    assert verdict.elapsed_ms < 16_000  # CPU budget; the wall clock is bounded by the backstop


@FAST
@given(st.lists(st.integers(-100, 100), min_size=2, max_size=6, unique=True), st.randoms(use_true_random=False))
def test_unordered_lists(values, rnd):
    shuffled = list(values)
    rnd.shuffle(shuffled)
    gold = ", ".join(map(str, values))
    assert judge(", ".join(map(str, shuffled)), GoldSpec(gold), MATH).correct
    assert not judge(", ".join(map(str, shuffled[:-1])), GoldSpec(gold), MATH).correct
