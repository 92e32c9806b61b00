"""Accuracy metrics with uncertainty: pass@k, mean@n, maj@k, bootstrap CIs, paired differences.

All functions take a per-problem view of the samples (a list of 0/1 outcomes per problem) so
they are independent of where the samples came from.

* pass@k is the unbiased estimator of Chen et al. 2021 (Codex paper, Eq. 1):
  ``pass@k = E_problems[1 - C(n-c, k) / C(n, k)]`` for n samples of which c are correct.
* mean@n is the mean over problems of each problem's fraction of correct samples.
* maj@k: the most frequent answer among k samples (answers grouped by the verifier's own
  equivalence) is correct; averaged over k-subsets of the n samples.
* Confidence intervals are 95% percentile bootstrap intervals that resample problems and,
  within each resampled problem, its samples (two-level bootstrap), so they reflect both
  which problems were drawn and the sampling noise of the model.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Sequence

import numpy as np

BOOTSTRAP_REPLICATES = 1000
_MAX_CELLS = 4_000_000


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem (Chen et al. 2021), computed as a stable product."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _matrix(outcomes: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged per-problem outcomes as a padded (P, n_max) array and a mask."""
    width = max(len(o) for o in outcomes)
    values = np.zeros((len(outcomes), width))
    mask = np.zeros((len(outcomes), width), dtype=bool)
    for i, row in enumerate(outcomes):
        values[i, : len(row)] = row
        mask[i, : len(row)] = True
    return values, mask


def _resampled_counts(outcomes: Sequence[Sequence[float]], replicates: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two-level bootstrap: (B, P) correct counts and sample sizes after resampling problems,
    then samples within each problem."""
    rng = np.random.default_rng(seed)
    values, mask = _matrix(outcomes)
    sizes = mask.sum(axis=1)
    problems, width = values.shape
    pick = rng.integers(0, problems, size=(replicates, problems))
    counts = np.empty((replicates, problems))
    chunk = max(1, _MAX_CELLS // max(1, problems * width))
    for start in range(0, replicates, chunk):
        rows = pick[start : start + chunk]
        n_rows = sizes[rows]
        draws = (rng.random((len(rows), problems, width)) * n_rows[..., None]).astype(int)
        taken = values[rows[..., None], draws]
        taken[np.arange(width)[None, None, :] >= n_rows[..., None]] = 0
        counts[start : start + chunk] = taken.sum(axis=2)
    return counts, sizes[pick]


def _interval(estimates: np.ndarray) -> list[float]:
    lo, hi = np.percentile(estimates, [2.5, 97.5])
    return [round(float(lo), 6), round(float(hi), 6)]


def mean_at_n(
    outcomes: Sequence[Sequence[float]], replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0
) -> dict[str, object]:
    """``{value, ci95}``: mean over problems of the per-problem mean outcome."""
    if not outcomes:
        return {"value": None, "ci95": None}
    value = float(np.mean([np.mean(o) for o in outcomes]))
    counts, sizes = _resampled_counts(outcomes, replicates, seed)
    return {"value": round(value, 6), "ci95": _interval((counts / sizes).mean(axis=1))}


def pass_at_ks(
    outcomes: Sequence[Sequence[float]],
    ks: Sequence[int] | None = None,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> dict[str, dict[str, object]]:
    """pass@k for every k up to the smallest per-problem sample count (or the given ks)."""
    if not outcomes:
        return {}
    n_min = min(len(o) for o in outcomes)
    ks = list(ks) if ks is not None else list(range(1, n_min + 1))
    for k in ks:
        if k > n_min:
            raise ValueError(f"pass@{k} needs at least {k} samples per problem; the smallest problem has {n_min}")
    binary = [[1.0 if v >= 1.0 else 0.0 for v in o] for o in outcomes]
    counts, sizes = _resampled_counts(binary, replicates, seed)
    out = {}
    for k in ks:
        value = float(np.mean([pass_at_k(len(o), int(sum(o)), k) for o in binary]))
        n_max = int(sizes.max())
        table = np.zeros((n_max + 1, n_max + 1))
        for n in range(k, n_max + 1):
            for c in range(n + 1):
                table[n, c] = pass_at_k(n, c, k)
        boot = table[sizes.astype(int), counts.astype(int)].mean(axis=1)
        out[str(k)] = {"value": round(value, 6), "ci95": _interval(boot)}
    return out


def macro_average(
    per_benchmark: Sequence[Sequence[Sequence[float]]], replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0
) -> dict[str, object]:
    """Mean of several benchmarks' mean@n (Dr. GRPO's "Avg" column) with a CI: each bootstrap
    replicate resamples every benchmark independently (two-level) and averages the means."""
    if not per_benchmark or any(not o for o in per_benchmark):
        return {"value": None, "ci95": None}
    value = float(np.mean([np.mean([np.mean(o) for o in outcomes]) for outcomes in per_benchmark]))
    boots = []
    for index, outcomes in enumerate(per_benchmark):
        counts, sizes = _resampled_counts(outcomes, replicates, seed + index)
        boots.append((counts / sizes).mean(axis=1))
    return {"value": round(value, 6), "ci95": _interval(np.mean(boots, axis=0))}


def majority_correct(clusters: Sequence[int], correct: Sequence[bool], subset: Sequence[int]) -> float:
    """Is the most voted answer cluster among ``subset`` correct? Ties split the credit evenly
    between the tied clusters (so maj@k does not depend on sample order). Samples without an
    answer (cluster -1) do not vote; a subset with no votes scores 0."""
    votes: dict[int, int] = {}
    right: dict[int, bool] = {}
    for i in subset:
        if clusters[i] >= 0:
            votes[clusters[i]] = votes.get(clusters[i], 0) + 1
            right[clusters[i]] = right.get(clusters[i], False) or bool(correct[i])
    if not votes:
        return 0.0
    top = max(votes.values())
    winners = [c for c, v in votes.items() if v == top]
    return sum(right[c] for c in winners) / len(winners)


def maj_at_k_problem(
    clusters: Sequence[int], correct: Sequence[bool], k: int, max_subsets: int = 64, seed: int = 0
) -> float:
    """maj@k for one problem, averaged over all k-subsets (or ``max_subsets`` random ones)."""
    n = len(clusters)
    if k > n:
        raise ValueError(f"maj@{k} needs at least {k} samples, got {n}")
    if math.comb(n, k) <= max_subsets:
        subsets = list(itertools.combinations(range(n), k))
    else:
        rng = random.Random(seed)
        subsets = [rng.sample(range(n), k) for _ in range(max_subsets)]
    return float(np.mean([majority_correct(clusters, correct, s) for s in subsets]))


def bootstrap_mean(
    per_problem: Sequence[float], replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0
) -> dict[str, object]:
    """``{value, ci95}`` for a per-problem score (problems resampled)."""
    if not per_problem:
        return {"value": None, "ci95": None}
    values = np.asarray(per_problem, dtype=float)
    rng = np.random.default_rng(seed)
    boot = values[rng.integers(0, len(values), size=(replicates, len(values)))].mean(axis=1)
    return {"value": round(float(values.mean()), 6), "ci95": _interval(boot)}


def paired_difference(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0
) -> dict[str, object]:
    """Difference of mean@n, run B minus run A, on the same problems (same order): the same
    problems are resampled for both runs, which is what makes the interval tight."""
    if len(a) != len(b) or not a:
        raise ValueError("paired comparison needs the same, non-empty list of problems in both runs")
    rng = np.random.default_rng(seed)
    mean_a = np.array([np.mean(o) for o in a])
    mean_b = np.array([np.mean(o) for o in b])
    diff = mean_b - mean_a
    pick = rng.integers(0, len(diff), size=(replicates, len(diff)))
    return {
        "value": round(float(diff.mean()), 6),
        "ci95": _interval(diff[pick].mean(axis=1)),
        "n_problems": len(diff),
        "b_better": int((diff > 0).sum()),
        "a_better": int((diff < 0).sum()),
        "ties": int((diff == 0).sum()),
    }


def length_stats(lengths: Sequence[int]) -> dict[str, object]:
    if not lengths:
        return {"n": 0, "mean": None, "median": None, "p90": None, "max": None}
    values = np.asarray(lengths, dtype=float)
    return {
        "n": int(values.size),
        "mean": round(float(values.mean()), 2),
        "median": float(np.median(values)),
        "p90": float(np.percentile(values, 90)),
        "max": int(values.max()),
    }
