"""The other objectives of the policy-gradient loop, pinned to hand-computed numbers: the policy
losses GSPO / GSPO-token / CISPO (values and gradients), REINFORCE++'s batch-normalised
advantages, the truncated importance weight and the sampler-learner mismatch metrics; and
gradient accumulation tested where it can fail, through ``policy_update`` itself."""

from __future__ import annotations

import copy
import math

import pytest
import rlvr.trainers.policy_gradient.update
import torch
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.advantages import batch_normalised_advantages, compute_advantages, group_advantages
from rlvr.trainers.policy_gradient.config import TrainConfig, build_config, overridden_defining
from rlvr.trainers.policy_gradient.losses import (
    AGGREGATIONS,
    POLICY_LOSSES,
    gspo_terms,
    policy_loss_terms,
    ppo_clip_terms,
    sampler_mismatch,
    tis_weights,
    token_weights,
)
from rlvr.trainers.policy_gradient.update import Batch, batch_logprobs, pack, policy_update

LOG = math.log


def _leaf(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


# ---- policy losses ---------------------------------------------------------------------------
def test_ppo_clip_is_the_existing_clipped_surrogate():
    logp, old = torch.randn(3, 4), torch.randn(3, 4)
    adv, mask = torch.randn(3), torch.ones(3, 4)
    ours = policy_loss_terms("ppo_clip", logp, old, adv, mask, 0.2, 0.28)
    theirs = ppo_clip_terms(logp, old, adv, 0.2, 0.28)
    assert all(torch.equal(ours[k], theirs[k]) for k in ("loss", "clip_low", "clip_high"))


def test_gspo_clips_the_length_normalised_sequence_ratio():
    """Sequence 0 (2 tokens, log-ratios 0.1, 0.3): s = e^0.2 = 1.2214 > 1 + 0.2 with Â = +1, so
    ℓ = −1.2 and no gradient. Sequence 1 (3 tokens, log-ratios −0.1, 0, 0.1): s = 1, Â = −2, ℓ = 2,
    dℓ/dlog π_t = −Â s / |o| = 2/3 on each token."""
    old = torch.tensor([[-1.0, -2.0, 0.0], [-1.0, -1.0, -1.0]])
    logp = _leaf([[-0.9, -1.7, -5.0], [-1.1, -1.0, -0.9]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    terms = policy_loss_terms("gspo", logp, old, torch.tensor([1.0, -2.0]), mask, 0.2, 0.2)
    assert terms["loss"].flatten().tolist() == pytest.approx([-1.2, -1.2, 0.0, 2.0, 2.0, 2.0], abs=1e-6)
    assert terms["clip_high"].tolist() == [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    assert terms["clip_low"].sum() == 0
    loss = (terms["loss"] * token_weights(mask, "seq_mean_token_mean")).sum()
    assert float(loss.detach()) == pytest.approx((-1.2 + 2.0) / 2)  # the paper's (1/G) Σ_i ℓ_i
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0, 1 / 3, 1 / 3, 1 / 3], abs=1e-6)  # × 1/G


def test_gspo_unclipped_sequence_gradient_is_the_mean_token_score():
    logp = _leaf([[LOG(0.5), LOG(0.25)]])
    terms = gspo_terms(logp, torch.tensor([[LOG(0.5), LOG(0.5)]]), torch.tensor([1.0]), torch.ones(1, 2), 0.5, 0.5)
    s = math.exp(0.5 * LOG(0.5))  # geometric mean of the token ratios 1 and 0.5
    assert float(terms["loss"][0, 0].detach()) == pytest.approx(-s)
    terms["loss"][0, 0].backward()
    assert logp.grad[0].tolist() == pytest.approx([-s / 2, -s / 2])


@pytest.mark.parametrize("agg", AGGREGATIONS)
def test_gspo_token_equals_gspo_in_value_and_gradient(agg):
    generator = torch.Generator().manual_seed(1)
    old = -torch.rand(5, 6, generator=generator) * 3
    start = old + 0.08 * torch.randn(5, 6, generator=generator)
    mask = torch.tensor([[1.0] * k + [0.0] * (6 - k) for k in (6, 1, 3, 4, 2)])
    adv = torch.tensor([1.0, -0.5, 2.0, -1.5, 0.7])
    losses, grads = [], []
    for name in ("gspo", "gspo_token"):
        logp = start.clone().requires_grad_(True)
        terms = policy_loss_terms(name, logp, old, adv, mask, 0.02, 0.03)
        loss = (terms["loss"] * token_weights(mask, agg, 6.0)).sum()
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append(logp.grad)
        clipped = terms["clip_low"] + terms["clip_high"]
    assert 0 < clipped.sum() < mask.sum()  # some sequences clipped, some not: both branches compared
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert torch.allclose(grads[0], grads[1], atol=1e-7)


def test_cispo_keeps_every_tokens_gradient_at_the_clipped_weight():
    """ρ = 1.5 (clipped to 1.28), 0.5 (clipped to 0.8), 1.1 (inside): dℓ/dlog π = −clip(ρ)·Â,
    nonzero also where ρ is out of range."""
    old = torch.tensor([[LOG(0.4), LOG(0.8), LOG(0.5)]])
    logp = _leaf([[LOG(0.6), LOG(0.4), LOG(0.55)]])
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    terms = policy_loss_terms("cispo", logp, old, adv, torch.ones(1, 3), 0.2, 0.28)
    weights = [1.28, 0.8, 1.1]
    expected = [-w * a * lp for w, a, lp in zip(weights, [1.0, -1.0, 2.0], [LOG(0.6), LOG(0.4), LOG(0.55)])]
    assert terms["loss"][0].tolist() == pytest.approx(expected, rel=1e-5)
    assert terms["clip_high"].tolist() == [[1.0, 0.0, 0.0]] and terms["clip_low"].tolist() == [[0.0, 1.0, 0.0]]
    terms["loss"].sum().backward()
    assert logp.grad[0].tolist() == pytest.approx([-1.28, 0.8, -2.2], rel=1e-5)
    ppo = _leaf([[LOG(0.6)]])  # the same first token under PPO's clip has no gradient
    ppo_clip_terms(ppo, old[:, :1], torch.tensor([1.0]), 0.2, 0.28)["loss"].sum().backward()
    assert float(ppo.grad) == 0.0


def test_policy_losses_are_zero_outside_the_mask():
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    for name in POLICY_LOSSES:
        terms = policy_loss_terms(
            name, torch.randn(2, 2) - 2, torch.randn(2, 2) - 2, torch.tensor([1.0, -1.0]), mask, 0.1, 0.1
        )
        assert all(float((terms[k] * (1 - mask)).abs().sum()) == 0 for k in terms)
    with pytest.raises(ValueError, match="unknown policy loss"):
        policy_loss_terms("ppo", torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), mask[:1, :1], 0.1, 0.1)


# ---- REINFORCE++ advantages ------------------------------------------------------------------
def test_reinforce_pp_normalises_over_every_trained_token_of_the_batch():
    # tokens 1, 1 | 0 | (masked) | 1: mean 0.75, Bessel variance 0.75 / 3 = 0.25, σ = 0.5
    adv = compute_advantages(
        torch.tensor([1.0, 0.0, 0.0, 1.0]), 2, "reinforce_pp", 1e-8, None, torch.tensor([2.0, 1, 0, 1])
    )
    assert adv.tolist() == pytest.approx([0.5, -1.5, 0.0, 0.5], abs=1e-6)


def test_reinforce_pp_baseline_subtracts_the_group_mean_first():
    # groups [1, 0], [1, 1] -> centred 0.5, -0.5, 0, 0; tokens 1, 3, 2, 2: mean -0.125,
    # squared deviations 0.390625 + 3 * 0.140625 + 4 * 0.015625 = 0.875, / 7 -> σ = sqrt(0.125)
    counts = torch.tensor([1.0, 3, 2, 2])
    adv = compute_advantages(torch.tensor([1.0, 0, 1, 1]), 2, "reinforce_pp_baseline", 1e-8, None, counts)
    sigma = math.sqrt(0.125)
    assert adv.tolist() == pytest.approx([0.625 / sigma, -0.375 / sigma, 0.125 / sigma, 0.125 / sigma], rel=1e-6)


def test_reinforce_pp_baseline_leaves_out_unverifiable_samples():
    """Group [1, 0, unverifiable]: the mean is over the two valid samples (0.5), the masked one
    has no tokens; the tokens 0.5, 0.5, −0.5, −0.5 have mean 0 and σ = sqrt(1/3)."""
    valid = torch.tensor([1.0, 1.0, 0.0])
    adv = compute_advantages(
        torch.tensor([1.0, 0.0, 0.0]), 3, "reinforce_pp_baseline", 1e-8, valid, torch.tensor([2.0, 2, 0])
    )
    assert adv.tolist() == pytest.approx([0.5 * math.sqrt(3), -0.5 * math.sqrt(3), 0.0], rel=1e-6)


def test_batch_normalised_advantages_have_token_mean_zero_and_unit_std():
    generator = torch.Generator().manual_seed(0)
    values, counts = torch.randn(12, generator=generator), torch.randint(0, 9, (12,), generator=generator).float()
    adv = batch_normalised_advantages(values, counts).double()
    n = counts.double()
    assert float((n * adv).sum() / n.sum()) == pytest.approx(0.0, abs=1e-6)
    assert float(((n * adv**2).sum() / (n.sum() - 1)).sqrt()) == pytest.approx(1.0, rel=1e-6)
    assert torch.all(adv[counts == 0] == 0)
    assert torch.equal(batch_normalised_advantages(values, torch.zeros(12)), torch.zeros(12))
    with pytest.raises(ValueError, match="group advantage mode"):
        group_advantages(values, 4, "reinforce_pp")


# ---- truncated importance sampling and the mismatch metrics ----------------------------------
OLD = [[LOG(0.5), LOG(0.9), LOG(0.2), LOG(0.9)]]
SAMPLER = [[LOG(0.5), LOG(0.3), LOG(0.4), LOG(0.001)]]  # ratios 1, 3, 0.5; the last token is not trained
TRAINED = torch.tensor([[1.0, 1.0, 1.0, 0.0]])


def test_tis_weight_is_the_capped_ratio_without_gradient():
    old = _leaf(OLD)
    weights = tis_weights(old, torch.tensor(SAMPLER), 2.0)
    assert weights[0, :3].tolist() == pytest.approx([1.0, 2.0, 0.5])
    assert not weights.requires_grad
    assert tis_weights(old, torch.tensor(SAMPLER), 10.0)[0, :3].tolist() == pytest.approx([1.0, 3.0, 0.5])


def test_mismatch_metrics_closed_form():
    metrics = sampler_mismatch(torch.tensor(OLD), torch.tensor(SAMPLER), TRAINED, tis_cap=2.0)
    d = [0.0, LOG(3), LOG(0.5)]
    assert metrics["mismatch_logp_abs_mean"] == pytest.approx(sum(abs(x) for x in d) / 3)
    assert metrics["mismatch_ratio_max"] == pytest.approx(3.0)
    assert metrics["mismatch_kl"] == pytest.approx(sum(math.exp(x) - x - 1 for x in d) / 3)
    assert metrics["tis_capped_fraction"] == pytest.approx(1 / 3)
    assert sampler_mismatch(torch.tensor(OLD), torch.tensor(SAMPLER), TRAINED)["tis_capped_fraction"] is None


def test_mismatch_sums_of_ranks_add_up_to_the_whole_batch():
    """Under torchrun each rank holds some rows: sums added and the max taken across ranks
    (``Shard.reduce_mismatch``) give the metrics of the whole batch, not a mean of rank means."""
    from rlvr.trainers.policy_gradient.losses import mismatch_metrics, mismatch_sums

    old, sampler = torch.tensor(OLD), torch.tensor(SAMPLER)
    whole = sampler_mismatch(old, sampler, TRAINED, tis_cap=2.0)
    parts = [
        mismatch_sums(old[:, cols], sampler[:, cols], TRAINED[:, cols], 2.0) for cols in (slice(0, 1), slice(1, None))
    ]
    combined = {k: sum(p[k] for p in parts) for k in parts[0] if k != "ratio_max"}
    combined["ratio_max"] = max(p["ratio_max"] for p in parts)
    assert mismatch_metrics(combined, 2.0) == pytest.approx(whole)
    assert mismatch_metrics(mismatch_sums(old, sampler, TRAINED * 0, 2.0), 2.0)["mismatch_kl"] is None


def test_mismatch_kl_estimates_kl_from_the_sampler_to_the_learner():
    """Tokens drawn from the sampler p; the estimate converges to KL(p ‖ q) = 0.587, not KL(q ‖ p) = 1.057."""
    p, q = torch.tensor([0.9, 0.09, 0.01]), torch.tensor([0.4, 0.3, 0.3])
    tokens = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))[None]
    metrics = sampler_mismatch(q.log()[tokens], p.log()[tokens], torch.ones_like(tokens, dtype=torch.float32))
    assert metrics["mismatch_kl"] == pytest.approx(float((p * (p / q).log()).sum()), abs=0.03)


# ---- policy_update: TIS and exact gradient accumulation ---------------------------------------
def _tiny_llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(config)


def model_and_batch() -> tuple[torch.nn.Module, Batch]:
    """8 rows of unequal prompt and completion lengths (one row masked); old log-probs off the
    model's by noise so that ratios differ from 1 and clip; sampler log-probs off those again."""
    model = _tiny_llama()
    generator = torch.Generator().manual_seed(3)
    prompt_lengths, completion_lengths = [2, 3, 4, 2, 3, 2, 4, 3], [5, 1, 3, 6, 2, 4, 1, 3]
    ids = lambda n: torch.randint(1, 50, (n,), generator=generator).tolist()  # noqa: E731
    keep = torch.tensor([1.0, 1, 1, 1, 0, 1, 1, 1])
    batch = pack(
        [ids(n) for n in prompt_lengths],
        [ids(n) for n in completion_lengths],
        torch.tensor([1.0, -0.5, 2.0, -1.5, 0.7, 0.3, -2.0, 1.2]),
        keep,
        0,
        "cpu",
    )
    mask = batch.completion_mask
    batch.old_logp = batch_logprobs(model, batch, 8) + 0.15 * torch.randn(mask.shape, generator=generator) * mask
    batch.sampler_logp = batch.old_logp + 0.3 * torch.randn(mask.shape, generator=generator) * mask
    return model, batch


@pytest.fixture(scope="module")
def setup() -> tuple[torch.nn.Module, Batch]:
    return model_and_batch()


def _cfg(**extra) -> TrainConfig:
    values = {
        "minibatch_size": 4,
        "micro_batch_size": 4,
        "mu": 1,
        "eps_low": 0.1,
        "eps_high": 0.1,
        "beta": 0.04,
        "grad_clip": 0.0,
        "max_tokens": 7,
        "backend": "vllm",
        "temperature": 1.0,
    }
    return TrainConfig(**{**values, **extra})


def _updated(setup, cfg: TrainConfig) -> tuple[dict[str, torch.Tensor], dict]:
    """Parameters after ``policy_update`` with plain SGD (the step is the gradient times the lr,
    so any change of scale shows; AdamW's first step, about lr·sign(g), would hide one)."""
    model, batch = setup
    model = copy.deepcopy(model)
    metrics = policy_update(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, cfg)
    return {k: v.detach().clone() for k, v in model.named_parameters()}, metrics


def _max_gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).detach().abs().max()) for k in a)


@pytest.mark.parametrize("policy_loss", POLICY_LOSSES)
@pytest.mark.parametrize("agg", AGGREGATIONS)
def test_micro_batches_of_one_give_the_parameters_of_one_pass(setup, agg, policy_loss):
    extra = {"loss_agg": agg, "policy_loss": policy_loss, "tis_cap": 1.2}
    one_pass, metrics = _updated(setup, _cfg(**extra))
    micro, _ = _updated(setup, _cfg(micro_batch_size=1, **extra))
    assert metrics["optimizer_steps"] == 2 and 0 < metrics["tis_capped_fraction"] < 1
    assert _max_gap(one_pass, dict(setup[0].named_parameters())) > 1e-3  # the update moved the weights
    assert _max_gap(one_pass, micro) < 1e-6


@pytest.mark.parametrize("agg", AGGREGATIONS)
def test_normalising_each_micro_batch_on_its_own_fails_the_accumulation_test(setup, agg, monkeypatch):
    """The bug the test above must catch: token weights computed per micro-batch (its own 1/S,
    its own token count) instead of once over the minibatch."""

    def per_micro_batch(mask: torch.Tensor, mode: str, constant: float | None = None) -> torch.Tensor:
        return torch.cat([token_weights(mask[i : i + 1], mode, constant) for i in range(mask.shape[0])])

    one_pass, _ = _updated(setup, _cfg(loss_agg=agg))
    monkeypatch.setattr(rlvr.trainers.policy_gradient.update, "token_weights", per_micro_batch)
    wrong, _ = _updated(setup, _cfg(loss_agg=agg, micro_batch_size=1))
    assert _max_gap(one_pass, wrong) > 1e-3


def test_tis_scales_each_tokens_policy_gradient_by_its_weight(setup):
    """A sampler uniformly half as likely as the learner on every token: w = min(2, cap)."""
    model, batch = setup
    plain = copy.copy(batch)
    plain.sampler_logp = None
    halved = copy.copy(batch)
    halved.sampler_logp = batch.old_logp - LOG(2.0) * batch.completion_mask
    cfg = dict(minibatch_size=8, micro_batch_size=8, beta=0.0, loss_agg="token_mean")
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    base, metrics = _updated((model, plain), _cfg(**cfg, tis_cap=None))
    doubled, _ = _updated((model, halved), _cfg(**cfg, tis_cap=4.0))
    capped, capped_metrics = _updated((model, halved), _cfg(**cfg, tis_cap=1.5))
    for k in before:
        assert torch.allclose(doubled[k] - before[k], 2 * (base[k] - before[k]), atol=1e-6)
        assert torch.allclose(capped[k] - before[k], 1.5 * (base[k] - before[k]), atol=1e-6)
    assert metrics["mismatch_kl"] is None and metrics["tis_capped_fraction"] is None  # the hf path: null
    assert capped_metrics["tis_capped_fraction"] == 1.0
    assert capped_metrics["mismatch_ratio_max"] == pytest.approx(2.0, rel=1e-5)


# ---- configuration and the loop --------------------------------------------------------------
def test_config_checks_the_objective_settings():
    with pytest.raises(UserError, match="policy_loss must be one of"):
        build_config("drgrpo", "cpu-demo", {"policy_loss": "ppo"})
    with pytest.raises(UserError, match="needs backend: vllm"):
        build_config("drgrpo", "cpu-demo", {"tis_cap": 2.0})
    with pytest.raises(UserError, match="tis_cap must be positive"):
        build_config("drgrpo", "cpu-demo", {"tis_cap": 0.0, "backend": "vllm"})
    with pytest.raises(UserError, match="eps_low"):
        build_config("drgrpo", "cpu-demo", {"eps_low": 1.0})
    cispo = build_config("drgrpo", "cpu-demo", {"policy_loss": "cispo", "eps_low": 1.0, "advantage": "reinforce_pp"})
    assert "policy_loss: 'ppo_clip' -> 'cispo'" in overridden_defining("drgrpo", cispo)


def test_a_step_of_cispo_with_reinforce_pp_baseline_trains_and_logs_null_mismatch(tmp_path, tiny_model, digits_source):
    from rlvr.trainers.policy_gradient.loop import run_training
    from rlvr.trainers.runtime.telemetry import read_log

    values = {
        "model": tiny_model,
        "stages": [{"name": "digits", "sources": [digits_source]}],
        "eval_benchmarks": [digits_source],
        "prompts_per_step": 2,
        "group_size": 4,
        "max_tokens": 8,
        "max_steps": 1,
        "save_optimizer": False,
        "lr": 1e-2,
        "policy_loss": "cispo",
        "eps_low": 1.0,
        "advantage": "reinforce_pp_baseline",
        "out": str(tmp_path / "run"),
    }
    (line,) = read_log(run_training(build_config("grpo", "cpu-demo", values), progress=False))
    assert line["optimizer_steps"] == 1 and line["grad_norm"] > 0
    assert [line[k] for k in rlvr.trainers.policy_gradient.update.UPDATE_METRICS[-4:]] == [None] * 4
