"""A run-wide math policy (``math_policy``) reaches the trainer's rewards and its evaluations
alike; the Dr. GRPO ``paper`` presets reward as the originals did; an SRPO plateau under
History Resampling must be read on a probe. No model involved."""

import pytest
from rlvr.harness.benchmarks.problems import Problem, with_math_policy
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.evaluate import select_benchmarks
from rlvr.harness.grading import EvalGrader
from rlvr.harness.templates import load_template
from rlvr.trainers.policy_gradient.config import build_config, changed_original_reward
from rlvr.trainers.policy_gradient.curriculum import Stage
from rlvr.trainers.policy_gradient.loop import stage_pool


@pytest.fixture
def paper_data(tmp_path, monkeypatch):
    """The paper presets name data files that are not shipped: put stand-ins where they look."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for name in ("math_lvl3to5_8k", "math_12k", "srpo_math", "srpo_code"):
        (tmp_path / "data" / f"{name}.jsonl").write_text('{"question": "1+1?", "answer": "2"}\n')


def test_drgrpo_paper_presets_reward_as_the_originals(paper_data):
    qwen = build_config("drgrpo", "paper", {})
    r1 = build_config("drgrpo", "paper-r1", {})
    assert (qwen.template, qwen.math_policy) == ("qwen_math", "boxed_only")
    assert (r1.template, r1.math_policy) == ("r1", "r1_format")
    assert changed_original_reward("drgrpo", qwen) == changed_original_reward("drgrpo", r1) == []
    swapped = build_config("drgrpo", "paper", {"template": "r1"})  # the R1 prompt, boxed reward: a variant
    assert changed_original_reward("drgrpo", swapped) == ["math_policy: 'r1_format' -> 'boxed_only'"]
    no_template = build_config("drgrpo", "paper", {"template": "no_template"})
    assert changed_original_reward("drgrpo", no_template) == []
    assert changed_original_reward("drgrpo", build_config("drgrpo", "cpu-demo", {})) == []  # chat: no original


def test_math_policy_is_checked_before_anything_loads():
    with pytest.raises(UserError, match="math_policy must be one of"):
        build_config("drgrpo", "cpu-demo", {"math_policy": "boxed"})
    with pytest.raises(UserError, match="--policy must be one of"):
        EvalConfig(benchmarks=["arith"], policy="boxed")


def test_reward_and_evaluation_grade_under_the_same_policy(digits_source):
    """The trainer's pool and ``rlvr eval``'s problems (a local file and a registered benchmark)
    carry the run's policy, and the one grader then agrees: "the answer is 3" earns nothing under
    ``boxed_only`` in training and in evaluation, while the default credits it."""
    train = stage_pool(Stage("math", [digits_source]), "boxed_only")
    evaluated = select_benchmarks(
        EvalConfig(benchmarks=[digits_source, "arith"], policy="boxed_only", limit=2), load_template("qwen_math")
    )
    assert {p.gold["policy"] for p in train} == {"boxed_only"}
    assert {p.gold["policy"] for run in evaluated for p in run.problems} == {"boxed_only"}
    problem = next(p for p in train if p.gold["answer"] == "3")
    default = stage_pool(Stage("math", [digits_source]))[train.index(problem)]
    graded = []
    # one grader per run, as in training and evaluation (it caches each problem's gold by id)
    for pairs in (
        [(problem, "The answer is 3."), (problem, r"\boxed{3}")]
        + [(p, f"The answer is {p.gold['answer']}.") for run in evaluated for p in run.problems],
        [(default, "The answer is 3.")],
    ):
        grader = EvalGrader(workers=1)
        try:
            graded += [v.correct for v in grader.grade(pairs)]
        finally:
            grader.close()
    assert graded[:2] == [False, True] and graded[-1] is True
    assert len(graded) == 2 + 4 + 1 and not any(graded[2:-1])


def test_with_math_policy_leaves_code_problems_and_unset_policy_alone():
    math = Problem("m", "b", "math", "q", {"answer": "1", "policy": "gsm8k"})
    code = Problem("c", "b", "code", "q", {"tests": []})
    assert with_math_policy([math, code], None) == [math, code]
    out = with_math_policy([math, code], "r1_format")
    assert out[0].gold == {"answer": "1", "policy": "r1_format"} and out[1] is code
    assert math.gold["policy"] == "gsm8k"  # the loaded problems are not mutated


def test_srpo_plateau_needs_a_probe_under_history_resampling(paper_data):
    stages = [
        {"name": "math", "sources": ["arith_train"], "plateau_window": 5},
        {"name": "b", "sources": ["arith_train"]},
    ]
    with pytest.raises(UserError, match="give the stage a fixed probe"):
        build_config("srpo", "cpu-demo", {"stages": stages})
    stages[0].update(probe_size=16, probe_every=2)
    assert build_config("srpo", "cpu-demo", {"stages": stages}).stages[0]["probe_size"] == 16
    build_config("grpo", "cpu-demo", {"stages": [dict(stages[0], probe_size=None), stages[1]]})  # uniform: allowed
    paper = build_config("srpo", "paper", {})
    assert Stage.from_dict(paper.stages[0]).probe_size == 128
