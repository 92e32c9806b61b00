"""The clipped policy loss, the k3 KL term, and the loss-aggregation modes, named explicitly.

Per token (maximised objective, DeepSeekMath eq. 3; DAPO eq. 8 adds the asymmetric clip):

    ρ_t = exp(log π_θ(o_t) − log π_old(o_t))
    ℓ_t = −min(ρ_t Â, clip(ρ_t, 1 − ε_low, 1 + ε_high) Â)          (loss to minimise)
    KL_t = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1       (k3, DeepSeekMath eq. 4)

Aggregation of ℓ over a (mini)batch of S responses with masks m (|o_s| = Σ_t m_{s,t}):

* ``seq_mean_token_mean``     (1/S) Σ_s (1/|o_s|) Σ_t ℓ_{s,t} m_{s,t}    GRPO (DeepSeekMath eq. 3)
* ``token_mean``              (1/Σ_s |o_s|) Σ_s Σ_t ℓ_{s,t} m_{s,t}      DAPO eq. 8 (token-level)
* ``seq_mean_token_sum_norm`` (1/S) Σ_s (1/C) Σ_t ℓ_{s,t} m_{s,t}        Dr. GRPO (App. A eq. 7 with
  oat's constant normaliser C = the generation budget, e.g. 3000)

Each mode is a fixed weight per token (``token_weights``), so a minibatch split into
micro-batches for gradient accumulation gives exactly the same gradient as one pass.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm")


def token_weights(mask: torch.Tensor, mode: str, constant: float | None = None) -> torch.Tensor:
    """Weight of every token in the aggregated loss (zero where ``mask`` is zero)."""
    mask = mask.float()
    sequences = mask.shape[0]
    if mode == "seq_mean_token_mean":
        lengths = mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        return mask / lengths / sequences
    if mode == "token_mean":
        return mask / mask.sum().clamp(min=1.0)
    if mode == "seq_mean_token_sum_norm":
        if not constant or constant <= 0:
            raise ValueError("seq_mean_token_sum_norm needs a positive constant normaliser (the generation budget)")
        return mask / (constant * sequences)
    raise ValueError(f"unknown loss aggregation {mode!r}; choose from {AGGREGATIONS}")


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, constant: float | None = None) -> torch.Tensor:
    return (values * token_weights(mask, mode, constant)).sum()


def ppo_clip_terms(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.2
) -> dict[str, torch.Tensor]:
    """Per-token clipped-surrogate loss and clip indicators; ``advantages`` is per sequence (S,)
    or per token (S, T). ``clip_low`` marks tokens whose ratio is clipped at 1 − ε_low with a
    negative advantage, ``clip_high`` at 1 + ε_high with a positive one (where clipping bites)."""
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    return {
        "loss": -torch.minimum(unclipped, clipped),
        "ratio": ratio,
        "clip_low": ((ratio < 1.0 - eps_low) & (adv < 0)).float(),
        "clip_high": ((ratio > 1.0 + eps_high) & (adv > 0)).float(),
    }


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(π_θ ‖ π_ref) per token: unbiased and never negative."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_mask: torch.Tensor,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) for every position (aligned with ``input_ids``; only ``completion_mask``
    positions matter, the others are 0) and optionally the policy entropy there. The vocabulary
    projection runs only from the first completion column on (``logits_to_keep``): prompt
    positions would cost a full-vocabulary softmax each and never enter the loss."""
    length = input_ids.shape[1]
    columns = torch.nonzero(completion_mask.any(dim=0)).flatten()
    first = max(1, int(columns[0]) if len(columns) else length - 1)
    positions = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, logits_to_keep=length - first + 1
    )
    logits = out.logits[:, :-1, :].float()  # predicts the tokens at columns first .. length-1
    targets = input_ids[:, first:]
    logsumexp = torch.logsumexp(logits, dim=-1)
    logp = torch.gather(logits, -1, targets[..., None]).squeeze(-1) - logsumexp
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)
            entropy = logsumexp - (probs * logits).sum(dim=-1)
    pad = torch.zeros((logp.shape[0], first), dtype=logp.dtype, device=logp.device)
    logp = torch.cat([pad, logp], dim=1) * completion_mask
    if entropy is not None:
        entropy = torch.cat([pad, entropy], dim=1) * completion_mask
    return logp, entropy
