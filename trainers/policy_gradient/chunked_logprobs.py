"""Token log-probabilities and entropies without full-vocabulary logits in memory.

A 7B policy's vocabulary projection at 4,096 response tokens is 4,096 × 152k float32 logits,
2.5 GB per row, and autograd keeps them (plus the backward's gradient of the same size) from
the forward until the backward reaches the head. Here the final hidden states go through the
output projection ``logits_chunk`` tokens at a time, each chunk reduced at once to what the
loss needs (log π of the sampled token, the entropy) and run under non-reentrant activation
checkpointing: the forward keeps only the chunk's hidden states, the backward recomputes one
chunk's logits at a time. The gradient is the unchunked one: the same operations on the same
rows, only their grouping into matrix products differs (``tests/test_trainer_memory.py``).

How it reaches the head without bypassing DDP / FSDP: ``install`` replaces the output
projection's ``forward`` on the instance (state dict, names and FSDP sharding unchanged); while a
``head_job`` is open that forward returns ``[log π, entropy]`` per position instead of logits, so
the reduction runs inside the wrapped model's own forward and every wrapper hook fires as usual.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass
from typing import Iterator

import torch
from torch.utils.checkpoint import checkpoint


@dataclass
class HeadJob:
    targets: torch.Tensor  # (S, T) the token each position predicts
    chunk: int  # tokens per chunk; 0 = one pass over all positions, no checkpointing (the plain path)
    temperature: float = 1.0
    with_entropy: bool = False


def chunk_stats(
    hidden: torch.Tensor, head: torch.nn.Module, targets: torch.Tensor, temperature: float = 1.0, entropy: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(target) and the entropy (no gradient) of ``head(hidden) / temperature`` per row,
    the logits upcast to float32 first (as the unchunked path always did)."""
    logits = type(head).forward(head, hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    logsumexp = torch.logsumexp(logits, dim=-1)
    logp = torch.gather(logits, -1, targets[..., None]).squeeze(-1) - logsumexp
    if not entropy:
        return logp, torch.zeros_like(logsumexp).detach()
    with torch.no_grad():
        probs = torch.softmax(logits, dim=-1)
        ent = logsumexp - (probs * logits).sum(dim=-1)
    return logp, ent


class _LinearHeadTile(torch.autograd.Function):
    """log π(target) and entropy of one chunk through a linear head, fused: the forward keeps
    the chunk's hidden states and log-sum-exp only; the backward recomputes the logits (under
    the forward's autocast state) and turns that one float32 tensor in place into the gradient
    ``(onehot - softmax) · g``, the expression autograd's logsumexp and gather backwards sum to.
    One logits-sized tensor at the head's backward where a checkpointed autograd graph holds
    about four (the recomputed logits, the softmax, the scattered one-hot, their sum), and the
    entropy (a metric, no gradient) is not recomputed there."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, with_entropy):
        device = hidden.device.type
        ctx.autocast = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        logits = torch.nn.functional.linear(hidden, weight, bias).float()
        if temperature != 1.0:
            logits = logits / temperature
        lse = torch.logsumexp(logits, dim=-1)
        logp = torch.gather(logits, -1, targets[..., None]).squeeze(-1) - lse
        entropy = torch.zeros_like(lse)
        if with_entropy:  # H = lse - Σ p·z, the product summed by a matmul (no second logits-sized tensor)
            probs = (logits - lse[..., None]).exp_()
            entropy = lse - (probs[..., None, :] @ logits[..., :, None]).reshape(lse.shape)
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(entropy)
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        inputs = [t.detach().requires_grad_(t.requires_grad) if t is not None else None for t in (hidden, weight, bias)]
        device, enabled, dtype = ctx.autocast
        with torch.enable_grad(), torch.autocast(device, dtype=dtype, enabled=enabled):
            logits = torch.nn.functional.linear(*inputs).float()
        with torch.no_grad():
            scale = grad_logp if ctx.temperature == 1.0 else grad_logp / ctx.temperature
            work = logits.detach() if ctx.temperature == 1.0 else logits.detach() / ctx.temperature
            work.sub_(lse[..., None]).exp_().mul_(-scale[..., None])  # -g·softmax, in place
            work.scatter_add_(-1, targets[..., None], scale[..., None])  # + g at the target
        wanted = [t for t in inputs if t is not None and t.requires_grad]
        grads = iter(torch.autograd.grad(logits, wanted, work))
        return (*(next(grads) if t is not None and t.requires_grad else None for t in inputs), None, None, None)


def _fusable(head: torch.nn.Module) -> bool:
    return isinstance(head, torch.nn.Linear) and type(head).forward is torch.nn.Linear.forward


def token_stats(hidden: torch.Tensor, head: torch.nn.Module, job: HeadJob) -> torch.Tensor:
    """``(S, T, 2)``: log π and entropy for the positions of ``hidden`` (S, T, H) predicting
    ``job.targets`` (S, T), ``job.chunk`` tokens at a time (flattened over rows)."""
    rows, length, width = hidden.shape
    flat, targets = hidden.reshape(rows * length, width), job.targets.reshape(rows * length)
    total = flat.shape[0]
    if job.chunk <= 0:
        logp, ent = chunk_stats(flat, head, targets, job.temperature, job.with_entropy)
        return torch.stack([logp, ent], dim=-1).reshape(rows, length, 2)
    recompute = torch.is_grad_enabled() and flat.requires_grad
    parts = []
    for start in range(0, total, job.chunk):
        args = (flat[start : start + job.chunk], head, targets[start : start + job.chunk], job.temperature)
        if recompute and _fusable(head):
            logp, ent = _LinearHeadTile.apply(args[0], head.weight, head.bias, *args[2:], job.with_entropy)
        elif recompute:
            logp, ent = checkpoint(chunk_stats, *args, job.with_entropy, use_reentrant=False)
        else:
            logp, ent = chunk_stats(*args, job.with_entropy)
        parts.append(torch.stack([logp, ent], dim=-1))
    return torch.cat(parts).reshape(rows, length, 2)


def _head_forward(self: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    job = getattr(self, "_rlvr_job", None)
    if job is None:
        return type(self).forward(self, hidden)
    # the model hands over positions first-1 .. last; the last predicts nothing we train on
    return token_stats(hidden[:, :-1], self, job)


def output_head(model: torch.nn.Module) -> torch.nn.Module:
    inner = getattr(model, "module", model)  # DDP's wrapper
    head = inner.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(inner).__name__} has no output embeddings to compute log-probs from")
    return head


def install(model: torch.nn.Module) -> torch.nn.Module:
    """The model's output projection, its ``forward`` replaced (once) by the job-aware one; a
    bound method, so ``copy.deepcopy`` of the model rebinds it to the copy."""
    head = output_head(model)
    if not isinstance(head.__dict__.get("forward"), types.MethodType):
        head.forward = types.MethodType(_head_forward, head)
    return head


@contextlib.contextmanager
def head_job(model: torch.nn.Module, job: HeadJob) -> Iterator[None]:
    """While open, the model's forward returns ``(S, T, 2)`` token stats as its ``logits``."""
    head = install(model)
    head._rlvr_job = job
    try:
        yield
    finally:
        head._rlvr_job = None
