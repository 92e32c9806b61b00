"""The Dr. GRPO originals' reward policies (``boxed_only``, ``r1_format``) on the completions where
they part from the default ``math`` policy, through the one public path (``verify_math`` and the
batch path), so a training reward and an evaluation grade under the same policy agree."""

import pytest
from rlvr.sandbox import verify_math, verify_math_batch
from rlvr.sandbox.math.extract import extract_answer
from rlvr.sandbox.math.policy import PRESETS, MathPolicy, resolve_policy

THINK = "Let me compute 2 + 3 step by step. "

# (completion, gold, correct under math, under boxed_only, under r1_format)
CASES = [
    # prose and bare answers: credited by the default only
    ("So the answer is 5.", "5", True, False, False),
    ("5", "5", True, False, False),
    ("Adding up the parts.\n#### 5", "5", True, False, False),
    # a boxed answer: the boxed reward, but no R1 tags
    (r"Adding up, we get $\boxed{5}$.", "5", True, True, False),
    # a box inside the reasoning and a prose conclusion after </think>: oat searches everything
    (THINK + r"\boxed{5} </think> so it is five", "5", False, True, False),
    # hedging across boxes: the default refuses four distinct boxes, oat reads only the last
    (r"\boxed{1} \boxed{2} \boxed{3} \boxed{4}", "4", False, True, False),
    # one box listing candidates is a list under every policy
    (r"It is one of \boxed{1, 2, 3, 4, 5, 6}", "4", False, False, False),
    # two boxes for a two-item gold: joined by the default, oat reads the last box only
    (r"The roots are \boxed{2} and \boxed{-3}.", "-3, 2", True, False, False),
    # the exact R1 format, answer bare or boxed
    (THINK + "</think> <answer> 5 </answer>", "5", True, False, True),
    (THINK + r"</think> <answer> \boxed{5} </answer>", "5", True, True, True),
    (THINK + "</think> <answer> x = 5 </answer>", "5", True, False, True),
    # R1 format broken by whitespace: newline, no space, two spaces
    (THINK + "</think>\n<answer> 5 </answer>", "5", True, False, False),
    (THINK + "</think><answer>5</answer>", "5", True, False, False),
    (THINK + "</think>  <answer>5</answer>", "5", True, False, False),
    # tags opened, never closed (cut by the budget): nothing under R1
    (THINK + "</think> <answer> 5", "5", False, False, False),
    # prose inside the tags is graded as it stands under R1, not searched
    (THINK + "</think> <answer> The answer is 5 </answer>", "5", True, False, False),
    # a truncated box inside the tags is no answer
    (THINK + r"</think> <answer> \boxed{5 </answer>", "5", False, False, False),
]


@pytest.mark.parametrize("completion, gold, default, boxed, r1", CASES)
def test_original_policies_part_from_the_default(completion, gold, default, boxed, r1):
    got = [verify_math(completion, gold, policy=name).correct for name in ("math", "boxed_only", "r1_format")]
    assert got == [default, boxed, r1]


def test_the_batch_path_grades_as_verify_math_does():
    """Rewards are batch-graded (``EvalGrader`` -> ``verify_math_batch``), items naming the policy."""
    items = [
        {"completion": c, "answer": g, "policy": name}
        for c, g, *_ in CASES
        for name in ("math", "boxed_only", "r1_format")
    ]
    expected = [flag for *_, d, b, r in CASES for flag in (d, b, r)]
    assert [v.correct for v in verify_math_batch(items)] == expected


def test_equivalence_stays_the_verifiers_own():
    """Only extraction follows oat; a symbolic equal in the box is still equal (worker path)."""
    assert verify_math(r"\boxed{\frac{\sqrt{12}}{2}}", r"\sqrt{3}", policy="boxed_only").correct
    r1 = THINK + r"</think> <answer> \frac{\sqrt{12}}{2} </answer>"
    assert verify_math(r1, r"\sqrt{3}", policy="r1_format").correct


def test_failures_say_why():
    assert "r1 format" in verify_math("5 </answer>", "5", policy="r1_format").detail
    assert verify_math("So the answer is 5.", "5", policy="boxed_only").reason == "no_answer"
    assert extract_answer(THINK + "</think> <answer>  </answer>", PRESETS["r1_format"]).answer is None


def test_answer_format_is_a_policy_field():
    policy = resolve_policy("math", answer_format="boxed")
    assert MathPolicy.from_dict(policy.to_dict()) == policy  # travels to the symbolic workers
    assert extract_answer("The answer is 5.", policy).answer is None
    with pytest.raises(ValueError, match="answer_format"):
        MathPolicy(answer_format="strict")
