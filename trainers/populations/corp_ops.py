"""CoRP's geometry in amplitude space, as pure numpy functions (no model, no torch).

A perturbation spec Σ_j w_j σ_j ε(seed_j) is the vector of amplitudes a_j = w_j σ_j over the axes
(seed_j, σ_j). Distinct seeds give nearly orthogonal Gaussian directions of (after scaling) equal
norm, so inner products, norms, means and SVDs are computed on these short vectors and never in
weight space — exactly as the authors' ``core/corp_ops.py`` / ``core/collapse_ops.py`` do
(docs/algorithms.md §5.2). Step numbers are those of docs/algorithms.md §5.4 (Stage 1) and §5.5
(Stage 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from rlvr.trainers.populations.perturb import Component

Z_EPS = 1e-12


class KeySpace:
    """The axes (seed, σ) seen so far; vectors over them are dense arrays padded with zeros."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, float]] = []
        self._index: dict[tuple[int, float], int] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, seed: int, sigma: float) -> int:
        key = (int(seed), float(sigma))
        if key not in self._index:
            self._index[key] = len(self.keys)
            self.keys.append(key)
        return self._index[key]

    def pad(self, vector: np.ndarray) -> np.ndarray:
        return np.pad(vector, (0, len(self) - len(vector))) if len(vector) < len(self) else vector

    def stack(self, vectors: Sequence[np.ndarray]) -> np.ndarray:
        return np.stack([self.pad(v) for v in vectors]) if vectors else np.zeros((0, len(self)))

    def components(self, amplitudes: np.ndarray) -> list[Component]:
        """The spec of an amplitude vector: weight = amplitude / σ on every non-zero axis."""
        return [Component(seed, sigma, float(a) / sigma) for (seed, sigma), a in zip(self.keys, amplitudes) if a != 0.0]


# ------------------------------------------------------------------------------------------------
# Stage 0 / RandOpt sampling
# ------------------------------------------------------------------------------------------------
def draw_population(n: int, sigmas: Sequence[float], seed: int = 42) -> tuple[list[int], list[float]]:
    """Seeds without replacement from [0, 2^31), then σ uniformly from the list, from one
    ``default_rng(seed)`` (RandOpt ``randopt.py``; CoRP ``run_sampling``)."""
    rng = np.random.default_rng(seed)
    seeds = rng.choice(2**31, size=n, replace=False)
    chosen = rng.choice(np.asarray(sigmas, dtype=float), size=n)
    return [int(s) for s in seeds], [float(s) for s in chosen]


def best_sigma(sigmas: Sequence[float], scores: Sequence[float]) -> float:
    """The σ level with the highest mean score (first level on ties)."""
    levels = list(dict.fromkeys(float(s) for s in sigmas))
    means = [float(np.mean([r for s, r in zip(sigmas, scores) if s == level])) for level in levels]
    return levels[int(np.argmax(means))]


# ------------------------------------------------------------------------------------------------
# Stage 1: two-pass merge (§5.4 steps 1–6)
# ------------------------------------------------------------------------------------------------
def softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum()


def zscore(x: np.ndarray) -> np.ndarray:
    """(x − mean) / std with the population std (ddof 0); all zeros when std ≤ 1e-12."""
    x = np.asarray(x, dtype=float)
    std = x.std()
    return np.zeros_like(x) if std <= Z_EPS else (x - x.mean()) / std


def elite_indices(rewards: np.ndarray, q: float) -> np.ndarray:
    """E = {i : r_i ≥ quantile(r, q)} (numpy's linear interpolation); the argmax if empty (step 1)."""
    rewards = np.asarray(rewards, dtype=float)
    elite = np.flatnonzero(rewards >= np.quantile(rewards, q))
    return elite if len(elite) else np.array([int(np.argmax(rewards))])


def compatibility(A: np.ndarray, m1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 3: alignment α_i = cos(a_i, m¹) and dispersion δ_i = ‖a_i‖² − ⟨a_i, m¹/‖m¹‖⟩² (≥ 0)."""
    norm_m = np.linalg.norm(m1)
    norms = np.linalg.norm(A, axis=1)
    if norm_m <= Z_EPS:
        return np.zeros(len(A)), norms**2
    projection = A @ (m1 / norm_m)
    alignment = np.where(norms > Z_EPS, projection / np.maximum(norms, Z_EPS), 0.0)
    dispersion = np.maximum(norms**2 - projection**2, 0.0)
    return alignment, dispersion


@dataclass
class Cloud:
    """Weighted statistics of a set of amplitude vectors (step 6)."""

    mean: np.ndarray
    directions: np.ndarray  # top-k right singular vectors (rows, unit norm)
    eigenvalues: np.ndarray  # their λ = S² (amplitude² units)
    trace: float
    effective_rank: float
    kappa: float

    @property
    def norm(self) -> float:
        return float(np.linalg.norm(self.mean))

    def diagnostics(self) -> dict[str, float | list[float]]:
        return {
            "effective_rank": round(self.effective_rank, 4),
            "kappa": float(f"{self.kappa:.6g}"),
            "trace": float(f"{self.trace:.6g}"),
            "mean_norm": float(f"{self.norm:.6g}"),
            "top_eigenvalues": [float(f"{v:.6g}") for v in self.eigenvalues[:8]],
        }


def cloud_stats(A: np.ndarray, weights: np.ndarray, rank: int = 8) -> Cloud:
    """m = Σ w a; X = diag(√w)(A − m) = U S Vᵀ; λ = S²; eff. rank = exp(H(λ/tr C)); κ = ‖m‖²/(tr C + 1e-12)."""
    weights = np.asarray(weights, dtype=float)
    mean = weights @ A
    X = np.sqrt(weights)[:, None] * (A - mean)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)
    eig = S**2
    trace = float(eig.sum())
    if trace > 0:
        p = eig[eig > 0] / trace
        effective_rank = float(np.exp(-(p * np.log(p)).sum()))
    else:
        effective_rank = 0.0
    keep = min(rank, len(eig))
    # Axes no row touches are exactly zero in every right singular vector; the SVD leaves ~1e-17
    # there, which would put every such seed (a full-model noise draw each) into every spec.
    directions = np.where(np.any(X != 0, axis=0), Vt[:keep], 0.0)
    directions = directions / np.maximum(np.linalg.norm(directions, axis=1, keepdims=True), Z_EPS)
    return Cloud(mean, directions, eig[:keep], trace, effective_rank, float(mean @ mean) / (trace + 1e-12))


@dataclass
class Merge:
    """A two-pass merge: the consolidated direction is ``cloud.mean`` (step 7: θ ← θ_c + s·m)."""

    elite: np.ndarray
    weights_pass1: np.ndarray
    weights_pass2: np.ndarray
    alignment: np.ndarray
    dispersion: np.ndarray
    cloud: Cloud


def two_pass_merge(A: np.ndarray, rewards: np.ndarray, q: float, beta: float, rank: int = 8) -> Merge:
    """Reward-weighted aggregation (pass 1) then compatibility-aware reweighting (pass 2):
    w¹ = softmax(β r_E);  m¹ = Σ w¹ a;  w² = softmax(β r + z(α) − z(δ))  (§5.4 steps 1–5)."""
    rewards = np.asarray(rewards, dtype=float)
    elite = elite_indices(rewards, q)
    AE, rE = A[elite], rewards[elite]
    w1 = softmax(beta * rE)
    alignment, dispersion = compatibility(AE, w1 @ AE)
    w2 = softmax(beta * rE + zscore(alignment) - zscore(dispersion))
    return Merge(elite, w1, w2, alignment, dispersion, cloud_stats(AE, w2, rank))


# ------------------------------------------------------------------------------------------------
# Stage 2: scores, gate, search update (§5.5)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcomes:
    """Fixes, regressions and the constructive score of a candidate against the centre."""

    fixes: int
    regressions: int
    score: float
    lcb: float


def constructive_score(centre: Sequence[bool], candidate: Sequence[bool], lam: float) -> tuple[int, int, float]:
    """F = #(y=0, y′=1), G = #(y=1, y′=0), CS = (F − λ G) / n (step 2)."""
    y, y2 = np.asarray(centre, dtype=bool), np.asarray(candidate, dtype=bool)
    fixes = int((~y & y2).sum())
    regressions = int((y & ~y2).sum())
    return fixes, regressions, (fixes - lam * regressions) / max(len(y), 1)


def paired_lcb(centre: Sequence[bool], candidate: Sequence[bool], z: float = 1.0) -> float:
    """mean(Δ) − z·sd(Δ, ddof 1)/√n with Δ_j = y′_j − y_j ∈ {−1, 0, 1} (step 4)."""
    diff = np.asarray(candidate, dtype=float) - np.asarray(centre, dtype=float)
    n = len(diff)
    if n == 0:
        return float("-inf")
    sd = float(diff.std(ddof=1)) if n > 1 else 0.0
    return float(diff.mean() - z * sd / math.sqrt(n))


def compare(centre: Sequence[bool], candidate: Sequence[bool], lam: float, z: float = 1.0) -> Outcomes:
    fixes, regressions, score = constructive_score(centre, candidate, lam)
    return Outcomes(fixes, regressions, score, paired_lcb(centre, candidate, z))


def gate_passes(centre: Sequence[bool], candidate: Sequence[bool], lam: float, z: float = 1.0) -> bool:
    """The validation gate on held-out examples (step 4): CS > 0 and paired LCB > 0."""
    outcome = compare(centre, candidate, lam, z)
    return outcome.score > 0 and outcome.lcb > 0


def probe_accepts(
    centre: Sequence[bool], candidate: Sequence[bool], z: float = 1.0, epsilon: float = 0.0
) -> tuple[bool, float]:
    """The second gate (step 5): paired LCB on the probe set > 0 and accuracy ≥ the centre's + ε."""
    lcb = paired_lcb(centre, candidate, z)
    return lcb > 0 and float(np.mean(candidate)) >= float(np.mean(centre)) + epsilon, lcb


def ess(weights: np.ndarray) -> float:
    """Effective sample size 1 / Σ w²."""
    weights = np.asarray(weights, dtype=float)
    return float(1.0 / np.square(weights).sum())


def ess_temperature(scores: np.ndarray, target: float, iterations: int = 60) -> float:
    """The smallest T with ESS(softmax(scores / T)) ≥ target, by bisection (ESS grows with T)."""
    scores = np.asarray(scores, dtype=float)
    hi = 1.0
    while ess(softmax(scores / hi)) < target and hi < 1e12:
        hi *= 2.0
    lo = 0.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if mid > 0 and ess(softmax(scores / mid)) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def search_weights(scores: np.ndarray, target_ess: float) -> tuple[np.ndarray, float | None]:
    """Weights over the positive candidates (step 3): softmax(CS/T) at the ESS-targeted T, or
    uniform when there is one, their scores do not vary, or the target reaches their count.
    ``target_ess`` is already min(#positive, 2·ESS_r). Returns (weights, T or None)."""
    scores = np.asarray(scores, dtype=float)
    n = len(scores)
    if n == 1 or scores.std() <= Z_EPS or target_ess >= n:
        return np.full(n, 1.0 / n), None
    temperature = ess_temperature(scores, target_ess)
    return softmax(scores / temperature), temperature


def update_isotropic_share(share: float, positive_fraction: float) -> float:
    """λ_iso ← clip(½ λ_iso + ½ clip(0.15 + 0.8 (1 − p), 0.15, 0.95), 0.05, 0.95)."""
    target = float(np.clip(0.15 + 0.8 * (1.0 - positive_fraction), 0.15, 0.95))
    return float(np.clip(0.5 * share + 0.5 * target, 0.05, 0.95))


def regression_lambda(round_index: int, rounds: int, start: float, final: float) -> float:
    """λ_r linear from ``start`` (round 1) to ``final`` (round R)."""
    t = (round_index - 1) / (rounds - 1) if rounds > 1 else 0.0
    return start + t * (final - start)


def target_ess(round_index: int, rounds: int, start: float = 16.0, end: float = 4.0) -> float:
    """ESS_r geometric from 16 (round 1) to 4 (round R)."""
    t = (round_index - 1) / (rounds - 1) if rounds > 1 else 0.0
    return float(math.exp((1 - t) * math.log(start) + t * math.log(end)))


def low_rank_coefficient_scale(cloud: Cloud, low_rank_scale: str = "authors") -> np.ndarray:
    """Per-direction standard deviation (in units of σ√(1 − λ_iso)) of the low-rank coefficients:
    ``authors``: √λ_k (λ_k in amplitude² units, as the released code); ``trace``: √(λ_k / Σ_k λ_k),
    so Σ_k E c_k² = σ²(1 − λ_iso) exactly, whatever the cloud's scale."""
    eigenvalues = np.maximum(np.asarray(cloud.eigenvalues, dtype=float), 0.0)
    if low_rank_scale == "authors":
        return np.sqrt(eigenvalues)
    if low_rank_scale == "trace":
        total = float(eigenvalues.sum())
        return np.sqrt(eigenvalues / total) if total > 0 else np.zeros_like(eigenvalues)
    raise ValueError(f"low_rank_scale must be 'authors' or 'trace', not {low_rank_scale!r}")


def expected_low_rank_share(cloud: Cloud | None, isotropic_share: float, low_rank_scale: str = "authors") -> float:
    """E‖low-rank part‖² / E‖proposal‖² of a Stage-2 local candidate (amplitude space; the fresh
    isotropic axis is orthogonal to the cloud's directions): 1 − λ_iso under ``trace``, and
    (1 − λ_iso)Σλ_k / (λ_iso + (1 − λ_iso)Σλ_k) under ``authors``."""
    if cloud is None or not len(cloud.eigenvalues):
        return 0.0
    low = (1.0 - isotropic_share) * float(np.square(low_rank_coefficient_scale(cloud, low_rank_scale)).sum())
    return low / (isotropic_share + low) if isotropic_share + low > 0 else 0.0


def local_amplitudes(
    space: KeySpace,
    seeds: Sequence[int],
    sigma: float,
    isotropic_share: float,
    cloud: Cloud | None,
    normals: np.ndarray,
    low_rank_scale: str = "authors",
) -> list[np.ndarray]:
    """Stage 2 step 1: an isotropic axis (seed, σ√λ_iso) plus Σ_k c_k u_k.

    ``low_rank_scale="authors"`` (the released code, reproduced, not "fixed"; docs/algorithms.md §5.5
    note): c_k = σ √(1 − λ_iso) √λ_k z_k with λ_k in amplitude² units, so this part scales as
    σ·√λ_k, a σ² quantity, and is negligible next to the isotropic one at small σ.
    ``low_rank_scale="trace"``: c_k = σ √(1 − λ_iso) √(λ_k / Σλ) z_k, so the low-rank part carries
    share 1 − λ_iso of the expected squared norm and the isotropic part λ_iso
    (``expected_low_rank_share``)."""
    sigma_iso = sigma * math.sqrt(isotropic_share)
    scale = (
        low_rank_coefficient_scale(cloud, low_rank_scale)
        if cloud is not None and len(cloud.eigenvalues)
        else np.zeros(0)
    )
    out = []
    for row, seed in enumerate(seeds):
        axis = space.index(seed, sigma_iso)
        vector = np.zeros(len(space))
        vector[axis] = sigma_iso
        if cloud is not None and len(scale):
            k = len(scale)
            coefficients = sigma * math.sqrt(1.0 - isotropic_share) * scale * normals[row, :k]
            low_rank = coefficients @ cloud.directions
            vector[: len(low_rank)] += low_rank
        out.append(vector)
    return [space.pad(v) for v in out]


# ------------------------------------------------------------------------------------------------
# The hold-out gate (ours): a candidate replaces the current model only when it is reliably better
# on data that chose nothing (ESConfig docstring)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HoldoutDecision:
    accepted: bool
    lcb: float
    fixes: int
    regressions: int
    n: int

    def record(self) -> dict[str, float | int | bool]:
        return {
            "accepted": self.accepted,
            "lcb": float(f"{self.lcb:.6g}"),
            "fixes": self.fixes,
            "regressions": self.regressions,
            "n": self.n,
        }


def holdout_gate(current: Sequence[bool], candidate: Sequence[bool], z: float = 1.645) -> HoldoutDecision:
    """Accept ⇔ mean(Δ) − z·sd(Δ)/√n > 0 on the hold-out split (Δ_j = y′_j − y_j): strictly, so
    a tie (Δ ≡ 0: bound exactly 0) or a loss is rejected, and so is a gain within the noise."""
    fixes, regressions, _ = constructive_score(current, candidate, 1.0)
    lcb = paired_lcb(current, candidate, z)
    return HoldoutDecision(bool(lcb > 0), lcb, fixes, regressions, len(current))


# ------------------------------------------------------------------------------------------------
# Split-half low-rank analysis (OUR RECONSTRUCTION: the protocol is not in the release, §5.6)
# ------------------------------------------------------------------------------------------------
@dataclass
class SplitHalf:
    rank: int
    overlap: float  # mean over splits of ‖V1ᵀ V2‖_F² / r
    null_overlap: float  # the same with shuffled rewards
    splits: int
    per_split: list[float] = field(default_factory=list)
    null_per_split: list[float] = field(default_factory=list)


def _reward_subspace(A: np.ndarray, rewards: np.ndarray, rank: int) -> np.ndarray:
    """An orthonormal basis (rows) of the reward-carrying subspace of one half: the
    reward-weighted mean g = Σ_i (r_i − r̄) a_i first, then the principal directions of the
    Stage-1 cloud of that half (two-pass merge with q = 0.5, β = 1) until ``rank`` rows."""
    centred = np.asarray(rewards, dtype=float) - float(np.mean(rewards))
    g = centred @ A
    candidates = [g] + list(two_pass_merge(A, np.asarray(rewards, dtype=float), 0.5, 1.0, rank).cloud.directions)
    basis = np.linalg.qr(np.stack(candidates).T)[0].T
    return basis[:rank]


def split_half_overlap(A: np.ndarray, rewards: np.ndarray, rank: int, splits: int = 20, seed: int = 0) -> SplitHalf:
    """Reproducibility of the reward-carrying rank-r subspace between random halves of the
    population, ‖V1ᵀV2‖_F² / r (mean squared cosine of the principal angles), against the same
    statistic after shuffling the rewards (null) and the chance level r/D.

    Rows must live in a shared coordinate system where different perturbations overlap: we use
    coordinate sketches of the weight-space noise (``perturb.noise_sketch``: a·ε(seed) on fixed
    coordinates). Single-seed amplitude vectors would be mutually orthogonal by construction."""
    rng = np.random.default_rng(seed)
    rewards = np.asarray(rewards, dtype=float)
    n = len(A)
    rank = max(1, min(rank, n // 2 - 1, A.shape[1]))
    real, null = [], []
    for _ in range(splits):
        order = rng.permutation(n)
        h1, h2 = order[: n // 2], order[n // 2 :]
        for target, r in ((real, rewards), (null, rng.permutation(rewards))):
            v1, v2 = _reward_subspace(A[h1], r[h1], rank), _reward_subspace(A[h2], r[h2], rank)
            target.append(float(np.square(v1 @ v2.T).sum() / rank))
    return SplitHalf(rank, float(np.mean(real)), float(np.mean(null)), splits, real, null)
