"""The memory features of the policy-gradient learner change nothing but memory: chunked
log-probs give the unchunked values and gradient, micro-batches cut to their own longest row
and token-budget micro-batches give the padded update, gradient checkpointing gives the same
update, the KL reference loads in the compute dtype, FSDP reduce-scatters every micro-batch
unless told otherwise."""

from __future__ import annotations

import copy
import types

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_trainer_objectives import _cfg, _max_gap, model_and_batch

import trainers.update
from trainers.chunked_logprobs import chunk_stats
from trainers.distributed_rows import Shard
from trainers.losses import completion_logprobs
from trainers.micro_batches import equalize, plan_rows
from trainers.update import policy_update


@pytest.fixture(scope="module")
def setup():
    return model_and_batch()


def _logprobs_and_grads(setup, chunk: int, temperature: float = 1.0):
    model, batch = setup
    model = copy.deepcopy(model)
    logp, entropy = completion_logprobs(
        model, batch.input_ids, batch.attention_mask, batch.completion_mask, True, temperature, chunk
    )
    (logp * torch.linspace(0.5, 1.5, logp.shape[1])).sum().backward()  # unequal weights per column
    return logp.detach(), entropy, {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("chunk", [1, 3, 7, 1024])
def test_chunked_logprobs_have_the_unchunked_values_and_gradient(setup, chunk):
    plain, chunked = _logprobs_and_grads(setup, 0), _logprobs_and_grads(setup, chunk)
    assert torch.allclose(plain[0], chunked[0], atol=1e-6) and torch.allclose(plain[1], chunked[1], atol=1e-6)
    assert float(plain[1].sum()) > 0  # entropies were computed
    assert _max_gap(plain[2], chunked[2]) < 1e-5
    assert max(float(g.abs().max()) for g in plain[2].values()) > 1e-3  # a real gradient


def test_temperature_divides_the_logits_of_every_chunk(setup):
    model, batch = setup
    hidden = torch.randn(5, model.config.hidden_size)
    targets = torch.tensor([1, 2, 3, 4, 5])
    logp, entropy = chunk_stats(hidden, model.lm_head, targets, temperature=0.7)
    expected = torch.log_softmax(model.lm_head(hidden).float() / 0.7, dim=-1)
    assert torch.allclose(logp, expected.gather(1, targets[:, None]).squeeze(1), atol=1e-6)
    assert torch.allclose(entropy, -(expected.exp() * expected).sum(-1), atol=1e-5)
    low, high = _logprobs_and_grads(setup, 3, 0.7), _logprobs_and_grads(setup, 0, 0.7)
    assert torch.allclose(low[0], high[0], atol=1e-6) and _max_gap(low[2], high[2]) < 1e-5


def test_the_chunked_forward_never_builds_full_vocabulary_logits(setup):
    """Every vocabulary projection sees at most ``chunk`` positions (forward and recompute)."""
    model, batch = setup
    model = copy.deepcopy(model)
    seen = []
    model.lm_head.register_forward_hook(lambda m, args, out: seen.append(out.shape))  # the patched head's call
    linear_calls = []
    original = torch.nn.functional.linear

    def spy(x, weight, bias=None):
        if weight.shape[0] == model.config.vocab_size:
            linear_calls.append(x.shape[:-1].numel())
        return original(x, weight, bias)

    torch.nn.functional.linear = spy
    try:
        logp, _ = completion_logprobs(
            model, batch.input_ids, batch.attention_mask, batch.completion_mask, True, chunk=4
        )
        logp.sum().backward()
    finally:
        torch.nn.functional.linear = original
    assert linear_calls and max(linear_calls) <= 4
    assert seen[0][-1] == 2  # the model's "logits" are [log π, entropy] per position


def _update(setup, **extra):
    model, batch = setup
    model = copy.deepcopy(model)
    metrics = policy_update(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, _cfg(**extra))
    return {k: v.detach().clone() for k, v in model.named_parameters()}, metrics


def test_micro_batches_cut_to_their_own_longest_row_give_the_padded_update(setup, monkeypatch):
    widths = []
    forward = trainers.update.completion_logprobs

    def spy(model, ids, *args, **kwargs):
        widths.append(ids.shape[1])
        return forward(model, ids, *args, **kwargs)

    monkeypatch.setattr(trainers.update, "completion_logprobs", spy)
    cut, metrics = _update(setup, micro_batch_size=2)
    cut_widths = list(widths)
    full = setup[1].input_ids.shape[1]
    monkeypatch.setattr(trainers.update, "row_lengths", lambda mask: [mask.shape[1]] * mask.shape[0])
    widths.clear()
    padded, padded_metrics = _update(setup, micro_batch_size=2)
    assert widths == [full] * 4 and min(cut_widths) < full  # the padded version ran at the batch's width
    assert _max_gap(cut, padded) < 1e-6
    assert metrics["loss"] == pytest.approx(padded_metrics["loss"], abs=1e-7)


@pytest.mark.parametrize("budget", [1, 12, 20, 1000])
def test_token_budget_micro_batches_give_the_update_of_one_pass(setup, budget):
    one_pass, metrics = _update(setup)
    budgeted, budget_metrics = _update(setup, micro_batch_size=1, micro_token_budget=budget)
    assert _max_gap(one_pass, budgeted) < 1e-6
    assert metrics["loss"] == pytest.approx(budget_metrics["loss"], abs=1e-6)


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(1, 120))
def test_a_token_budget_plan_holds_every_row_once_within_the_budget(lengths, budget):
    plan = plan_rows(lengths, range(len(lengths)), 4, budget)
    assert sorted(r for rows in plan for r in rows) == list(range(len(lengths)))
    for rows in plan:
        assert len(rows) == 1 or len(rows) * max(lengths[r] for r in rows) <= budget
    longest_first = [lengths[r] for rows in plan for r in rows]
    assert longest_first == sorted(longest_first, reverse=True)


def test_gradient_checkpointing_gives_the_same_update(setup):
    plain, _ = _update(setup, micro_batch_size=2)
    model, batch = setup
    model = copy.deepcopy(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy_update(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, _cfg(micro_batch_size=2))
    assert _max_gap(plain, dict(model.named_parameters())) < 1e-6


class _FakeFSDP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = []

    def set_requires_gradient_sync(self, sync: bool) -> None:
        self.calls.append(sync)


class _OneRank:
    world = 1

    def all_reduce(self, values, op="sum"):
        return list(values)


@pytest.mark.parametrize(("mode", "expected"), [(True, [True] * 3), (False, [False, False, True])])
def test_fsdp_reduce_scatters_every_micro_batch_unless_told_otherwise(mode, expected):
    model, shard = _FakeFSDP(), Shard(_OneRank(), [0, 1, 2], [slice(0, 3)], [3])
    for k in range(3):
        shard.sync_gradients(model, k == 2, every_micro_batch=mode)
    assert model.calls == expected


def test_padding_passes_even_out_the_ranks():
    ctx = types.SimpleNamespace(all_reduce=lambda values, op="sum": [5.0])
    assert equalize([[0], [1, 2]], types.SimpleNamespace(ctx=ctx)) == [[0], [1, 2], None, None, None]
    assert equalize([[0]], None) == [[0]]


def test_the_reference_model_loads_in_the_compute_dtype(tiny_model):
    from trainers.config import TrainConfig
    from trainers.loop import _load_policy

    cfg = TrainConfig(model=tiny_model, compute_dtype="bfloat16", device="cpu", gradient_checkpointing=True)
    policy = _load_policy(cfg, tiny_model)[0]
    reference = _load_policy(cfg, tiny_model, frozen=True)[0]
    assert next(policy.parameters()).dtype == torch.float32 and policy.is_gradient_checkpointing
    assert next(reference.parameters()).dtype == torch.bfloat16 and not reference.is_gradient_checkpointing
