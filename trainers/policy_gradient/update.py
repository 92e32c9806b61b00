"""One policy update from a batch of graded groups: pack, old log-probs, μ passes of
policy-gradient steps (the chosen ``policy_loss``) over minibatches.

Gradient accumulation over micro-batches is exact: the token weights of the aggregation are
computed once over the whole minibatch and sliced per micro-batch, and every policy loss depends
only on a sequence's own tokens. Normalising each micro-batch on its own instead (its own 1/S,
its own token count) would scale micro-batches differently from one pass over the minibatch —
``tests/test_trainer_objectives.py`` shows that this fails the accumulation test for every
aggregation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from rlvr.trainers.policy_gradient.live_progress import report_learn
from rlvr.trainers.policy_gradient.losses import (
    MISMATCH_METRICS,
    completion_logprobs,
    k3_kl,
    mismatch_metrics,
    mismatch_sums,
    policy_loss_terms,
    tis_weights,
    token_weights,
)
from rlvr.trainers.policy_gradient.micro_batches import Cut, equalize, plan_rows, row_lengths
from rlvr.trainers.runtime.precision import FULL, Precision


@dataclass
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor  # completion tokens that train (overlong-masked rows are zero)
    advantages: torch.Tensor  # one per sequence
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    #: the sampler's log-prob of each sampled token, aligned like ``old_logp`` (None: the sampler is the learner)
    sampler_logp: torch.Tensor | None = None


def pack(
    prompts: list[list[int]],
    completions: list[list[int]],
    advantages: torch.Tensor,
    keep: torch.Tensor,
    pad_id: int,
    device: Any,
    sampler_logps: list[list[float]] | None = None,
) -> Batch:
    """Right-padded prompt + completion rows; the mask covers completion tokens only. The
    sampler's per-token log-probs, when given, sit in the completion columns (0 elsewhere)."""
    width = max(len(p) + len(c) for p, c in zip(prompts, completions))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    completion = torch.zeros((len(prompts), width), dtype=torch.float32)
    sampled = None if sampler_logps is None else torch.zeros((len(prompts), width), dtype=torch.float32)
    for row, (p, c) in enumerate(zip(prompts, completions)):
        ids[row, : len(p) + len(c)] = torch.tensor(p + c)
        attention[row, : len(p) + len(c)] = 1
        completion[row, len(p) : len(p) + len(c)] = float(keep[row])
        if sampled is not None:
            if len(sampler_logps[row]) != len(c):
                raise ValueError(f"row {row}: {len(sampler_logps[row])} sampler log-probs for {len(c)} tokens")
            sampled[row, len(p) : len(p) + len(c)] = torch.tensor(sampler_logps[row], dtype=torch.float32)
    return Batch(
        ids.to(device),
        attention.to(device),
        completion.to(device),
        advantages.to(device),
        sampler_logp=None if sampled is None else sampled.to(device),
    )


MINIBATCH_SHUFFLES = ("rows", "none")


def minibatch_order(shuffle: str, seed: int, step: int, rows: int) -> list[int]:
    """The order a rollout step's rows are cut into minibatches in. ``rows``: a permutation of the
    step's rows, as oat's learning step draws one over its buffer (``np.random.permutation``) —
    seeded by (run seed, step) alone, so a resumed run draws the same one with no RNG state, and
    every torchrun rank the same one (the split into ranks follows it, so each optimizer step
    still sees the single-process minibatch). oat draws a new one per PPO epoch; here every
    epoch (μ > 1) reuses the step's. ``none``: in order (verl's actor, ``shuffle: false``)."""
    if shuffle == "none":
        return list(range(rows))
    if shuffle != "rows":
        raise ValueError(f"unknown minibatch_shuffle {shuffle!r}; choose from {MINIBATCH_SHUFFLES}")
    from rlvr.harness.backends.base import sample_seed

    generator = torch.Generator().manual_seed(sample_seed(seed, f"minibatches:step{step}", 0))
    return torch.randperm(rows, generator=generator).tolist()


def old_logp_from_update(mu: int, tis_cap: float | None, minibatches: int) -> bool:
    """Whether the old log-probs can be the update's own (detached) ones: one pass (μ = 1) over
    one minibatch, no TIS weights needed before it. Then π_old = π_θ for every micro-batch (no
    step has been taken yet) and the no-gradient pass ``batch_logprobs`` would compute the same
    values (ratios exactly 1; TRL skips it likewise): a forward pass per row saved."""
    return mu == 1 and minibatches == 1 and not tis_cap


@torch.no_grad()
def batch_logprobs(
    model: torch.nn.Module,
    batch: Batch,
    micro: int,
    chunk: int = 0,
    token_budget: int | None = None,
    shard: Any = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """log π_T of every completion token under ``model`` (no gradient) at the sampling temperature, pass by pass
    (``rlvr.trainers.policy_gradient.micro_batches``: each pass cut to its own longest row), at the batch's width."""
    was_training = model.training
    model.eval()
    lengths = row_lengths(batch.attention_mask)
    out = torch.zeros(batch.completion_mask.shape, dtype=torch.float32, device=batch.completion_mask.device)
    plan = equalize(plan_rows(lengths, range(len(lengths)), micro, token_budget), shard)
    try:
        for rows in plan:
            cut = Cut(rows, lengths, 0, out.device)
            logp = completion_logprobs(
                model,
                cut(batch.input_ids),
                cut(batch.attention_mask),
                cut(batch.completion_mask),
                chunk=chunk,
                temperature=temperature,
            )[0]
            if cut.live:
                out[cut.index, : cut.width] = logp.float()
    finally:
        model.train(was_training)
    return out


#: What an update reports; a step in which nothing trained (every group filtered) logs them as null.
UPDATE_METRICS = (
    "loss",
    "clip_low_fraction",
    "clip_high_fraction",
    "kl",
    "entropy",
    "grad_norm",
    "optimizer_steps",
    *MISMATCH_METRICS,
)


def policy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    cfg: Any,
    precision: Precision = FULL,
    shard: Any = None,
) -> dict[str, Any]:
    """μ passes over the batch in minibatches, in the batch's row order (the caller shuffles:
    ``minibatch_order``). With
    ``cfg.tis_cap`` and sampler log-probs, each token's policy loss is multiplied by its truncated
    importance weight (computed once, before the update; no gradient). ``precision`` scales the
    loss under float16 compute (autocast itself is in the model's forward). Under torchrun
    ``shard`` (``distributed_rows.Shard``) gives this rank's part of each global minibatch, the
    factor from local to global normalisation, the gradient-sync points and the metric reduction."""
    rows = batch.input_ids.shape[0]
    size = cfg.minibatch_size or rows
    minibatches = shard.minibatches if shard else [slice(s, min(rows, s + size)) for s in range(0, rows, size)]
    scales = shard.scales(batch.completion_mask, cfg.loss_agg) if shard else [1.0] * len(minibatches)
    # the optimizer's parameters (under FSDP the module may hold unsharded copies between passes)
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    tis_cap = cfg.tis_cap
    sampled = batch.sampler_logp
    tis = tis_weights(batch.old_logp, sampled, tis_cap) if tis_cap and sampled is not None else None
    if batch.old_logp is None:  # on-policy (``old_logp_from_update``): filled pass by pass below
        if cfg.mu != 1 or len(minibatches) != 1 or tis is not None:
            raise ValueError("old log-probs may come from the update only for one pass over one minibatch, no TIS")
        batch.old_logp = torch.zeros(batch.completion_mask.shape, device=batch.completion_mask.device)
        fill_old = True
    else:
        fill_old = False
    totals = {"tokens": 0.0, "clip_low": 0.0, "clip_high": 0.0, "kl": 0.0, "entropy": 0.0, "loss": 0.0}
    grad_norms = []
    lengths = row_lengths(batch.attention_mask)
    budget, chunk = getattr(cfg, "micro_token_budget", None), getattr(cfg, "logits_chunk", 0)
    every_micro_batch = getattr(cfg, "fsdp_grad_sync", "every_micro_batch") == "every_micro_batch"
    model.train()
    plans = [
        equalize(plan_rows(lengths, range(mb.start, mb.stop), cfg.micro_batch_size, budget), shard)
        for mb in minibatches
    ]
    micro_total, micro_done = cfg.mu * sum(len(plan) for plan in plans), 0
    for _ in range(cfg.mu):
        for mb, scale, plan in zip(minibatches, scales, plans):
            # once per minibatch, never per micro-batch (the module docstring says why)
            weights = token_weights(batch.completion_mask[mb], cfg.loss_agg, cfg.normaliser) * scale
            optimizer.zero_grad(set_to_none=True)
            for k, rows in enumerate(plan):
                if shard:
                    shard.sync_gradients(model, k == len(plan) - 1, every_micro_batch)
                cut = Cut(rows, lengths, mb.start, weights.device)
                mask = cut(batch.completion_mask)
                logp, entropy = completion_logprobs(
                    model,
                    cut(batch.input_ids),
                    cut(batch.attention_mask),
                    mask,
                    with_entropy=True,
                    chunk=chunk,
                    temperature=cfg.temperature,
                )
                if fill_old and cut.live:  # the weights before any step: π_old is π_θ, detached
                    batch.old_logp[cut.index, : cut.width] = logp.detach().float()
                old_logp = logp.detach() if fill_old else cut(batch.old_logp)
                terms = policy_loss_terms(
                    cfg.policy_loss,
                    logp,
                    old_logp,
                    cut(batch.advantages),
                    mask,
                    cfg.eps_low,
                    cfg.eps_high,
                    cfg.clip_ratio_c,
                )
                per_token = terms["loss"] if tis is None else terms["loss"] * cut(tis)
                reference = cut(batch.ref_logp) if batch.ref_logp is not None else old_logp
                kl = k3_kl(logp, reference)
                if cfg.beta:
                    per_token = per_token + cfg.beta * kl
                rows_weights = weights.index_select(0, cut.index - mb.start)[:, : cut.width]
                loss = (per_token * rows_weights).sum() * (1.0 if cut.live else 0.0)
                precision.backward(loss)
                if not cut.live:
                    continue
                with torch.no_grad():
                    totals["tokens"] += float(mask.sum())
                    totals["clip_low"] += float(terms["clip_low"].sum())
                    totals["clip_high"] += float(terms["clip_high"].sum())
                    totals["kl"] += float((kl * mask).sum())
                    totals["entropy"] += float((entropy * mask).sum())
                    totals["loss"] += float(loss)
                micro_done += 1
                report_learn(micro_done, micro_total)
            precision.unscale(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
            grad_norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))  # FSDP: DTensor
            precision.step(optimizer)
    optimizer.zero_grad(set_to_none=True)  # no gradients held through the next rollout (4 bytes/parameter)
    if shard:
        totals = shard.reduce(totals)
    tokens = max(totals["tokens"], 1.0)
    mismatch = dict.fromkeys(MISMATCH_METRICS)
    if sampled is not None:
        sums = mismatch_sums(batch.old_logp, sampled, batch.completion_mask, tis_cap)
        mismatch = mismatch_metrics(shard.reduce_mismatch(sums) if shard else sums, tis_cap)
    return {  # keys: UPDATE_METRICS
        "loss": totals["loss"] / max(1, len(grad_norms)),
        "clip_low_fraction": totals["clip_low"] / tokens,
        "clip_high_fraction": totals["clip_high"] / tokens,
        "kl": totals["kl"] / tokens,
        "entropy": totals["entropy"] / tokens,
        "grad_norm": sum(grad_norms) / max(1, len(grad_norms)),
        "optimizer_steps": len(grad_norms),
        **mismatch,
    }
