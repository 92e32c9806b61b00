"""Which rows go through the model together, and how wide each pass is.

``pack`` pads every row of a step to the step's longest; a micro-batch here is cut to its own
longest row instead (rows are right-padded and attention is causal, so the columns cut away
never influence the kept ones: the loss and gradient are the padded version's). With
``micro_token_budget`` (verl's dynamic batch size) a minibatch's rows are sorted longest first
and packed greedily into micro-batches whose padded size, rows × their longest row, stays within
the budget (a row longer than the budget goes alone): short answers share a pass, long ones do
not drag the short ones to their width. Token weights are fixed per token over the whole
minibatch (``rlvr.trainers.policy_gradient.update``), so regrouping rows changes only the summation order.

Under torchrun every rank must run as many passes as the others (FSDP gathers weights per
pass, DDP reduces per backward): ``equalize`` pads a rank's plan with ``None`` passes, which
run one real row at weight zero.
"""

from __future__ import annotations

from typing import Any

import torch

Plan = list[list[int] | None]


def plan_rows(lengths: list[int], rows: range, micro_batch_size: int, token_budget: int | None = None) -> Plan:
    """Micro-batches (lists of row indices) over ``rows``: ``micro_batch_size`` consecutive rows
    each, or with ``token_budget`` the greedy longest-first packing described above."""
    if not token_budget:
        return [list(rows[i : i + micro_batch_size]) for i in range(0, len(rows), micro_batch_size)]
    order = sorted(rows, key=lambda r: -lengths[r])
    plan: Plan = []
    current: list[int] = []
    for r in order:
        if current and (len(current) + 1) * lengths[current[0]] > token_budget:
            plan.append(current)
            current = []
        current.append(r)
    if current:
        plan.append(current)
    return plan


def equalize(plan: Plan, shard: Any) -> Plan:
    """``plan`` padded with ``None`` (a zero-weight pass) to the longest plan of any rank."""
    if shard is None:
        return plan
    longest = int(shard.ctx.all_reduce([float(len(plan))], "max")[0])
    return plan + [None] * (longest - len(plan))


def row_lengths(attention_mask: torch.Tensor) -> list[int]:
    """Attended tokens per row: rows are right-padded, so a row's last real column is length − 1."""
    return [max(1, int(n)) for n in attention_mask.sum(dim=1).tolist()]


class Cut:
    """One pass: its rows (``live`` False: a padding pass on ``fallback`` at weight zero) cut to
    their own longest row; ``__call__`` slices any per-token (S, T) or per-row (S,) tensor."""

    def __init__(self, rows: list[int] | None, lengths: list[int], fallback: int, device: Any):
        self.live = rows is not None
        self.rows = rows if rows is not None else [fallback]
        self.index = torch.tensor(self.rows, device=device)
        self.width = max(lengths[r] for r in self.rows)

    def __call__(self, tensor: torch.Tensor | None) -> torch.Tensor | None:
        if tensor is None:
            return None
        picked = tensor.index_select(0, self.index)
        return picked[:, : self.width] if picked.dim() > 1 else picked
