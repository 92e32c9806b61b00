"""Metrics: pass@k against brute-force enumeration, maj@k voting, bootstrap CIs, paired differences."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.harness.metrics import (
    bootstrap_mean,
    length_stats,
    maj_at_k_problem,
    majority_correct,
    mean_at_n,
    paired_difference,
    pass_at_k,
    pass_at_ks,
)
from rlvr.harness.summary import benchmark_metrics, vote_clusters


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
@settings(max_examples=200, deadline=None)
def test_pass_at_k_is_the_probability_that_a_random_k_subset_has_a_correct_sample(case):
    n, c, k = case
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_at_k_closed_forms():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # 0.5
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="smallest problem has 2"):
        pass_at_ks([[1, 0], [1, 1, 0]], [3])


def test_pass_at_ks_reports_every_k_up_to_n_and_is_monotone():
    outcomes = [[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 1, 0, 0]]
    result = pass_at_ks(outcomes)
    assert list(result) == ["1", "2", "3", "4"]
    values = [result[k]["value"] for k in result]
    assert values == sorted(values)
    assert values[0] == pytest.approx(np.mean([np.mean(o) for o in outcomes]))
    assert values[-1] == pytest.approx(0.75)


def test_mean_at_n_ci_contains_the_estimate_and_collapses_when_certain():
    assert mean_at_n([[1, 1], [1, 1]]) == {"value": 1.0, "ci95": [1.0, 1.0]}
    result = mean_at_n([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1]])
    lo, hi = result["ci95"]
    assert lo < result["value"] < hi
    assert mean_at_n([]) == {"value": None, "ci95": None}


def test_bootstrap_interval_covers_the_truth_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    covered = 0
    trials = 120
    for trial in range(trials):
        difficulty = rng.uniform(0, 1, size=40)  # true accuracy = mean difficulty
        outcomes = [(rng.random(4) < p).astype(float).tolist() for p in difficulty]
        lo, hi = mean_at_n(outcomes, replicates=400, seed=trial)["ci95"]
        covered += lo <= 0.5 <= hi
    assert 0.85 <= covered / trials <= 1.0


def test_two_level_bootstrap_is_wider_than_problem_only_when_samples_disagree():
    outcomes = [[1, 0, 1, 0]] * 30 + [[1, 1, 1, 1]] * 10
    two_level = mean_at_n(outcomes)["ci95"]
    problem_only = bootstrap_mean([np.mean(o) for o in outcomes])["ci95"]
    assert two_level[1] - two_level[0] > problem_only[1] - problem_only[0]


def test_majority_vote_ties_split_credit_and_non_answers_do_not_vote():
    assert majority_correct([0, 0, 1], [True, True, False], [0, 1, 2]) == 1.0
    assert majority_correct([0, 1], [True, False], [0, 1]) == 0.5
    assert majority_correct([-1, -1, 0], [False, False, False], [0, 1, 2]) == 0.0
    assert majority_correct([-1, -1], [False, False], [0, 1]) == 0.0
    # [0,1,0,-1] with sample 0 and 2 right: subsets of 3 -> 1, .5, 1, .5
    assert maj_at_k_problem([0, 1, 0, -1], [True, False, True, False], 3) == pytest.approx(0.75)
    assert maj_at_k_problem([0, 1, 0, -1], [True, False, True, False], 1) == pytest.approx(0.5)


def test_vote_clusters_use_the_given_equivalence():
    rows = [
        {"extracted": "1/2", "reason": "ok"},
        {"extracted": "0.5", "reason": "ok"},
        {"extracted": None, "reason": "no_answer"},
        {"extracted": "3", "reason": "wrong_answer"},
    ]
    same = lambda a, b: {a, b} == {"1/2", "0.5"}  # noqa: E731
    assert vote_clusters(rows, same) == [0, 0, -1, 1]


def test_paired_difference():
    a = [[0, 0], [1, 1], [0, 1], [0, 0]]
    assert paired_difference(a, a)["value"] == 0.0 and paired_difference(a, a)["ci95"] == [0.0, 0.0]
    b = [[1, 1], [1, 1], [1, 1], [0, 1]]
    diff = paired_difference(a, b)
    assert diff["value"] == pytest.approx(0.5)
    assert diff["ci95"][0] > 0 and diff["b_better"] == 3 and diff["ties"] == 1
    with pytest.raises(ValueError):
        paired_difference(a, b[:2])


def test_benchmark_metrics_rates_and_lengths():
    rows = [
        {
            "id": "p1",
            "sample_idx": 0,
            "correct": True,
            "reward": 1.0,
            "reason": "ok",
            "finish_reason": "stop",
            "n_tokens": 10,
            "extracted": "2",
        },
        {
            "id": "p1",
            "sample_idx": 1,
            "correct": False,
            "reward": 0.0,
            "reason": "no_answer",
            "finish_reason": "length",
            "n_tokens": 30,
            "extracted": None,
        },
        {
            "id": "p2",
            "sample_idx": 0,
            "correct": False,
            "reward": 0.0,
            "reason": "timeout",
            "finish_reason": "stop",
            "n_tokens": 20,
            "extracted": "x",
        },
        {
            "id": "p2",
            "sample_idx": 1,
            "correct": False,
            "reward": 0.0,
            "reason": "wrong_answer",
            "finish_reason": "length",
            "n_tokens": 40,
            "extracted": "y",
        },
    ]
    m = benchmark_metrics("math", ["p1", "p2"], rows, lambda pid, a, b: a == b)
    assert m["mean_at_n"]["value"] == 0.25 and m["pass_at_k"]["2"]["value"] == 0.5
    assert m["truncation_rate"] == 0.5 and m["no_answer_rate"] == 0.25 and m["timeout_rate"] == 0.25
    assert m["length"]["correct"]["mean"] == 10 and m["length"]["incorrect"]["mean"] == 30
    assert m["maj_at_k"]["2"]["value"] == pytest.approx(
        0.5
    )  # p1: the lone vote "2" is right; p2: a tie of wrong answers
    assert length_stats([]) == {"n": 0, "mean": None, "median": None, "p90": None, "max": None}
