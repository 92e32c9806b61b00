"""Rewards to advantages: group baselines, the std choice, and overlong handling.

Outcome supervision: every token of response i gets the same advantage Â_i.

* ``grpo``   Â_i = (r_i − mean_j r_j) / (std_j r_j + ε)   DeepSeekMath eq. 3 (GRPO) and DAPO eq. 9.
  std is the unbiased (Bessel, ÷(G−1)) sample std, as oat, verl and TRL compute it; ε = 1e-8
  as in oat (verl uses 1e-6, TRL 1e-4). A group of one sample has advantage 0.
* ``drgrpo`` Â_i = r_i − mean_j r_j                       Dr. GRPO App. A eq. 7 (no std division).
* ``rloo``   Â_i = r_i − (1/(G−1)) Σ_{j≠i} r_j = G/(G−1) · (r_i − mean_j r_j)   RLOO (Ahmadian et
  al. 2024, "Back to Basics", arXiv 2402.14740; Dr. GRPO App. A: the leave-one-out baseline is
  the Dr. GRPO advantage rescaled).

Batch modes (REINFORCE++, Hu et al. 2025, arXiv 2501.03262, global advantage normalisation):
the statistics are over the whole step's batch, not a group (``batch_normalised_advantages``).

* ``reinforce_pp``          Â_i = (r_i − μ_B) / (σ_B + ε)
* ``reinforce_pp_baseline`` Â_i = (c_i − μ_B) / (σ_B + ε), c_i = r_i − mean_j r_j (group mean first)

μ_B, σ_B are token-weighted over every trained token of the batch (a sample with |o_i| trained
tokens counts |o_i| times; masked and unverifiable samples not at all), as OpenRLHF and verl
whiten advantages over the response mask; σ_B with Bessel's correction over tokens, as verl's
``masked_whiten``. REINFORCE++'s per-token KL penalty in the reward is not implemented (β adds
k3 KL to the loss instead).

Overlong responses (``finish_reason == "length"``):

* ``zero``  reward 0 (Dr. GRPO / oat default; still in the loss).
* ``mask``  kept reward, loss mask 0: the response contributes no gradient (DAPO's "overlong
  filtering"; SRPO sets such advantages to 0).
* ``soft``  DAPO eq. 13 soft punishment added to the reward: 0 when L ≤ L_max − L_cache,
  ((L_max − L_cache) − L) / L_cache when L_max − L_cache < L ≤ L_max, −1 beyond.
* ``none``  nothing special.
"""

from __future__ import annotations

from typing import Sequence

import torch
from rlvr.trainers.policy_gradient.rules import Advantage, rule

GROUP_MODES = ("grpo", "drgrpo", "rloo")
OVERLONG_MODES = ("none", "zero", "mask", "soft")


def group_advantages(
    rewards: torch.Tensor, group_size: int, mode: str = "grpo", eps: float = 1e-8, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """Advantages for rewards laid out group by group: ``rewards[k*G:(k+1)*G]`` share a prompt.

    ``valid`` (0/1 per sample): samples whose verdict says nothing about the answer (the
    grader failed) take no part: the group's mean and std are over its valid samples (G below
    becomes their count), and an invalid sample's advantage is 0. All valid: the formulas above.
    """
    if mode not in GROUP_MODES:
        raise ValueError(f"unknown group advantage mode {mode!r}; choose from {GROUP_MODES}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards.double().view(-1, group_size)
    v = torch.ones_like(r) if valid is None else valid.double().view(-1, group_size)
    n = v.sum(dim=1, keepdim=True)
    centred = (r - (r * v).sum(dim=1, keepdim=True) / n.clamp(min=1)) * v
    if mode == "grpo":
        out = centred / (((centred**2).sum(dim=1, keepdim=True) / (n - 1).clamp(min=1)).sqrt() + eps)
    elif mode == "rloo":
        out = centred * n / (n - 1).clamp(min=1)
    else:
        out = centred
    return torch.where(n > 1, out, torch.zeros_like(out)).view(-1).float()


def batch_normalised_advantages(values: torch.Tensor, token_counts: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """REINFORCE++'s global normalisation: (v_i − μ_B) / (σ_B + ε) with μ_B, σ_B over every trained
    token of the batch, sample i weighing ``token_counts[i]`` (its trained tokens, 0 for a masked
    or unverifiable sample, whose advantage is then 0). σ_B: Bessel-corrected over tokens."""
    v, n = values.double(), token_counts.double()
    total = n.sum()
    if total <= 0:
        return torch.zeros_like(values, dtype=torch.float32)
    mean = (n * v).sum() / total
    std = ((n * (v - mean) ** 2).sum() / (total - 1).clamp(min=1)).sqrt()
    return torch.where(n > 0, (v - mean) / (std + eps), torch.zeros_like(v)).float()


#: every advantage estimator, declared once (``rules.Advantage``): a new one is a new entry
ADVANTAGES: dict[str, Advantage] = {
    a.name: a
    for a in (
        Advantage(
            "grpo",
            lambda r, g, eps, valid, counts: group_advantages(r, g, "grpo", eps, valid),
            "(r − mean) / (std + {eps:g}) within each group (Bessel std)",
            "DeepSeekMath eq. 3, DAPO eq. 9",
            "(r - mean)/(std + std_eps)",
        ),
        Advantage(
            "drgrpo",
            lambda r, g, eps, valid, counts: group_advantages(r, g, "drgrpo", eps, valid),
            "r − mean within each group (no std division)",
            "Dr. GRPO App. A eq. 7",
            "r - mean",
        ),
        Advantage(
            "rloo",
            lambda r, g, eps, valid, counts: group_advantages(r, g, "rloo", eps, valid),
            "r − mean of the other G−1 samples (leave-one-out)",
            "RLOO, arXiv 2402.14740",
        ),
        Advantage(
            "reinforce_pp",
            lambda r, g, eps, valid, counts: batch_normalised_advantages(r, counts, eps),
            "(r − μ_B) / (σ_B + {eps:g}) over the step's trained tokens (REINFORCE++)",
            "REINFORCE++, arXiv 2501.03262",
        ),
        Advantage(
            "reinforce_pp_baseline",
            lambda r, g, eps, valid, counts: batch_normalised_advantages(
                group_advantages(r, g, "drgrpo", eps, valid), counts, eps
            ),
            "(r − group mean − μ_B) / (σ_B + {eps:g}) over the step's trained tokens (REINFORCE++ with baseline)",
            "REINFORCE++, arXiv 2501.03262",
        ),
    )
}


def compute_advantages(
    rewards: torch.Tensor,
    group_size: int,
    mode: str,
    eps: float,
    valid: torch.Tensor | None,
    token_counts: torch.Tensor,
) -> torch.Tensor:
    """One advantage per sample for any of ``ADVANTAGES``; ``token_counts`` (trained tokens per
    sample) matters only to the batch modes."""
    return rule(ADVANTAGES, mode, "advantage").compute(rewards, group_size, eps, valid, token_counts)


def soft_overlong_penalty(length: int, max_tokens: int, cache: int) -> float:
    """DAPO eq. 13: a linear penalty over the last ``cache`` tokens of the budget."""
    threshold = max_tokens - cache
    if length <= threshold:
        return 0.0
    if length <= max_tokens:
        return (threshold - length) / cache
    return -1.0


def shape_rewards(
    correct: Sequence[bool],
    lengths: Sequence[int],
    truncated: Sequence[bool],
    overlong: str = "none",
    max_tokens: int = 0,
    cache: int = 0,
    values: tuple[float, float] = (1.0, 0.0),
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rewards, sequence loss mask)`` from verdicts. ``values`` = (reward if correct, if not):
    (1, 0) for Dr. GRPO / GRPO, (1, −1) for DAPO eq. 7."""
    if overlong not in OVERLONG_MODES:
        raise ValueError(f"unknown overlong mode {overlong!r}; choose from {OVERLONG_MODES}")
    rewards, keep = [], []
    for ok, length, cut in zip(correct, lengths, truncated):
        r = values[0] if ok else values[1]
        k = 1.0
        if cut and overlong == "zero":
            r = 0.0
        elif cut and overlong == "mask":
            k = 0.0
        elif overlong == "soft":
            if not cache or cache > max_tokens:
                raise ValueError("soft overlong punishment needs 0 < overlong_cache <= max_tokens")
            r += soft_overlong_penalty(length, max_tokens, cache)
        rewards.append(r)
        keep.append(k)
    return torch.tensor(rewards, dtype=torch.float32), torch.tensor(keep, dtype=torch.float32)


def zero_variance_fraction(rewards: torch.Tensor, group_size: int) -> float:
    """Share of groups whose rewards are all equal (zero advantage, zero gradient)."""
    grouped = rewards.view(-1, group_size)
    return float((grouped.max(dim=1).values == grouped.min(dim=1).values).float().mean())
