"""Live peer conformance of the trainers' loss math, as the verifiers have it against EvalPlus:
the same random batches (uneven lengths, an all-masked row, a zero advantage, ratios of e^±3 on
both sides of every clip) through ``policy_update`` itself and through the installed peers —
TRL 1.16's ``GRPOTrainer`` loss for each ``loss_type`` (and ``importance_sampling_level=
"sequence"``, its GSPO) and verl 0.9.1's ``core_algos`` (``agg_loss`` modes, the vanilla / dual-clip,
GSPO and CISPO policy losses, the GRPO, RLOO and REINFORCE++ advantages, the k3 KL, the TIS
weight). Loss and gradient agree to 1e-6, or the departure is one of the README's table
("Against TRL and verl") and a test below pins it. A later change of ours, or of a pinned peer
version, that breaks an agreement fails here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from peer_batches import ours, random_batch, trl, verl_policy_loss
from rlvr.trainers.policy_gradient.advantages import compute_advantages
from rlvr.trainers.policy_gradient.losses import k3_kl, tis_weights, token_weights

pytest.importorskip("trl")
pytest.importorskip("verl")

SEEDS = (0, 1, 2)
TOL = 1e-6
CLIPS = ((0.2, 0.2), (0.2, 0.28), (3e-4, 4e-4))  # PPO, DAPO's clip-higher, GSPO's paper range


def close(a, b) -> None:
    (loss_a, grad_a), (loss_b, grad_b) = a, b
    assert abs(loss_a - loss_b) < TOL, (loss_a, loss_b)
    assert float((grad_a - grad_b).abs().max()) < TOL
    assert float(grad_a.abs().max()) > 1e-3  # something trained: a gradient of zero agrees with anything


# --- TRL ---------------------------------------------------------------------------------------

#: TRL loss_type -> our aggregation (with ppo_clip at the token level, gspo at the sequence level)
TRL_AGG = {"grpo": "seq_mean_token_mean", "bnpo": "token_mean", "dr_grpo": "seq_mean_token_sum_norm"}
TRL_AGG["dapo"] = "token_mean"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss_type", sorted(TRL_AGG))
@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("beta,with_tis", [(0.0, False), (0.04, True)])
def test_trl_loss_types(seed, loss_type, level, beta, with_tis):
    b = random_batch(seed)
    policy = "ppo_clip" if level == "token" else "gspo"
    for eps in CLIPS:
        tis = tis_weights(b.old, b.sampler, 2.0) if with_tis else None
        settings = {"loss_agg": TRL_AGG[loss_type], "policy_loss": policy, "eps_low": eps[0], "eps_high": eps[1]}
        settings |= {"beta": beta, "tis_cap": 2.0 if with_tis else None, "loss_constant": 16}
        theirs = trl(b, loss_type, level, eps, beta, tis, max_completion_length=16)
        close(ours(b, **settings), theirs)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("with_tis", [False, True])
def test_trl_cispo(seed, with_tis):
    """TRL's CISPO clamps the weight at ``epsilon_high`` (an absolute cap, no lower bound): ours
    with ``eps_low: 1`` (no lower bound) and 1 + ``eps_high``; token-mean as its ``dapo``."""
    b = random_batch(seed)
    tis = tis_weights(b.old, b.sampler, 2.0) if with_tis else None
    for eps_high in (0.28, 4.0):
        settings = {"loss_agg": "token_mean", "policy_loss": "cispo", "eps_low": 1.0, "eps_high": eps_high}
        theirs = trl(b, "cispo", "token", (0.2, 1 + eps_high), tis=tis)
        close(ours(b, **settings, tis_cap=2.0 if with_tis else None), theirs)


def test_departure_trl_bias_corrected_kl():
    """TRL 1.16 multiplies the k3 KL by the (differentiable) ratio by default
    (``use_bias_correction_kl=True``); ours is plain k3 (DeepSeekMath eq. 4, oat, verl). With
    TRL's switch off the two agree (above); on, the loss moves by β·agg(k3·(ρ − 1))."""
    b = random_batch(0)
    settings = {"loss_agg": "seq_mean_token_mean", "beta": 0.04}
    mine, theirs = ours(b, **settings), trl(b, "grpo", beta=0.04, bias_corrected_kl=True)
    ratio = torch.exp(b.logp - b.old)
    shift = 0.04 * float((k3_kl(b.logp, b.ref) * (ratio - 1) * token_weights(b.mask, "seq_mean_token_mean")).sum())
    assert abs(theirs[0] - mine[0] - shift) < TOL and abs(shift) > 1e-3


def test_departure_trl_does_not_cap_the_gspo_log_ratio():
    """A sequence whose mean log ratio exceeds 10: verl (and we) cap it there, TRL does not."""
    b = random_batch(0)
    b.logp[0, :] = b.old[0, :] + 12.0
    b.advantages[0] = -1.0
    settings = {"loss_agg": "seq_mean_token_mean", "policy_loss": "gspo", "eps_low": 0.2, "eps_high": 0.2}
    (mine, _), (theirs, _) = ours(b, **settings), trl(b, "grpo", "sequence")
    rows = b.mask.shape[0]
    assert abs((theirs - mine) - (np.exp(12.0) - np.exp(10.0)) / rows) < 1e-6 * np.exp(12.0)


# --- verl --------------------------------------------------------------------------------------

AGGS = ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("with_tis", [False, True])
def test_verl_policy_losses(seed, agg, with_tis):
    """vanilla (no dual clip: c beyond any ratio here; and c = 3, 10), GSPO (verl's is the token
    form: ours ``gspo_token``; ``gspo`` too where TIS is off), CISPO, under every aggregation, with
    verl counting every row (``global_batch_size``: our convention for all-masked rows)."""
    b = random_batch(seed)
    tis = tis_weights(b.old, b.sampler, 2.0) if with_tis else None
    common = {"loss_agg": agg, "loss_constant": 16, "tis_cap": 2.0 if with_tis else None}
    peer = {"tis": tis, "loss_scale_factor": 16, "global_batch_size": b.rows}
    for eps in CLIPS:
        clip = {"eps_low": eps[0], "eps_high": eps[1]}
        close(ours(b, **common, **clip), verl_policy_loss(b, "vanilla", agg, eps, 1e9, **peer))
        for c in (3.0, 10.0):
            close(ours(b, **common, **clip, clip_ratio_c=c), verl_policy_loss(b, "vanilla", agg, eps, c, **peer))
        theirs = verl_policy_loss(b, "gspo", agg, eps, **peer)
        close(ours(b, **common, **clip, policy_loss="gspo_token"), theirs)
        if not with_tis:
            close(ours(b, **common, **clip, policy_loss="gspo"), theirs)
    for eps in ((1.0, 0.28), (0.2, 0.28)):
        theirs = verl_policy_loss(b, "cispo", agg, eps, **peer)
        close(ours(b, **common, policy_loss="cispo", eps_low=eps[0], eps_high=eps[1]), theirs)


@pytest.mark.parametrize("agg", ["seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_convention_all_masked_rows_count_in_row_based_aggregations(agg):
    """Our convention (oat's and TRL's): a row with no trained token (overlong-masked,
    unverifiable) still counts in a row-based aggregation's 1/S. verl's ``agg_loss`` leaves such
    rows out: its loss is ours × S / (rows with a token)."""
    b = random_batch(1)
    rows, nonempty = b.rows, int((b.mask.sum(dim=1) > 0).sum())
    assert nonempty < rows
    mine = ours(b, loss_agg=agg, loss_constant=16)
    theirs = verl_policy_loss(b, "vanilla", agg, clip_ratio_c=1e9, loss_scale_factor=16)
    assert abs(theirs[0] - mine[0] * rows / nonempty) < TOL
    assert float((theirs[1] - mine[1] * rows / nonempty).abs().max()) < TOL


@pytest.mark.parametrize("seed", SEEDS)
def test_verl_agg_loss_modes(seed):
    """``agg_loss`` on a random loss matrix against ``rlvr.trainers.policy_gradient.losses.token_weights``; verl's
    ``token-sum`` and ``seq-mean-token-sum`` have no counterpart (README: not offered)."""
    from verl.trainer.ppo.core_algos import agg_loss

    b = random_batch(seed)
    values = torch.randn(b.logp.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    for ours_name, theirs_name in (("seq_mean_token_mean", "seq-mean-token-mean"), ("token_mean", "token-mean")):
        theirs = agg_loss(values, b.mask, theirs_name, global_batch_size=b.rows)
        assert abs(float((values * token_weights(b.mask, ours_name)).sum()) - float(theirs)) < TOL
    theirs = agg_loss(values, b.mask, "seq-mean-token-sum-norm", global_batch_size=b.rows, loss_scale_factor=16)
    assert abs(float((values * token_weights(b.mask, "seq_mean_token_sum_norm", 16)).sum()) - float(theirs)) < TOL


def test_departure_verl_clamps_the_token_log_ratio_at_20():
    """verl clamps log ρ to ±20 before exp in the vanilla and CISPO losses; ours does not. They
    differ only where a negative advantage meets a ratio above e^20 with no dual clip."""
    b = random_batch(0)
    b.logp[0, 0] = b.old[0, 0] + 25.0
    b.advantages[0] = -1.0
    settings = {"loss_agg": "token_mean"}
    (mine, _), (theirs, _) = ours(b, **settings), verl_policy_loss(b, "vanilla", "token_mean", clip_ratio_c=1e30)
    tokens = float(b.mask.sum())
    assert abs((mine - theirs) - (np.exp(25.0) - np.exp(20.0)) / tokens) < 1e-6 * np.exp(25.0)
    close(ours(b, **settings, clip_ratio_c=10.0), verl_policy_loss(b, "vanilla", "token_mean", clip_ratio_c=10.0))


# --- advantages, KL, TIS ---------------------------------------------------------------------


def _rewards(seed: int, groups: int = 4, size: int = 4):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 2, (groups * size,), generator=g).double() + 0.1 * torch.rand(groups * size, generator=g)
    rewards[:size] = 1.0  # one group of equal rewards: zero advantage in every estimator
    lengths = torch.randint(1, 9, (groups * size,), generator=g)
    mask = (torch.arange(8)[None, :] < lengths[:, None]).double()
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(len(rewards)), lengths - 1] = rewards  # outcome reward on the last token
    return rewards, lengths, mask, token_rewards, np.repeat(np.arange(groups), size)


@pytest.mark.parametrize("seed", SEEDS)
def test_verl_advantages(seed):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos as verl

    rewards, lengths, mask, token_rewards, index = _rewards(seed)
    cases = {
        "grpo": verl.compute_grpo_outcome_advantage(token_rewards.clone(), mask, index, epsilon=1e-6)[0],
        "drgrpo": verl.compute_grpo_outcome_advantage(token_rewards.clone(), mask, index, 1e-6, False)[0],
        "rloo": verl.compute_rloo_outcome_advantage(token_rewards.clone(), mask, index)[0],
        "reinforce_pp": verl.compute_reinforce_plus_plus_outcome_advantage(
            token_rewards.clone(), mask, config=AlgoConfig(gamma=1.0)
        )[0],
        "reinforce_pp_baseline": verl.compute_reinforce_plus_plus_baseline_outcome_advantage(
            token_rewards.clone(), mask, index
        )[0],
    }
    for mode, theirs in cases.items():
        mine = compute_advantages(rewards, 4, mode, 1e-6 if mode in ("grpo", "drgrpo") else 1e-8, None, lengths)
        gap = float(((mine.double()[:, None] - theirs) * mask).abs().max())
        assert gap < TOL, (mode, gap)


def test_departure_verl_whitens_with_the_root_of_var_plus_eps():
    """REINFORCE++: ours divides by σ + ε, verl's ``masked_whiten`` by √(σ² + 1e-8). Equal to 1e-6
    above (σ of order 1); apart where σ is of order 1e-4 or less."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos as verl

    rewards, lengths, mask, _, _ = _rewards(0)
    rewards = 1.0 + 1e-5 * (rewards - rewards.mean())
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(len(rewards)), lengths - 1] = rewards
    theirs = verl.compute_reinforce_plus_plus_outcome_advantage(token_rewards, mask, config=AlgoConfig(gamma=1.0))[0]
    mine = compute_advantages(rewards, 4, "reinforce_pp", 1e-8, None, lengths)
    assert float(((mine.double()[:, None] - theirs) * mask).abs().max()) > 1e-2


@pytest.mark.parametrize("seed", SEEDS)
def test_verl_k3_kl_and_tis_weight(seed):
    from verl.trainer.ppo.core_algos import kl_penalty
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

    b = random_batch(seed)
    ref = b.logp + 0.5 * torch.randn(b.logp.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    assert float((k3_kl(b.logp, ref) - kl_penalty(b.logp, ref, "k3")).abs().max()) < TOL
    for cap in (1.5, 2.0, 5.0):
        theirs, _ = compute_rollout_correction_weights(b.old - b.sampler, b.mask, "token", cap)
        assert float(((tis_weights(b.old, b.sampler, cap) - theirs) * b.mask).abs().max()) < TOL


def test_departure_verl_clamps_k3_at_10():
    """verl clamps k3 to [−10, 10] (and the log ratio to ±20); ours is unclamped."""
    from verl.trainer.ppo.core_algos import kl_penalty

    logp, ref = torch.tensor([-5.0]), torch.tensor([-1.0])  # e^4 − 4 − 1 ≈ 49.6
    assert float(k3_kl(logp, ref)) > 49 and float(kl_penalty(logp, ref, "k3")) == 10.0
