"""The policy losses, the k3 KL term, truncated importance sampling and the loss-aggregation
modes, named explicitly.

Per token (maximised objective, DeepSeekMath eq. 3; DAPO eq. 8 adds the asymmetric clip):

    ρ_t = exp(log π_θ(o_t) − log π_old(o_t))
    ℓ_t = −min(ρ_t Â, clip(ρ_t, 1 − ε_low, 1 + ε_high) Â)          (loss to minimise)
    KL_t = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1       (k3, DeepSeekMath eq. 4)

``policy_loss`` chooses ℓ (an entry of the table ``POLICY_LOSSES``; formulas in each function):
``ppo_clip`` (above; with ``clip_ratio_c`` = c the dual clip of Ye et al. 2020 as verl has it:
ℓ_t = min(ℓ_t, −c·Â) where Â < 0), ``gspo`` / ``gspo_token`` (one ratio per sequence, its log
capped at 10 as verl caps it) and ``cispo`` (a clipped, stop-gradient weight on log π). ε_low /
ε_high are the clip range of whichever is chosen.

Aggregation of ℓ over a (mini)batch of S responses with masks m (|o_s| = Σ_t m_{s,t}):

* ``seq_mean_token_mean``     (1/S) Σ_s (1/|o_s|) Σ_t ℓ_{s,t} m_{s,t}    GRPO (DeepSeekMath eq. 3)
* ``token_mean``              (1/Σ_s |o_s|) Σ_s Σ_t ℓ_{s,t} m_{s,t}      DAPO eq. 8 (token-level)
* ``seq_mean_token_sum_norm`` (1/S) Σ_s (1/C) Σ_t ℓ_{s,t} m_{s,t}        Dr. GRPO (App. A eq. 7 with
  oat's constant normaliser C = the generation budget, e.g. 3000)

Each is one entry of ``AGGREGATIONS`` (``rlvr.trainers.policy_gradient.rules.Aggregation``: its weights, the
distributed denominator, the plan's and the help's words). Each mode is a fixed weight per token
(``token_weights``) computed once over the whole
minibatch, and every policy loss is a function of a sequence's own tokens, so a minibatch split
into micro-batches for gradient accumulation gives exactly the same gradient as one pass.
"""

from __future__ import annotations

import torch
from rlvr.trainers.policy_gradient.rules import Aggregation, PolicyLoss, rule


def _seq_mean_token_mean(mask: torch.Tensor, constant: float | None) -> torch.Tensor:
    return mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0) / mask.shape[0]


def _token_mean(mask: torch.Tensor, constant: float | None) -> torch.Tensor:
    return mask / mask.sum().clamp(min=1.0)


def _seq_mean_token_sum_norm(mask: torch.Tensor, constant: float | None) -> torch.Tensor:
    if not constant or constant <= 0:
        raise ValueError("seq_mean_token_sum_norm needs a positive constant normaliser (the generation budget)")
    return mask / (constant * mask.shape[0])


#: every loss aggregation, declared once (``rlvr.trainers.policy_gradient.rules.Aggregation``): a new one is a new entry
AGGREGATIONS: dict[str, Aggregation] = {
    a.name: a
    for a in (
        Aggregation(
            "seq_mean_token_mean",
            _seq_mean_token_mean,
            "rows",
            "GRPO",
            lambda size, max_tokens, constant: (
                f"each response's length |o_i|, then the {size} responses of the mini-batch"
            ),
            "DeepSeekMath eq. 3 (GRPO)",
        ),
        Aggregation(
            "token_mean",
            _token_mean,
            "tokens",
            "DAPO",
            lambda size, max_tokens, constant: (
                f"the mini-batch's completion tokens Σ|o_i| (varies; at most {size} x "
                f"{max_tokens} = {size * max_tokens:,})"
            ),
            "DAPO eq. 8 (token-level)",
        ),
        Aggregation(
            "seq_mean_token_sum_norm",
            _seq_mean_token_sum_norm,
            "rows",
            "Dr. GRPO: token sums over a constant",
            lambda size, max_tokens, constant: (
                f"the constant C = {constant:g} times the {size} responses of the mini-batch"
            ),
            "Dr. GRPO App. A eq. 7 with oat's constant normaliser",
            constant=True,
        ),
    )
}


def token_weights(mask: torch.Tensor, mode: str, constant: float | None = None) -> torch.Tensor:
    """Weight of every token in the aggregated loss (zero where ``mask`` is zero)."""
    return rule(AGGREGATIONS, mode, "loss aggregation").weights(mask.float(), constant)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, constant: float | None = None) -> torch.Tensor:
    return (values * token_weights(mask, mode, constant)).sum()


def ppo_clip_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    clip_ratio_c: float | None = None,
) -> dict[str, torch.Tensor]:
    """Per-token clipped-surrogate loss and clip indicators; ``advantages`` is per sequence (S,)
    or per token (S, T). ``clip_low`` marks tokens whose ratio is clipped at 1 − ε_low with a
    negative advantage, ``clip_high`` at 1 + ε_high with a positive one (where clipping bites).

    ``clip_ratio_c`` (dual-clip PPO, Ye et al. 2020, arXiv 1912.09729; verl's ``clip_ratio_c``,
    10 in its DAPO recipe): with Â < 0 the loss is capped at −c·Â, so a token whose ratio ran far
    above 1 stops pushing (no gradient past r = c). None: off (verl applies 3 by default)."""
    ratio = torch.exp(logp - old_logp)
    advantages = _per_token(advantages)
    terms = clipped_surrogate(ratio, advantages, eps_low, eps_high)
    if clip_ratio_c is not None:
        capped = torch.minimum(terms["loss"], -clip_ratio_c * advantages)
        terms["loss"] = torch.where(advantages < 0, capped, terms["loss"])
    return {**terms, "ratio": ratio}


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> dict[str, torch.Tensor]:
    """−min(r·Â, clip(r, 1−ε_low, 1+ε_high)·Â) and where the clip bites (``clip_low``: r below
    1−ε_low with Â < 0, ``clip_high``: above 1+ε_high with Â > 0); ``ratio`` and ``advantages``
    broadcast: one form for PPO's token ratio and GSPO's sequence ratio."""
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    return {
        "loss": -torch.minimum(ratio * advantages, clipped),
        "clip_low": ((ratio < 1.0 - eps_low) & (advantages < 0)).float(),
        "clip_high": ((ratio > 1.0 + eps_high) & (advantages > 0)).float(),
    }


def _per_token(advantages: torch.Tensor) -> torch.Tensor:
    return advantages[:, None] if advantages.dim() == 1 else advantages


#: GSPO's log sequence ratio is capped here (verl's ``compute_policy_loss_gspo``, "for numerical
#: stability"): above it the value stays e^10 and the gradient is zero (TRL does not cap)
GSPO_LOG_RATIO_CAP = 10.0


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log s_i = (1/|o_i|) Σ_t m_t (log π_θ(o_t) − log π_old(o_t)), one per sequence (S,): GSPO's
    length-normalised sequence ratio in log space (an empty sequence has s = 1), capped at
    ``GSPO_LOG_RATIO_CAP``."""
    mask = mask.float()
    log_ratio = ((logp - old_logp) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return log_ratio.clamp(max=GSPO_LOG_RATIO_CAP)


def gspo_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, torch.Tensor]:
    """GSPO (Zheng et al. 2025, arXiv 2507.18071, Sec. 4.1: J_GSPO eq. 5, s_i eq. 7):

        s_i = exp((1/|o_i|) Σ_t log π_θ(o_t)/π_old(o_t)),  ℓ_i = −min(s_i Â_i, clip(s_i, 1−ε_low, 1+ε_high) Â_i)

    clipped per sequence. ℓ_i is written on every token of sequence i, so the token weights of
    any aggregation apply; with ``seq_mean_token_mean`` the loss is the paper's (1/G) Σ_i ℓ_i.
    ``advantages`` must be one per sequence (S,). A clipped sequence marks all its tokens."""
    if advantages.dim() != 1:
        raise ValueError("gspo takes one advantage per sequence; gspo_token takes per-token advantages")
    ratio = torch.exp(sequence_log_ratio(logp, old_logp, mask))
    terms = clipped_surrogate(ratio, advantages, eps_low, eps_high)
    return {key: value[:, None].expand_as(logp) for key, value in terms.items()}


def gspo_token_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, torch.Tensor]:
    """GSPO-token (same paper, Sec. 4.3, s_{i,t} eq. 14): s_{i,t} = sg[s_i] · π_θ(o_t)/sg[π_θ(o_t)],
    ℓ_t = −min(s_{i,t} Â_{i,t}, clip(s_{i,t}, 1−ε_low, 1+ε_high) Â_{i,t}). s_{i,t} has the value of
    s_i and the gradient of token t's own log-probability, so per-token advantages are possible.
    With one advantage per sequence it equals ``gspo`` in value and gradient under every
    aggregation (each weighs a sequence's tokens alike) as long as every token of a sequence
    carries the same weight. Per-token weights break it: with ``tis_cap`` the value is the same,
    but gspo spreads token t's weight over the whole sequence's log-probs (through s_i) while
    gspo_token keeps it on token t's own (verl's ``gspo`` is this form). Above the cap on log s_i
    (``GSPO_LOG_RATIO_CAP``, as verl caps s_{i,t}) the gradient is zero."""
    log_ratio = sequence_log_ratio(logp, old_logp, mask)
    capped = (log_ratio >= GSPO_LOG_RATIO_CAP)[:, None]
    own = torch.where(capped, torch.zeros_like(logp), logp - logp.detach())
    ratio = torch.exp(log_ratio.detach()[:, None] + own)
    return clipped_surrogate(ratio, _per_token(advantages), eps_low, eps_high)


def cispo_terms(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> dict[str, torch.Tensor]:
    """CISPO (MiniMax-M1, arXiv 2506.13585, Sec. 3.1: J_CISPO eq. 4, the clipped weight eq. 5):

        ℓ_t = −sg(clip(ρ_t, 1−ε_low, 1+ε_high)) · Â · log π_θ(o_t)

    The weight is clipped, not the update: every token keeps the gradient −clip(ρ_t)·Â on its
    log-probability, also where ρ_t is out of range (PPO's clip zeroes it there). The paper sets
    no lower bound (``eps_low: 1``). ``clip_low`` / ``clip_high`` mark tokens whose weight was
    clipped, whatever the advantage's sign (the weight is capped either way)."""
    ratio = torch.exp(logp - old_logp)
    weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high).detach()
    return {
        "loss": -weight * _per_token(advantages) * logp,
        "clip_low": (ratio < 1.0 - eps_low).float(),
        "clip_high": (ratio > 1.0 + eps_high).float(),
    }


#: every policy loss, declared once (``rlvr.trainers.policy_gradient.rules.PolicyLoss``): a new one is a new entry
POLICY_LOSSES: dict[str, PolicyLoss] = {
    p.name: p
    for p in (
        PolicyLoss(
            "ppo_clip",
            lambda logp, old, adv, mask, lo, hi, c: ppo_clip_terms(logp, old, adv, lo, hi, c),
            "token ratio, PPO/GRPO",
            "DeepSeekMath eq. 3, DAPO eq. 8; dual clip: Ye et al. 2020, arXiv 1912.09729",
        ),
        PolicyLoss(
            "gspo",
            lambda logp, old, adv, mask, lo, hi, c: gspo_terms(logp, old, adv, mask, lo, hi),
            "sequence ratio",
            "GSPO, arXiv 2507.18071, eq. 5 and 7",
        ),
        PolicyLoss(
            "gspo_token",
            lambda logp, old, adv, mask, lo, hi, c: gspo_token_terms(logp, old, adv, mask, lo, hi),
            "sequence ratio, each token's own gradient",
            "GSPO, arXiv 2507.18071, eq. 14",
        ),
        PolicyLoss(
            "cispo",
            lambda logp, old, adv, mask, lo, hi, c: cispo_terms(logp, old, adv, lo, hi),
            "clipped stop-gradient weight on log pi",
            "MiniMax-M1, arXiv 2506.13585, eq. 4 and 5",
        ),
    )
}


def policy_loss_terms(
    name: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    clip_ratio_c: float | None = None,
) -> dict[str, torch.Tensor]:
    """Per-token loss ``loss`` and clip indicators ``clip_low`` / ``clip_high`` (S, T), zero
    outside ``mask``, of the policy loss ``name`` (one of ``POLICY_LOSSES``; ``clip_ratio_c``:
    ``ppo_clip``'s dual clip). Each depends only on a sequence's own tokens: micro-batches of
    whole sequences cannot change it."""
    terms = rule(POLICY_LOSSES, name, "policy loss").terms(
        logp, old_logp, advantages, mask, eps_low, eps_high, clip_ratio_c
    )
    mask = mask.float()
    return {key: terms[key] * mask for key in ("loss", "clip_low", "clip_high")}


def tis_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework secretly brings
    you off-policy RL training"): w_t = min(π_learner_old(o_t) / π_sampler(o_t), C), a constant
    (no gradient) multiplying token t's policy loss. It corrects for a sampler whose numerics
    differ from the learner's (bf16 kernels, a quantised engine); the cap bounds the variance."""
    return torch.clamp(torch.exp(old_logp - sampler_logp), max=cap).detach()


#: The sampler-learner gap, logged per step with ``backend: vllm`` (null with ``hf``)
MISMATCH_METRICS = ("mismatch_logp_abs_mean", "mismatch_ratio_max", "mismatch_kl", "tis_capped_fraction")


@torch.no_grad()
def sampler_mismatch(
    old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, tis_cap: float | None = None
) -> dict[str, float | None]:
    """The gap between the sampler's log-probs of the sampled tokens and the learner's (before
    the update), over the trained tokens (``mask`` > 0). With d = log π_learner − log π_sampler:
    ``mismatch_logp_abs_mean`` mean |d|, ``mismatch_ratio_max`` max e^d, ``tis_capped_fraction``
    the share with e^d > ``tis_cap`` (null without a cap), and ``mismatch_kl`` mean(e^d − d − 1):
    the tokens were drawn from the sampler p and e^d = q/p with q the learner, and
    E_p[q/p − 1 − log(q/p)] = E_p[log p/q], so this is Schulman's k3 estimate of
    KL(π_sampler ‖ π_learner) (``k3_kl`` with the sampler as the sampling policy)."""
    return mismatch_metrics(mismatch_sums(old_logp, sampler_logp, mask, tis_cap), tis_cap)


def mismatch_sums(
    old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, tis_cap: float | None = None
) -> dict[str, float]:
    """Token count, Σ|d|, Σ k3, capped count (sums) and max e^d (a max) over the trained tokens:
    what ranks add up (``max`` for ``ratio_max``) before ``mismatch_metrics`` divides."""
    trained = mask > 0
    sampled, learner = sampler_logp[trained].double(), old_logp[trained].double()
    d = learner - sampled
    return {
        "tokens": float(trained.sum()),
        "abs": float(d.abs().sum()),
        "kl": float(k3_kl(sampled, learner).sum()),
        "capped": float((d.exp() > tis_cap).sum()) if tis_cap is not None else 0.0,
        "ratio_max": float(d.exp().max()) if d.numel() else 0.0,
    }


def mismatch_metrics(sums: dict[str, float], tis_cap: float | None) -> dict[str, float | None]:
    """``MISMATCH_METRICS`` from (possibly rank-summed) ``mismatch_sums``; null without tokens."""
    n = sums["tokens"]
    if not n:
        return dict.fromkeys(MISMATCH_METRICS)
    return {
        "mismatch_logp_abs_mean": sums["abs"] / n,
        "mismatch_ratio_max": sums["ratio_max"],
        "mismatch_kl": sums["kl"] / n,
        "tis_capped_fraction": None if tis_cap is None else sums["capped"] / n,
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
    temperature: float = 1.0,
    chunk: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(token) for every position (aligned with ``input_ids``; only ``completion_mask``
    positions matter, the others are 0) and optionally the policy entropy there, of the logits
    divided by ``temperature``. The vocabulary projection runs only from the first completion
    column on (``logits_to_keep``): prompt positions would cost a full-vocabulary softmax each and
    never enter the loss. ``chunk`` > 0 projects that many tokens at a time under checkpointing
    (``rlvr.trainers.policy_gradient.chunked_logprobs``: no full-vocabulary logits kept; the same gradient).

    ``temperature``: the rollouts' sampling temperature T. The samples come from
    softmax(logits / T), so that is the policy whose ratios, clip, TIS weights and KL the loss
    needs (oat's ``get_batch_logps`` and verl's actor divide the logits the same way); at T = 1
    it is the model's own distribution."""
    from rlvr.trainers.policy_gradient.chunked_logprobs import HeadJob, head_job

    length = input_ids.shape[1]
    columns = torch.nonzero(completion_mask.any(dim=0)).flatten()
    first = max(1, int(columns[0]) if len(columns) else length - 1)
    positions = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    job = HeadJob(input_ids[:, first:], chunk, temperature, with_entropy)
    with head_job(model, job):  # the model returns (S, T, 2): log π and entropy per position
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            logits_to_keep=length - first + 1,
        )
    pad = torch.zeros((input_ids.shape[0], first), dtype=out.logits.dtype, device=out.logits.device)
    logp = torch.cat([pad, out.logits[..., 0]], dim=1) * completion_mask
    entropy = torch.cat([pad, out.logits[..., 1].detach()], dim=1) * completion_mask if with_entropy else None
    return logp, entropy
