"""DAPO (Yu et al. 2025, arXiv 2503.14476).

Token-level clipped objective with decoupled clip range (eq. 8, 10-12):

    J(θ) = E[ (1/Σ_i |o_i|) Σ_i Σ_t min(ρ_{i,t} Â_{i,t}, clip(ρ_{i,t}, 1−ε_low, 1+ε_high) Â_{i,t}) ]
    s.t. 0 < |{o_i : o_i is correct}| < G          (dynamic sampling, Sec. 3.2, Algorithm 1)
    Â_{i,t} = (R_i − mean(R)) / std(R),  R = +1 correct / −1 otherwise (eq. 7, 9)

plus the soft overlong punishment of eq. 13 (a linear penalty over the last L_cache tokens of the
budget, −1 beyond it) and no KL term. Here: ``loss_agg: token_mean``, ε_low = 0.2, ε_high = 0.28
(clip-higher), ``selection: dynamic`` (over-sample generation batches of ``gen_prompts`` prompts,
drop all-0/all-1 groups, refill until ``prompts_per_step`` groups, at most ``max_gen_batches``
batches; when the cap is hit ``dynamic_cap`` decides: ``train`` on what was collected and log
``selection_cap_hit``, or ``stop`` as verl's recipe raises — the ``paper`` preset's choice),
``overlong: soft`` with ``overlong_cache``, rewards (+1, −1). Published: AdamW lr 1e-6
with 20 warm-up steps, 512 prompts x 16 responses, mini-batch 512, max 20,480 tokens with a
4,096-token cache (``presets/dapo/paper.yaml``).
"""

from __future__ import annotations

from pathlib import Path

DEFINING = {
    "temperature": 1.0,  # the policy itself: the loss evaluates softmax(logits / temperature)
    "advantage": "grpo",
    "loss_agg": "token_mean",
    "selection": "dynamic",
    "overlong": "soft",
    "beta": 0.0,
    "eps_low": 0.2,
    "eps_high": 0.28,
    "reward_correct": 1.0,
    "reward_wrong": -1.0,
    "policy_loss": "ppo_clip",
}


def train(cfg, resume: bool = False, progress: bool = True) -> Path:
    from rlvr.trainers.policy_gradient.loop import run_training

    return run_training(cfg, resume, progress)
