"""One policy update from a batch of graded groups: pack, old log-probs, μ passes of clipped
policy-gradient steps over minibatches (gradient accumulation over micro-batches is exact,
because every aggregation mode is a fixed per-token weight)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainers.losses import completion_logprobs, k3_kl, ppo_clip_terms, token_weights


@dataclass
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor  # completion tokens that train (overlong-masked rows are zero)
    advantages: torch.Tensor  # one per sequence
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None


def pack(
    prompts: list[list[int]],
    completions: list[list[int]],
    advantages: torch.Tensor,
    keep: torch.Tensor,
    pad_id: int,
    device: Any,
) -> Batch:
    """Right-padded prompt + completion rows; the mask covers completion tokens only."""
    width = max(len(p) + len(c) for p, c in zip(prompts, completions))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    completion = torch.zeros((len(prompts), width), dtype=torch.float32)
    for row, (p, c) in enumerate(zip(prompts, completions)):
        ids[row, : len(p) + len(c)] = torch.tensor(p + c)
        attention[row, : len(p) + len(c)] = 1
        completion[row, len(p) : len(p) + len(c)] = float(keep[row])
    return Batch(ids.to(device), attention.to(device), completion.to(device), advantages.to(device))


@torch.no_grad()
def batch_logprobs(model: torch.nn.Module, batch: Batch, micro: int) -> torch.Tensor:
    was_training = model.training
    model.eval()
    try:
        parts = [
            completion_logprobs(
                model,
                batch.input_ids[i : i + micro],
                batch.attention_mask[i : i + micro],
                batch.completion_mask[i : i + micro],
            )[0]
            for i in range(0, batch.input_ids.shape[0], micro)
        ]
    finally:
        model.train(was_training)
    return torch.cat(parts)


#: What an update reports; a step in which nothing trained (every group filtered) logs them as null.
UPDATE_METRICS = ("loss", "clip_low_fraction", "clip_high_fraction", "kl", "entropy", "grad_norm", "optimizer_steps")


def policy_update(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, cfg: Any, shard: Any = None
) -> dict[str, float]:
    """μ passes over the batch in minibatches (in order, no shuffling, as oat does). Under torchrun
    ``shard`` (``trainers.distributed.Shard``) gives this rank's part of each global minibatch, the
    factor from local to global normalisation, the gradient-sync points and the metric reduction."""
    rows = batch.input_ids.shape[0]
    size = cfg.minibatch_size or rows
    minibatches = shard.minibatches if shard else [slice(s, min(rows, s + size)) for s in range(0, rows, size)]
    scales = shard.scales(batch.completion_mask, cfg) if shard else [1.0] * len(minibatches)
    # the optimizer's parameters (under FSDP the module may hold unsharded copies between passes)
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    totals = {"tokens": 0.0, "clip_low": 0.0, "clip_high": 0.0, "kl": 0.0, "entropy": 0.0, "loss": 0.0}
    grad_norms = []
    model.train()
    for _ in range(cfg.mu):
        for mb, scale in zip(minibatches, scales):
            weights = token_weights(batch.completion_mask[mb], cfg.loss_agg, cfg.normaliser) * scale
            optimizer.zero_grad(set_to_none=True)
            for m0 in range(mb.start, mb.stop, cfg.micro_batch_size):
                m = slice(m0, min(mb.stop, m0 + cfg.micro_batch_size))
                if shard:
                    shard.sync_gradients(model, m.stop == mb.stop)
                mask = batch.completion_mask[m]
                logp, entropy = completion_logprobs(
                    model, batch.input_ids[m], batch.attention_mask[m], mask, with_entropy=True
                )
                terms = ppo_clip_terms(logp, batch.old_logp[m], batch.advantages[m], cfg.eps_low, cfg.eps_high)
                reference = batch.ref_logp[m] if batch.ref_logp is not None else batch.old_logp[m]
                kl = k3_kl(logp, reference)
                per_token = terms["loss"] + cfg.beta * kl if cfg.beta else terms["loss"]
                loss = (per_token * weights[m0 - mb.start : m.stop - mb.start]).sum()
                loss.backward()
                with torch.no_grad():
                    totals["tokens"] += float(mask.sum())
                    totals["clip_low"] += float((terms["clip_low"] * mask).sum())
                    totals["clip_high"] += float((terms["clip_high"] * mask).sum())
                    totals["kl"] += float((kl * mask).sum())
                    totals["entropy"] += float((entropy * mask).sum())
                    totals["loss"] += float(loss)
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
            grad_norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))  # FSDP: DTensor
            optimizer.step()
    if shard:
        totals = shard.reduce(totals)
    tokens = max(totals["tokens"], 1.0)
    return {  # keys: UPDATE_METRICS
        "loss": totals["loss"] / max(1, len(grad_norms)),
        "clip_low_fraction": totals["clip_low"] / tokens,
        "clip_high_fraction": totals["clip_high"] / tokens,
        "kl": totals["kl"] / tokens,
        "entropy": totals["entropy"] / tokens,
        "grad_norm": sum(grad_norms) / max(1, len(grad_norms)),
        "optimizer_steps": len(grad_norms),
    }
