"""Which rows of a step's batch a rank trains, and how it weights them (used by ``Context``).

The global minibatch of ``minibatch_size`` rows (whole groups: it must be a multiple of
``group_size``) is split across the ranks by whole groups, so each optimizer step sees exactly
the rows of the single-process minibatch. Each rank's part of a minibatch is padded with dummy
rows (one attended token, nothing trained) to the largest part, so every rank runs the same
number of micro-batches: forward/backward collectives (DDP's all-reduce, FSDP's all-gather /
reduce-scatter) pair up across ranks.

Token weights are computed locally (``rlvr.trainers.policy_gradient.losses.token_weights``) and rescaled by
``world_size · local denominator / global denominator``: the rows of the global minibatch
(``seq_mean_token_mean``, Dr. GRPO's ``seq_mean_token_sum_norm``) or its tokens
(``token_mean``), as each aggregation's ``denominator`` in ``rlvr.trainers.policy_gradient.losses.AGGREGATIONS``
says, both all-reduced (SUM) once per update. DDP and FSDP *average* gradients over
ranks; the factor ``world_size`` turns that average back into the sum, so the gradient is the
single-process gradient. DDP syncs only on a minibatch's last micro-batch
(``require_backward_grad_sync``, what ``no_sync`` sets); FSDP reduce-scatters after every
micro-batch unless ``fsdp_grad_sync: last_micro_batch`` (``set_requires_gradient_sync``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from rlvr.trainers.policy_gradient.losses import AGGREGATIONS
from rlvr.trainers.policy_gradient.rules import rule


class Reducer(Protocol):
    """What a shard needs of ``rlvr.trainers.runtime.distributed.Context``: the world size and a sum over ranks
    (a Protocol, so this module does not import the one that imports it)."""

    world: int

    def all_reduce(self, values: Sequence[float], op: str = "sum") -> list[float]: ...


def split_groups(n_groups: int, per_minibatch: int, world: int) -> list[list[list[int]]]:
    """Minibatch j holds groups [j·per_minibatch, ...); its groups are cut into ``world`` contiguous
    parts as equal as possible (the larger parts rotate over the ranks from one minibatch to the next)."""
    out = []
    for j, start in enumerate(range(0, n_groups, per_minibatch)):
        indices = list(range(start, min(n_groups, start + per_minibatch)))
        base, extra = divmod(len(indices), world)
        sizes = [base + (1 if (r - j) % world < extra else 0) for r in range(world)]
        parts, at = [], 0
        for size in sizes:
            parts.append(indices[at : at + size])
            at += size
        out.append(parts)
    return out


class Shard:
    """This rank's rows of a step's batch: ``rows`` (global row indices, None = dummy) laid out as
    ``minibatches`` (equal slices on every rank) with ``real`` rows each; the update's hooks."""

    def __init__(self, ctx: Reducer, rows: list[int | None], minibatches: list[slice], real: list[int]):
        self.ctx, self.rows, self.minibatches, self.real = ctx, rows, minibatches, real

    def take(self, prompts: list, completions: list, advantages: torch.Tensor, keep: torch.Tensor, *per_token: Any):
        """The local rows; a dummy row is the first prompt with no completion, advantage 0, not kept.
        ``per_token``: more per-completion lists (e.g. the sampler's log-probs; None passes through),
        empty on a dummy row."""
        index = [r if r is not None else 0 for r in self.rows]
        dummy = torch.tensor([r is None for r in self.rows])

        def rows(column: Any) -> list | None:
            return None if column is None else [column[r] if r is not None else [] for r in self.rows]

        return (
            [prompts[i] for i in index],
            rows(completions),
            torch.where(dummy, torch.zeros(()), advantages[index].float()),
            torch.where(dummy, torch.zeros(()), keep[index].float()),
            *(rows(column) for column in per_token),
        )

    def scales(self, completion_mask: torch.Tensor, loss_agg: str) -> list[float]:
        """Per minibatch: world · local denominator / global denominator (see the module docstring),
        the denominator being the ``loss_agg`` aggregation's."""
        tokens = [float(completion_mask[mb].sum()) for mb in self.minibatches]
        totals = self.ctx.all_reduce([float(n) for n in self.real] + tokens)
        n = len(self.minibatches)
        global_rows, global_tokens = totals[:n], totals[n:]
        kind = rule(AGGREGATIONS, loss_agg, "loss aggregation").denominator
        out = []
        for j, mb in enumerate(self.minibatches):
            if kind == "rows":
                local, total = float(mb.stop - mb.start), max(global_rows[j], 1.0)
            else:
                local, total = max(tokens[j], 1.0), max(global_tokens[j], 1.0)
            out.append(self.ctx.world * local / total)
        return out

    def sync_gradients(self, model: torch.nn.Module, last: bool, every_micro_batch: bool = True) -> None:
        """Set before a micro-batch's forward. DDP all-reduces only on a minibatch's ``last``
        micro-batch (its gradients are full-size either way). FSDP2 reduce-scatters after every
        micro-batch by default (``fsdp_grad_sync: every_micro_batch``, as verl): a rank then
        accumulates only its gradient shard; skipping it until the last one keeps full-size
        float32 gradients on every rank for the whole minibatch."""
        if hasattr(model, "require_backward_grad_sync"):  # DDP: what no_sync() toggles
            model.require_backward_grad_sync = last
        elif hasattr(model, "set_requires_gradient_sync"):  # FSDP2
            model.set_requires_gradient_sync(last or every_micro_batch)

    def reduce_mismatch(self, sums: dict[str, float]) -> dict[str, float]:
        """``rlvr.trainers.policy_gradient.losses.mismatch_sums`` over every rank: sums added, ``ratio_max`` the max."""
        keys = sorted(k for k in sums if k != "ratio_max")
        summed = dict(zip(keys, self.ctx.all_reduce([sums[k] for k in keys])))
        summed["ratio_max"] = self.ctx.all_reduce([sums["ratio_max"]], op="max")[0]
        return summed

    def reduce(self, totals: dict[str, float]) -> dict[str, float]:
        """Totals summed over ranks; the loss carried the factor world_size, taken out here."""
        keys = sorted(totals)
        summed = dict(zip(keys, self.ctx.all_reduce([totals[k] for k in keys])))
        summed["loss"] = summed["loss"] / self.ctx.world
        return summed
