"""Unit tests of the verifier's pure pieces: extraction, normalisation, exact numbers, policies."""

from fractions import Fraction

import pytest
from rlvr.sandbox.math.extract import extract_answer, find_boxes
from rlvr.sandbox.math.judge import judge, nesting_depth
from rlvr.sandbox.math.normalize import normalize_answer
from rlvr.sandbox.math.numeric import NotNumeric, TooLarge, parse_number, round_sig, significant_figures
from rlvr.sandbox.math.policy import PRESETS, GoldSpec, MathPolicy, resolve_policy
from rlvr.sandbox.math.structure import Assign, Interval, Leaf, Matrix, PlusMinus, Seq, Union, parse_structure

MATH = PRESETS["math"]


@pytest.mark.parametrize(
    "completion, expected, rule",
    [
        (r"x \boxed{1} y \boxed{2}", "2", "boxed"),
        (r"\fbox{3}", "3", "boxed"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}", "boxed"),
        ("The answer is 7.", "7", "answer_is"),
        ("The final answer is $3.5$. I hope it is correct.", "3.5", "answer_is"),
        ("Answer: 12 apples.", "12 apples", "answer_is"),
        ("42", "42", "bare"),
        ("no answer in this sentence at all", None, "none"),
        (r"Then \boxed{\frac{7}{", None, "boxed"),
    ],
)
def test_extraction(completion, expected, rule):
    got = extract_answer(completion, MATH)
    assert got.answer == expected
    assert got.rule == rule


def test_precedence_is_configurable():
    text = "#### 5\nThe answer is 6. \\boxed{7}"
    assert extract_answer(text, MATH).answer == "7"
    assert extract_answer(text, PRESETS["gsm8k"]).answer == "5"
    assert extract_answer(text, resolve_policy("math", extract=("answer_is",))).answer == "6"
    assert extract_answer("so we get 17 in total", PRESETS["gsm8k"]).answer == "17"
    assert extract_answer("so we get 17 in total", MATH).answer is None


def test_hedging_threshold_counts_distinct_values():
    assert not extract_answer(r"\boxed{3} \boxed{4} \boxed{4}", MATH).hedging
    assert extract_answer(r"\boxed{2} \boxed{3} \boxed{4}", MATH).hedging
    assert not extract_answer(r"\boxed{2} \boxed{3} \boxed{4}", MATH, gold_items=3).hedging


def test_find_boxes_is_linear_on_unbalanced_input():
    boxes = find_boxes(r"\boxed{" + "{" * 200_000)
    assert boxes == [(0, 200_007, None)]


@pytest.mark.parametrize(
    "raw, text, percent, degrees",
    [
        (r"$\dfrac{1}{2}$.", r"\frac{1}{2}", False, False),
        (r"\left( 1, 2 \right)", "( 1, 2 )", False, False),
        (r"1{,}250", "1250", False, False),
        (r"10,\!080", "10,080", False, False),
        (r"1\,000\,000", "1000000", False, False),
        (r"40\%", "40", True, False),
        (r"90^\circ", "90", False, True),
        (r"15\text{ cm}^2", "15", False, False),
        (r"\text{(B)}", "(B)", False, False),
        ("−7", "-7", False, False),
        (r"\$4.50", "4.50", False, False),
        (r"\frac12", r"\frac{1}{2}", False, False),
        (r"\sqrt3", r"\sqrt{3}", False, False),
        ("5!", "5!", False, False),
        ("x ≤ 3", r"x \le 3", False, False),
        ("np.arcsin(10/13)", r"\arcsin(10/13)", False, False),
    ],
)
def test_normalisation(raw, text, percent, degrees):
    got = normalize_answer(raw)
    assert (got.text, got.percent, got.degrees) == (text, percent, degrees)


@pytest.mark.parametrize(
    "text, value, decimal",
    [
        ("42", Fraction(42), False),
        ("-7", Fraction(-7), False),
        (r"\frac{3}{4}", Fraction(3, 4), False),
        ("3/4", Fraction(3, 4), False),
        ("0.75", Fraction(3, 4), True),
        (".5", Fraction(1, 2), True),
        ("1.5e3", Fraction(1500), True),
        (r"2.5 \times 10^{3}", Fraction(2500), True),
        (r"2\frac{1}{4}", Fraction(9, 4), False),
        (r"-2\frac{1}{4}", Fraction(-9, 4), False),
        ("2^{10}", Fraction(1024), False),
        ("2^{-3}", Fraction(1, 8), False),
        ("(1+2)*3", Fraction(9), False),
        ("12345678901234567891", Fraction(12345678901234567891), False),
        ("+".join(["1"] * 3001), Fraction(3001), False),
    ],
)
def test_exact_numbers(text, value, decimal):
    got = parse_number(text)
    assert got.value == value and got.decimal is decimal


@pytest.mark.parametrize("text", ["x", r"\sqrt{2}", r"\pi", "2^{1/2}", r"2\frac{x}{4}", "2^10", "1/0"])
def test_not_numeric(text):
    with pytest.raises(NotNumeric):
        parse_number(text)


@pytest.mark.parametrize("text", ["9^{9^{9^{9}}}", "2^{2^{20}}", "10^{10^{10}}", "1" * 5000])
def test_too_large(text):
    with pytest.raises(TooLarge):
        parse_number(text)


def test_significant_figures_and_rounding():
    assert significant_figures("4.5e33") == 2
    assert significant_figures("0.0030") == 2
    assert significant_figures("27.39") == 4
    assert significant_figures("100") == 1
    assert round_sig(Fraction("27.3912"), 4) == Fraction("27.39")
    assert round_sig(Fraction("0.0034567"), 2) == Fraction("0.0035")
    assert round_sig(Fraction("-4.52e33"), 2) == Fraction("-4.5e33")


def test_structure():
    assert parse_structure("1, 2") == Seq("list", (Leaf("1"), Leaf("2")))
    assert parse_structure("(1, 2)") == Seq("pair", (Leaf("1"), Leaf("2")))
    assert parse_structure("[1, 2)") == Interval(Leaf("1"), Leaf("2"), True, False)
    assert parse_structure(r"\{1, 2\}") == Seq("set", (Leaf("1"), Leaf("2")))
    assert parse_structure(r"(1,2)\cup(3,4)") == Union(
        (Seq("pair", (Leaf("1"), Leaf("2"))), Seq("pair", (Leaf("3"), Leaf("4"))))
    )
    assert parse_structure("x = 5") == Assign("x", Leaf("5"))
    assert parse_structure(r"\pm 2") == PlusMinus(None, Leaf("2"))
    assert parse_structure("1,000,000") == Leaf("1000000")
    assert parse_structure("1,000", multiple=True) == Seq("list", (Leaf("1"), Leaf("000")))
    assert parse_structure(r"\begin{pmatrix}1 & 2\\3 & 4\end{pmatrix}").shape == (2, 2)
    assert isinstance(parse_structure(r"\begin{pmatrix}1\\2\end{pmatrix}"), Matrix)
    assert parse_structure("(1, 2)", answer_type="Interval") == Interval(Leaf("1"), Leaf("2"), False, False)


def test_nesting_depth():
    assert nesting_depth("((1))") == 2
    assert nesting_depth("{" * 10) == 10


def test_judge_fast_path_needs_no_sympy():
    assert judge(r"\frac{6}{8}", GoldSpec("0.75"), MATH).correct
    assert judge("Tuesday", GoldSpec(r"\text{Tuesday}"), MATH).correct
    assert not judge("(2,5)", GoldSpec("[2,5]"), MATH).correct


def test_judge_reports_gold_problems_as_grader_errors():
    assert judge("5", GoldSpec("t(0,4]"), MATH, symbolic=True).reason == "grader_error"


def test_policy_validation():
    with pytest.raises(ValueError, match="unknown math policy"):
        resolve_policy("nope")
    with pytest.raises(ValueError, match="unknown extraction rule"):
        MathPolicy(extract=("boxed", "magic"))
    with pytest.raises(ValueError, match="unknown math option"):
        resolve_policy("math", colour="red")
    assert resolve_policy("math", extract="boxed,answer_is").extract == ("boxed", "answer_is")
    assert MathPolicy.from_dict(PRESETS["gsm8k"].to_dict()) == PRESETS["gsm8k"]
