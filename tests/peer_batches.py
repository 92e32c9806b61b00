"""Random batches and the three ways of computing one loss in the peer conformance tests
(``tests/test_trainer_peers.py``): ours through ``policy_update`` itself, TRL's ``GRPOTrainer``
loss and verl's ``core_algos``, each returning (loss, gradient with respect to the log-probs)."""

from __future__ import annotations

import types
from collections import defaultdict
from dataclasses import dataclass
from unittest import mock

import rlvr.trainers.policy_gradient.update as update
import torch
from rlvr.trainers.policy_gradient.config import TrainConfig
from rlvr.trainers.policy_gradient.update import Batch, policy_update


@dataclass
class Random:
    """One batch: per-token log-probs and what the loss compares them with (S, T)."""

    logp: torch.Tensor
    old: torch.Tensor
    ref: torch.Tensor
    sampler: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor  # one per sequence

    @property
    def rows(self) -> int:
        return self.logp.shape[0]


def random_batch(seed: int, rows: int = 9, width: int = 11) -> Random:
    """Uneven lengths (1..width), one all-masked row, one zero advantage, log ratios mostly within
    ±0.4 and a tenth of the tokens at e^±3 (ratios of 0.05 and 20: both sides of any clip,
    beyond a dual clip of 10), sampler and reference log-probs apart from the learner's."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=g)
    lengths[1] = 0
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    logp = -torch.rand(rows, width, generator=g, dtype=torch.float64) * 4 - 0.01
    draw = torch.rand(rows, width, generator=g, dtype=torch.float64)
    shift = torch.randn(rows, width, generator=g, dtype=torch.float64) * 0.4
    shift = torch.where(draw < 0.05, torch.full_like(shift, -3.0), shift)
    shift = torch.where(draw > 0.95, torch.full_like(shift, 3.0), shift)
    advantages = torch.randn(rows, generator=g, dtype=torch.float64)
    advantages[3] = 0.0
    return Random(
        logp=logp,
        old=logp + shift,
        ref=logp + 0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64),
        sampler=logp + shift + 0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64),
        mask=mask.double(),
        advantages=advantages,
    )


class _LogpTable(torch.nn.Module):
    """A "model" whose log-probs are its parameters: row r of the batch reads row r of the table
    (the row index rides in column 0 of ``input_ids``)."""

    def __init__(self, logp: torch.Tensor):
        super().__init__()
        self.logp = torch.nn.Parameter(logp.clone())


def _table_logprobs(model, input_ids, attention_mask, completion_mask, *args, **kwargs):
    rows = input_ids[:, 0]
    return model.logp[rows] * completion_mask, torch.zeros_like(completion_mask)


def ours(b: Random, micro: int = 2, **settings) -> tuple[float, torch.Tensor]:
    """Loss and gradient of ``policy_update`` (one minibatch of every row, micro-batches of
    ``micro``) with ``settings`` of ``TrainConfig``; ``tis_cap`` uses ``b.sampler``, β > 0 ``b.ref``."""
    cfg = TrainConfig(**{"micro_batch_size": micro, "grad_clip": 0.0, "mu": 1, "temperature": 1.0, **settings})
    ids = torch.arange(b.rows)[:, None].expand(b.rows, b.logp.shape[1]).contiguous()
    batch = Batch(ids, torch.ones_like(ids), b.mask, b.advantages)
    batch.old_logp, batch.ref_logp, batch.sampler_logp = b.old, b.ref, b.sampler
    model = _LogpTable(b.logp)
    optimizer = _GradientAtStep(model.parameters(), lr=0.0)
    with mock.patch.object(update, "completion_logprobs", _table_logprobs):
        metrics = policy_update(model, optimizer, batch, cfg)
    return metrics["loss"], optimizer.seen


class _GradientAtStep(torch.optim.SGD):
    """SGD that keeps the gradient its step saw: ``policy_update`` frees gradients afterwards."""

    def step(self, closure=None):
        self.seen = self.param_groups[0]["params"][0].grad.clone()
        return super().step(closure)


class _Accelerator:
    """What ``GRPOTrainer._compute_loss`` asks of accelerate in one process."""

    num_processes, sync_gradients = 1, True

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def trl(
    b: Random,
    loss_type: str,
    level: str = "token",
    eps: tuple[float, float] = (0.2, 0.2),
    beta: float = 0.0,
    tis: torch.Tensor | None = None,
    max_completion_length: int | None = None,
    bias_corrected_kl: bool = False,
) -> tuple[float, torch.Tensor]:
    """TRL 1.16's ``GRPOTrainer._compute_loss`` on the batch: the trainer object is built without
    its ``__init__`` (no model, no data), with the attributes the loss reads; the model's
    per-token log-probs are ``b.logp`` (a leaf, so the gradient is with respect to them)."""
    from trl import GRPOTrainer

    logp = b.logp.clone().requires_grad_(True)
    trainer = GRPOTrainer.__new__(GRPOTrainer)
    vars(trainer).update(
        loss_type=loss_type,
        importance_sampling_level=level,
        epsilon_low=eps[0],
        epsilon_high=eps[1],
        beta=beta,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=tis is not None,
        vllm_importance_sampling_correction=tis is not None,
        aux_loss_enabled=False,
        _entropy_bonus_enabled=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=max_completion_length,
        accelerator=_Accelerator(),
        args=types.SimpleNamespace(delta=None, use_bias_correction_kl=bias_corrected_kl, steps_per_generation=1),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _get_per_token_logps_and_entropies=lambda *args, **kwargs: (logp, torch.zeros_like(logp), None),
    )
    rows, width = b.logp.shape
    inputs = {
        "prompt_ids": torch.zeros(rows, 1, dtype=torch.long),
        "prompt_mask": torch.ones(rows, 1, dtype=torch.long),
        "completion_ids": torch.zeros(rows, width, dtype=torch.long),
        "completion_mask": b.mask,
        "advantages": b.advantages,
        "old_per_token_logps": b.old,
        "ref_per_token_logps": b.ref,
        "num_items_in_batch": b.mask.sum(),
        "importance_sampling_ratio": tis,
    }
    loss = trainer._compute_loss(None, inputs)
    loss.backward()
    return float(loss.detach()), logp.grad


VERL_AGG = {"seq_mean_token_mean": "seq-mean-token-mean", "token_mean": "token-mean"}
VERL_AGG["seq_mean_token_sum_norm"] = "seq-mean-token-sum-norm"


def verl_policy_loss(
    b: Random,
    name: str,
    agg: str,
    eps: tuple[float, float] = (0.2, 0.2),
    clip_ratio_c: float = 3.0,
    tis: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch_size: int | None = None,
) -> tuple[float, torch.Tensor]:
    """verl's registered policy loss ``name`` (``vanilla``, ``gspo``, ``cispo``) aggregated by its
    ``agg_loss`` (``global_batch_size``: the rows it divides by; None = verl's own count, the
    rows with a trained token)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import ActorConfig

    info: dict = {"global_batch_size": global_batch_size} if global_batch_size is not None else {}
    if loss_scale_factor is not None:
        info["loss_scale_factor"] = loss_scale_factor  # Dr. GRPO's constant, passed on to agg_loss
    config = ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_mini_batch_size=1,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=eps[0],
        clip_ratio_low=eps[0],
        clip_ratio_high=eps[1],
        clip_ratio_c=clip_ratio_c,
        global_batch_info=info,
    )
    logp = b.logp.clone().requires_grad_(True)
    advantages = b.advantages[:, None].expand_as(logp) * b.mask
    loss, _ = get_policy_loss_fn(name)(b.old, logp, advantages, b.mask, VERL_AGG[agg], config, tis)
    loss.backward()
    return float(loss.detach()), logp.grad
