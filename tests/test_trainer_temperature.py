"""Log-probabilities at the sampling temperature: rollouts draw from softmax(logits / T), so the
learner's old, reference and current log-probs must be of that policy (oat's ``get_batch_logps``
and verl's actor divide the logits by T), and vLLM must return its processed log-probs (after
temperature), not its default raw ones. At T = 0.6 the first minibatch's ratio to the sampling
policy is 1 to numerical precision; at T = 1 everything is as before."""

from __future__ import annotations

import pytest
import rlvr.trainers.policy_gradient.update as update
import torch
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.policy_gradient.losses import completion_logprobs

T = 0.6


@torch.no_grad()
def sampling_logprobs(model, input_ids, attention_mask, completion_mask, temperature):
    """log softmax(logits / T) of each completion token, by hand over the full sequence (no
    ``logits_to_keep``): the distribution ``rlvr.harness.backends.hf_sampling.next_tokens`` draws from
    (top_p 1)."""
    positions = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).logits.float()
    logp = torch.log_softmax(logits[:, :-1] / temperature, dim=-1)
    chosen = torch.gather(logp, -1, input_ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(chosen[:, :1]), chosen], dim=1) * completion_mask


def test_first_minibatch_ratio_to_the_sampling_policy_is_one(tmp_path, tiny_model, digits_source, monkeypatch):
    """One hf step at T = 0.6, the update's first forward recorded: its log-probs are the
    sampler's (softmax(logits / 0.6) of the weights that sampled), and so are the old log-probs
    the ratio divides by. The old code computed both at T = 1: the log-probs differ by ~0.1."""
    seen = []
    real_logprobs, real_terms = update.completion_logprobs, update.policy_loss_terms

    def recording_logprobs(model, input_ids, attention_mask, completion_mask, *args, **kwargs):
        out = real_logprobs(model, input_ids, attention_mask, completion_mask, *args, **kwargs)
        if not seen:  # the first forward of the update: the weights that sampled, before any step
            seen.append((out[0].detach(), sampling_logprobs(model, input_ids, attention_mask, completion_mask, T)))
        return out

    def recording_terms(name, logp, old_logp, advantages, mask, *args):
        if len(seen) == 1:
            seen.append((logp.detach(), old_logp, mask))
        return real_terms(name, logp, old_logp, advantages, mask, *args)

    monkeypatch.setattr(update, "completion_logprobs", recording_logprobs)
    monkeypatch.setattr(update, "policy_loss_terms", recording_terms)
    values = {
        "model": tiny_model,
        "stages": [{"name": "digits", "sources": [digits_source]}],
        "prompts_per_step": 2,
        "group_size": 4,
        "max_tokens": 8,
        "temperature": T,
        "micro_batch_size": 8,
        "max_steps": 1,
        "save_optimizer": False,
        "out": str(tmp_path / "run"),
    }
    run_training(build_config("grpo", "cpu-demo", values), progress=False)
    (learner, sampler), (logp, old_logp, mask) = seen
    trained = mask > 0
    assert int(trained.sum()) > 8
    assert float((learner - sampler)[trained].abs().max()) < 1e-5
    ratio = torch.exp(logp - old_logp)[trained]
    assert float((ratio - 1).abs().max()) < 1e-6
    assert float((old_logp - sampler)[trained].abs().max()) < 1e-5  # the ratio's denominator is π_T too


def test_temperature_scales_the_logits_before_the_softmax(tiny_model):
    """Closed form on one batch: log-probs and entropy at T are those of logits / T, and T = 1
    is the untouched path."""
    from rlvr.harness.backends.hf import load_model

    model, _, _ = load_model(tiny_model, "float32", "cpu")
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (3, 9))
    attention = torch.ones_like(ids)
    mask = torch.zeros(3, 9)
    mask[:, 4:] = 1
    for temperature in (0.6, 1.0, 1.3):
        with torch.no_grad():
            logp, entropy = completion_logprobs(model, ids, attention, mask, True, temperature)
        expected = sampling_logprobs(model, ids, attention, mask, temperature)
        assert float((logp - expected).abs().max()) < 1e-4  # float32 over a 49k vocabulary, |log p| ~ 18
        with torch.no_grad():
            logits = model(ids).logits[:, 3:-1].double() / temperature
            p = torch.softmax(logits, dim=-1)
            h = -(p * torch.log_softmax(logits, dim=-1)).sum(-1)
        assert float((entropy[:, 4:] - h).abs().max()) < 1e-3  # float32 sums over 49k terms, H ~ 10


@pytest.mark.parametrize(
    "setting", [{"temperature": 0.0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"eval_temperature": -1}]
)
def test_nonsense_sampling_settings_are_refused(setting):
    with pytest.raises(UserError, match="temperature|top.p"):
        build_config("grpo", "cpu-demo", setting)
