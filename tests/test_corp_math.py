"""CoRP / RandOpt formulas against hand-computed values (docs/algorithms.md §4.1, §5.4, §5.5)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.trainers.populations.corp_ops import (
    KeySpace,
    best_sigma,
    cloud_stats,
    compare,
    compatibility,
    constructive_score,
    draw_population,
    elite_indices,
    ess,
    ess_temperature,
    gate_passes,
    local_amplitudes,
    paired_lcb,
    probe_accepts,
    regression_lambda,
    search_weights,
    softmax,
    split_half_overlap,
    target_ess,
    two_pass_merge,
    update_isotropic_share,
    zscore,
)
from rlvr.trainers.populations.perturb import Component, Perturber, merge_components, spec_from_json, spec_to_json


# ---------------------------------------------------------------- Stage 0 / RandOpt sampling
def test_population_draw_is_the_released_rng_sequence():
    seeds, sigmas = draw_population(6, [0.001, 0.002], seed=42)
    rng = np.random.default_rng(42)
    assert seeds == [int(s) for s in rng.choice(2**31, size=6, replace=False)]
    assert sigmas == [float(s) for s in rng.choice(np.array([0.001, 0.002]), size=6)]
    assert len(set(seeds)) == 6 and draw_population(6, [0.001, 0.002], seed=42) == (seeds, sigmas)


def test_best_sigma_is_the_level_with_the_best_mean_score():
    assert best_sigma([1e-3, 2e-3, 1e-3, 2e-3], [0.2, 0.5, 0.4, 0.0]) == 1e-3  # means 0.3 vs 0.25
    assert best_sigma([1e-3, 2e-3], [0.5, 0.5]) == 1e-3  # ties: first level


# ---------------------------------------------------------------- Stage 1
def test_elite_set_uses_linear_interpolated_quantile():
    r = np.array([0.1, 0.5, 0.3, 0.9])  # quantile(0.5) = 0.4
    assert elite_indices(r, 0.5).tolist() == [1, 3]
    assert elite_indices(r, 0.0).tolist() == [0, 1, 2, 3]
    assert elite_indices(r, 1.0).tolist() == [3]


def test_zscore_uses_population_std_and_zero_for_constant_input():
    assert np.allclose(zscore([1.0, 2.0, 3.0]), np.array([-1, 0, 1]) / math.sqrt(2 / 3))
    assert zscore([4.0, 4.0, 4.0]).tolist() == [0.0, 0.0, 0.0]


def test_two_pass_merge_by_hand():
    # amplitudes a1 = e1, a2 = 2 e2, a3 = e3; rewards (1, 0, 1); β = ln 2 so w¹ ∝ (2, 1, 2)
    A = np.diag([1.0, 2.0, 1.0])
    beta = math.log(2)
    merge = two_pass_merge(A, np.array([1.0, 0.0, 1.0]), q=0.0, beta=beta)
    assert np.allclose(merge.weights_pass1, [0.4, 0.2, 0.4])
    # m¹ = (0.4, 0.4, 0.4): every a_i has cosine 1/√3 with it, so z(α) = 0
    assert np.allclose(merge.alignment, [1 / math.sqrt(3)] * 3)
    # δ = ‖a‖² − ⟨a, m̂⟩² = (2/3, 8/3, 2/3);  z(δ) = (−1/√2, √2, −1/√2)
    assert np.allclose(merge.dispersion, [2 / 3, 8 / 3, 2 / 3])
    expected = np.array([2 * math.exp(1 / math.sqrt(2)), math.exp(-math.sqrt(2)), 2 * math.exp(1 / math.sqrt(2))])
    assert np.allclose(merge.weights_pass2, expected / expected.sum())
    assert np.allclose(merge.cloud.mean, merge.weights_pass2 @ A)


def test_compatibility_floors_dispersion_and_handles_a_zero_mean():
    alignment, dispersion = compatibility(np.array([[1.0, 0.0], [2.0, 0.0]]), np.array([3.0, 0.0]))
    assert np.allclose(alignment, [1, 1]) and np.allclose(dispersion, [0, 0])
    alignment, dispersion = compatibility(np.array([[1.0, 0.0]]), np.zeros(2))
    assert alignment.tolist() == [0.0] and dispersion.tolist() == [1.0]


def test_cloud_statistics_by_hand():
    cloud = cloud_stats(np.eye(2), np.array([0.5, 0.5]), rank=8)
    # m = (½, ½); X = √½ (A − m) has one singular value √½ → λ = ½
    assert np.allclose(cloud.mean, [0.5, 0.5])
    assert np.allclose(cloud.eigenvalues[0], 0.5) and np.allclose(cloud.trace, 0.5)
    assert cloud.effective_rank == pytest.approx(1.0)
    assert cloud.kappa == pytest.approx(0.5 / (0.5 + 1e-12))
    assert np.allclose(np.abs(cloud.directions[0]), [1 / math.sqrt(2)] * 2)
    three = cloud_stats(np.diag([1.0, 1.0, 1.0]) * 3, np.full(3, 1 / 3))
    assert three.effective_rank == pytest.approx(2.0)  # two equal eigenvalues (centring removes one)


def test_cloud_directions_are_exactly_zero_on_axes_no_vector_touches():
    rng = np.random.default_rng(3)
    A = np.zeros((6, 20))
    A[:, :6] = rng.standard_normal((6, 6)) * 1e-3  # axes 6..19 belong to seeds outside the set
    cloud = cloud_stats(A, np.full(6, 1 / 6), rank=4)
    assert np.all(cloud.directions[:, 6:] == 0.0)  # not ~1e-17: each would be a noise draw per spec
    assert np.allclose(np.linalg.norm(cloud.directions, axis=1), 1.0)
    reference = np.linalg.svd(np.sqrt(1 / 6) * (A - cloud.mean), full_matrices=False)[2][:4]
    assert np.allclose(np.abs(cloud.directions @ reference.T), np.eye(4), atol=1e-9)


# ---------------------------------------------------------------- Stage 2
def test_constructive_score_and_lcb_by_hand():
    y = [1, 1, 0, 0, 1]
    y2 = [1, 0, 1, 1, 1]
    assert constructive_score(y, y2, lam=2.0) == (2, 1, 0.0)
    assert constructive_score(y, y2, lam=1.0) == (2, 1, pytest.approx(0.2))
    # Δ = (0, −1, 1, 1, 0): mean 0.2, sd(ddof 1) = √0.7
    assert paired_lcb(y, y2, z=1.0) == pytest.approx(0.2 - math.sqrt(0.7) / math.sqrt(5))
    assert paired_lcb(y, y2, z=0.0) == pytest.approx(0.2)
    outcome = compare(y, y2, 1.0)
    assert (outcome.fixes, outcome.regressions) == (2, 1)


def test_gate_accepts_reliable_gains_and_rejects_the_rest():
    centre = [0] * 10 + [1] * 10
    fixes_four = [1] * 4 + [0] * 6 + [1] * 10  # Δ: four +1, sd small enough
    assert gate_passes(centre, fixes_four, lam=2.0)
    one_fix_one_regression = [1] + [0] * 9 + [0] + [1] * 9
    assert not gate_passes(centre, one_fix_one_regression, lam=2.0)  # CS = (1 − 2)/20 < 0
    noisy = [1, 1] + [0] * 8 + [0] + [1] * 9  # CS = (2 − 0.5)/20 > 0 but LCB = 0.05 − sd/√20 ≈ −0.038
    assert compare(centre, noisy, 0.5).score > 0 and not gate_passes(centre, noisy, lam=0.5)
    assert not gate_passes(centre, centre, lam=2.0)
    accepted, lcb = probe_accepts(centre, fixes_four)
    assert accepted and lcb == pytest.approx(0.2 - np.std([1] * 4 + [0] * 16, ddof=1) / math.sqrt(20))
    assert probe_accepts(centre, fixes_four, epsilon=0.5)[0] is False  # must also beat the centre by ε


def test_ess_and_its_temperature_by_hand():
    assert ess(np.array([0.5, 0.25, 0.25])) == pytest.approx(1 / 0.375)
    # two scores (1, 0): ESS = 1.5 ⇔ p = (1 + √(1/3))/2 ⇔ 1/T = ln(p/(1 − p))
    p = (1 + math.sqrt(1 / 3)) / 2
    T = ess_temperature(np.array([1.0, 0.0]), 1.5)
    assert T == pytest.approx(1 / math.log(p / (1 - p)), rel=1e-9)
    assert ess(softmax(np.array([1.0, 0.0]) / T)) >= 1.5 > ess(softmax(np.array([1.0, 0.0]) / (T * (1 - 1e-6))))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-20, 20).map(lambda v: v / 20), min_size=3, max_size=12), st.floats(1.05, 2.9))
def test_ess_temperature_is_the_smallest_reaching_the_target(scores, target):
    scores = np.array(scores)
    if scores.std() < 1e-6 or (scores == scores.max()).sum() >= target:
        return  # ESS → (number of tied maxima) as T → 0: any T reaches the target
    T = ess_temperature(scores, target)
    assert ess(softmax(scores / T)) >= target - 1e-9
    assert ess(softmax(scores / (T * 0.999))) < target + 1e-9


def test_search_weights_fall_back_to_uniform():
    assert search_weights(np.array([0.3]), 1.0)[0].tolist() == [1.0]
    assert np.allclose(search_weights(np.array([0.2, 0.2, 0.2]), 2.0)[0], 1 / 3)
    assert np.allclose(search_weights(np.array([0.1, 0.2, 0.3]), 3.0)[0], 1 / 3)  # target ≥ count
    weights, T = search_weights(np.array([0.1, 0.2, 0.3, 0.05]), 2.0)
    assert T is not None and ess(weights) == pytest.approx(2.0, abs=1e-6)


def test_isotropic_share_update_by_hand():
    assert update_isotropic_share(0.5, 0.25) == pytest.approx(0.625)  # target 0.15 + 0.8·0.75 = 0.75
    assert update_isotropic_share(0.5, 1.0) == pytest.approx(0.325)  # target 0.15
    assert update_isotropic_share(0.05, 1.0) == pytest.approx(0.1)
    assert update_isotropic_share(0.95, 0.0) == pytest.approx(0.95)  # both clipped at 0.95


def test_schedules():
    assert [regression_lambda(r, 3, 2.0, 1.0) for r in (1, 2, 3)] == [2.0, 1.5, 1.0]
    assert [target_ess(r, 3) for r in (1, 2, 3)] == pytest.approx([16, 8, 4])
    assert target_ess(1, 1) == pytest.approx(16)


def test_local_population_amplitudes():
    space = KeySpace()
    for seed in (11, 12):
        space.index(seed, 0.01)
    cloud = cloud_stats(np.array([[0.01, 0.0], [0.0, 0.03]]), np.array([0.5, 0.5]), rank=8)
    normals = np.array([[1.0, 0.0], [0.0, 0.0]])
    vectors = local_amplitudes(space, [101, 102], sigma=0.02, isotropic_share=0.25, cloud=cloud, normals=normals)
    assert len(space) == 4 and space.keys[2] == (101, 0.02 * 0.5)
    first = vectors[0]
    assert first[2] == pytest.approx(0.01) and first[3] == 0.0  # σ√λ_iso on its own axis
    expected = 0.02 * math.sqrt(0.75) * math.sqrt(cloud.eigenvalues[0]) * cloud.directions[0]
    assert np.allclose(first[:2], expected)
    assert np.allclose(vectors[1][:2], 0) and vectors[1][3] == pytest.approx(0.01)
    assert space.components(first)[0] == Component(11, 0.01, first[0] / 0.01)


def test_split_half_finds_a_planted_reward_direction_and_not_in_the_null():
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((1000, 20))
    u = np.zeros(20)
    u[0] = 1.0
    rewards = rows @ u
    result = split_half_overlap(rows, rewards, rank=1, splits=10)
    assert result.overlap > 0.8 and result.null_overlap < 0.4


# ---------------------------------------------------------------- perturbation engine
def _toy():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(30, 40), torch.nn.LayerNorm(40), torch.nn.Linear(40, 5))


def _weights(model):
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("noise_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("cache_gb", [0.0, 0.01])
def test_specs_apply_bit_exactly_and_restore_the_base_byte_for_byte(noise_dtype, cache_gb):
    model = _toy()
    base = _weights(model)
    perturber = Perturber(model, noise_dtype, cache_gb)
    spec = [Component(7, 0.01, 1.5), Component(3, 0.02, -0.5), Component(7, 0.01, 0.5)]
    perturber.apply(spec)
    first = _weights(model)
    assert not all(torch.equal(a, b) for a, b in zip(first, base))
    perturber.apply([Component(99, 0.5)])
    perturber.apply(list(reversed(spec)))
    assert all(torch.equal(a, b) for a, b in zip(first, _weights(model)))  # same spec -> same weights, any order
    perturber.restore()
    assert all(a.numpy().tobytes() == b.numpy().tobytes() for a, b in zip(base, _weights(model)))
    fresh = _toy()
    Perturber(fresh, noise_dtype).apply(spec_from_json(spec_to_json(spec, "toy", noise_dtype)))
    assert all(torch.equal(a, b) for a, b in zip(first, _weights(fresh)))  # reproducible from the JSON spec alone


def test_a_spec_with_more_seeds_than_the_cache_holds_stays_within_it_and_gives_the_same_weights():
    model = _toy()
    perturber = Perturber(model, "float32", 0.0)
    slots = 3
    perturber.cache_bytes = slots * perturber.seed_bytes
    spec = [Component(seed, 0.01, 1.0) for seed in range(10)]
    perturber.apply(spec)
    cached = _weights(model)
    assert len(perturber._cache) == slots and perturber.draws == 10  # 3 cached, 7 drawn tensor by tensor
    perturber.apply(spec)
    assert perturber.draws == 17 and all(torch.equal(a, b) for a, b in zip(cached, _weights(model)))
    uncached = _toy()
    Perturber(uncached, "float32").apply(spec)
    assert all(torch.equal(a, b) for a, b in zip(cached, _weights(uncached)))
    perturber.apply([Component(42, 0.01)])  # a new seed evicts the least recently used one
    assert len(perturber._cache) == slots and 42 in perturber._cache


def test_noise_is_per_tensor_from_the_same_seed_and_sigma_is_absolute():
    model = _toy()
    perturber = Perturber(model, "float32")
    perturber.apply([Component(5, 0.1)])
    for name, p in perturber.params:
        noise = torch.randn(p.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float32)
        assert torch.allclose(p - perturber.base[name], 0.1 * noise, atol=1e-6)


def test_merge_components_sums_shared_axes_and_drops_zeros():
    merged = merge_components(
        [Component(2, 0.1, 1.0), Component(1, 0.1, 2.0), Component(2, 0.1, -1.0), Component(1, 0.2, 1.0)]
    )
    assert merged == [Component(1, 0.1, 2.0), Component(1, 0.2, 1.0)]
