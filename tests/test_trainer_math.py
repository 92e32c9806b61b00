"""The maths of the trainers, pinned to hand-computed numbers: advantages, overlong shaping,
loss aggregation, clipping, KL, and the log-probabilities the losses are built on."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.trainers.policy_gradient.advantages import (
    group_advantages,
    shape_rewards,
    soft_overlong_penalty,
    zero_variance_fraction,
)
from rlvr.trainers.policy_gradient.losses import aggregate, completion_logprobs, k3_kl, ppo_clip_terms, token_weights


# ---- advantages ------------------------------------------------------------------------------
def test_drgrpo_advantage_is_reward_minus_group_mean():
    # Dr. GRPO fidelity check: rewards [1,1,1,0] -> [0.25, 0.25, 0.25, -0.75], no std division
    assert group_advantages(torch.tensor([1.0, 1, 1, 0]), 4, "drgrpo").tolist() == [0.25, 0.25, 0.25, -0.75]


def test_grpo_advantage_divides_by_the_bessel_std():
    # mean 0.75; unbiased std = sqrt((3 * 0.25^2 + 0.75^2) / 3) = 0.5
    adv = group_advantages(torch.tensor([1.0, 1, 1, 0]), 4, "grpo")
    assert adv.tolist() == pytest.approx([0.5, 0.5, 0.5, -1.5], abs=1e-6)
    two = group_advantages(torch.tensor([1.0, 0, 0.0, 0]), 2, "grpo")  # groups [1,0] and [0,0]
    assert two.tolist() == pytest.approx(
        [0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5), 0.0, 0.0], abs=1e-6
    )  # std of [1,0] = sqrt(0.5)


def test_rloo_is_the_leave_one_out_baseline():
    rewards = torch.tensor([1.0, 1, 1, 0])
    expected = [r - (float(rewards.sum()) - r) / 3 for r in rewards.tolist()]  # [1/3, 1/3, 1/3, -1]
    assert group_advantages(rewards, 4, "rloo").tolist() == pytest.approx(expected)
    assert group_advantages(rewards, 4, "rloo").tolist() == pytest.approx(
        (group_advantages(rewards, 4, "drgrpo") * 4 / 3).tolist()
    )


@pytest.mark.parametrize("mode", ["grpo", "drgrpo", "rloo"])
def test_degenerate_groups_give_zero_advantage_not_nan(mode):
    adv = group_advantages(torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0]), 4, mode)
    assert torch.equal(adv, torch.zeros(8))
    assert zero_variance_fraction(torch.tensor([1.0, 1, 1, 1, 0, 0]), 3) == pytest.approx(1 / 2)
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([1.0, 0, 1]), 2, mode)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=8, max_size=8))
@settings(max_examples=60, deadline=None)
def test_advantages_sum_to_zero_within_each_group(rewards):
    for mode in ("grpo", "drgrpo", "rloo"):
        adv = group_advantages(torch.tensor(rewards), 4, mode).view(2, 4)
        assert adv.sum(dim=1).abs().max() < 1e-5


@pytest.mark.parametrize("mode", ["grpo", "drgrpo", "rloo"])
def test_unverifiable_samples_take_no_part_in_their_group(mode):
    """[1, 0, masked, 1] has the advantages of the group [1, 0, 1]; the masked one gets 0."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    valid = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    masked = group_advantages(rewards, 4, mode, valid=valid)
    three = group_advantages(torch.tensor([1.0, 0.0, 1.0]), 3, mode)
    assert torch.allclose(masked[[0, 1, 3]], three, atol=1e-6)
    assert masked[2] == 0
    assert torch.allclose(masked[4:], group_advantages(rewards[4:], 4, mode))  # an all-valid group is unchanged
    mean = 2 / 3
    expected = {
        "drgrpo": 1 - mean,
        "rloo": (1 - mean) * 3 / 2,
        "grpo": (1 - mean) / math.sqrt(((1 - mean) ** 2 * 2 + mean**2) / 2),
    }[mode]
    assert math.isclose(float(masked[0]), expected, rel_tol=1e-5)
    lone = group_advantages(torch.tensor([1.0, 0.0]), 2, mode, valid=torch.tensor([1.0, 0.0]))
    assert torch.equal(lone, torch.zeros(2))


def test_dapo_soft_overlong_penalty_eq13():
    # L_max = 20, L_cache = 4: free up to 16, linear to -1 at 20, -1 beyond
    assert [soft_overlong_penalty(n, 20, 4) for n in (10, 16, 17, 18, 20, 21)] == [0.0, 0.0, -0.25, -0.5, -1.0, -1.0]


def test_overlong_modes():
    correct, lengths, cut = [True, True, False], [5, 20, 20], [False, True, True]
    r, keep = shape_rewards(correct, lengths, cut, "zero", 20)
    assert r.tolist() == [1.0, 0.0, 0.0] and keep.tolist() == [1.0, 1.0, 1.0]  # oat: 0 reward, still in the loss
    r, keep = shape_rewards(correct, lengths, cut, "mask", 20)
    assert r.tolist() == [1.0, 1.0, 0.0] and keep.tolist() == [1.0, 0.0, 0.0]
    r, _ = shape_rewards(correct, [10, 18, 20], [False, False, True], "soft", 20, 4, values=(1.0, -1.0))
    assert r.tolist() == [1.0, 0.5, -2.0]  # DAPO: +-1 plus eq. 13
    r, _ = shape_rewards(correct, lengths, cut, "none", 20)
    assert r.tolist() == [1.0, 1.0, 0.0]


# ---- aggregation -----------------------------------------------------------------------------
MASK = torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1]])  # lengths 2 and 4


def test_token_weights_closed_forms():
    assert token_weights(MASK, "seq_mean_token_mean").tolist() == [[0.25, 0.25, 0, 0], [0.125] * 4]
    assert token_weights(MASK, "token_mean").flatten().tolist() == pytest.approx([1 / 6, 1 / 6, 0, 0] + [1 / 6] * 4)
    assert token_weights(MASK, "seq_mean_token_sum_norm", 10).flatten().tolist() == pytest.approx(
        [0.05, 0.05, 0, 0] + [0.05] * 4
    )
    with pytest.raises(ValueError, match="constant"):
        token_weights(MASK, "seq_mean_token_sum_norm")


def test_aggregation_values():
    values = torch.tensor([[1.0, 3, 9, 9], [2, 2, 2, 6]])
    assert float(aggregate(values, MASK, "seq_mean_token_mean")) == pytest.approx((4 / 2 + 12 / 4) / 2)  # 2.5
    assert float(aggregate(values, MASK, "token_mean")) == pytest.approx(16 / 6)
    assert float(aggregate(values, MASK, "seq_mean_token_sum_norm", 3000)) == pytest.approx((4 + 12) / (2 * 3000))


@given(st.integers(1, 6), st.integers(1, 9), st.integers(0, 10_000))
@settings(max_examples=50, deadline=None)
def test_equal_lengths_make_grpo_and_dapo_aggregation_agree(sequences, length, seed):
    values = torch.randn(sequences, length, generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(sequences, length)
    assert float(aggregate(values, mask, "seq_mean_token_mean")) == pytest.approx(
        float(aggregate(values, mask, "token_mean")), rel=1e-5, abs=1e-6
    )
    # Dr. GRPO with constant L = the common length is the same token mean too
    assert float(aggregate(values, mask, "seq_mean_token_sum_norm", length)) == pytest.approx(
        float(aggregate(values, mask, "token_mean")), rel=1e-5, abs=1e-6
    )


def test_drgrpo_gives_every_token_the_same_weight_whatever_the_length():
    mask = torch.zeros(2, 1000)
    mask[0, :100] = 1
    mask[1, :] = 1
    dr = token_weights(mask, "seq_mean_token_sum_norm", 3000)
    assert dr[0, 0] == dr[1, 0] == pytest.approx(1 / 6000)
    grpo = token_weights(mask, "seq_mean_token_mean")
    assert grpo[0, 0] == pytest.approx(1 / 200) and grpo[1, 0] == pytest.approx(1 / 2000)


# ---- clipping and KL -------------------------------------------------------------------------
def _terms(ratio: float, adv: float, eps_low=0.2, eps_high=0.28):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    terms = ppo_clip_terms(logp, torch.zeros(1, 1), torch.tensor([adv]), eps_low, eps_high)
    terms["loss"].sum().backward()
    return float(terms["loss"]), float(logp.grad), float(terms["clip_low"]), float(terms["clip_high"])


def test_clip_at_the_upper_bound_for_positive_advantage():
    loss, grad, low, high = _terms(1.5, 1.0)
    assert loss == pytest.approx(-1.28) and grad == 0.0 and (low, high) == (0.0, 1.0)  # clip-higher: 1 + 0.28


def test_clip_at_the_lower_bound_for_negative_advantage():
    loss, grad, low, high = _terms(0.5, -1.0)
    assert loss == pytest.approx(0.8) and grad == 0.0 and (low, high) == (1.0, 0.0)


def test_no_clip_where_the_unclipped_term_is_the_pessimistic_one():
    loss, grad, low, high = _terms(1.5, -1.0)  # min(-1.5, -1.2) = -1.5: keeps the gradient
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5) and (low, high) == (0.0, 0.0)
    loss, grad, _, _ = _terms(0.5, 1.0)
    assert loss == pytest.approx(-0.5) and grad == pytest.approx(-0.5)
    loss, grad, _, _ = _terms(1.0, 2.0)  # on-policy: ratio 1, gradient -A
    assert loss == pytest.approx(-2.0) and grad == pytest.approx(-2.0)


def test_k3_kl():
    assert float(k3_kl(torch.tensor(0.3), torch.tensor(0.3))) == 0.0
    delta = math.log(2.0)
    assert float(k3_kl(torch.tensor(0.0), torch.tensor(delta))) == pytest.approx(2 - delta - 1)
    assert float(k3_kl(torch.randn(100), torch.randn(100)).min()) >= 0.0


def test_completion_logprobs_match_a_manual_log_softmax():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=50,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 0], [3, 4, 5, 6, 0, 0]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
    completion = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 0, 0]], dtype=torch.float32)
    logp, entropy = completion_logprobs(model, ids, attention, completion, with_entropy=True)
    with torch.no_grad():
        for row in range(2):
            n = int(attention[row].sum())
            logits = model(input_ids=ids[row : row + 1, :n]).logits[0].float()
            manual = torch.log_softmax(logits, dim=-1)
            for t in range(1, n):
                if completion[row, t]:
                    assert float(logp[row, t]) == pytest.approx(float(manual[t - 1, ids[row, t]]), abs=1e-5)
                    probs = manual[t - 1].exp()
                    assert float(entropy[row, t]) == pytest.approx(float(-(probs * manual[t - 1]).sum()), abs=1e-4)
    assert torch.all(logp[completion == 0] == 0)
