"""GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300, Sec. 4.1).

Maximise, for G outputs o_1..o_G of question q sampled from π_old (eq. 3):

    J(θ) = E[ (1/G) Σ_i (1/|o_i|) Σ_t { min(ρ_{i,t} Â_i, clip(ρ_{i,t}, 1−ε, 1+ε) Â_i) − β KL_t } ]
    Â_i  = (r_i − mean(r)) / std(r)                  outcome supervision, every token of o_i
    KL_t = π_ref/π_θ − log(π_ref/π_θ) − 1             (k3 estimator, eq. 4)

Here: ``advantage: grpo`` (Bessel std, ε = 1e-8 as in oat), ``loss_agg: seq_mean_token_mean``
(the 1/|o_i| then 1/G of eq. 3), β = 0.04 and ε = 0.2 (the paper does not state ε; 0.2 is the
common value). Published: lr 1e-6, G = 64, max length 1024, batch 1024, one update per
exploration stage (``presets/grpo/paper.yaml``).
"""

from __future__ import annotations

from pathlib import Path

DEFINING = {
    "temperature": 1.0,  # the policy itself: the loss evaluates softmax(logits / temperature)
    "advantage": "grpo",
    "loss_agg": "seq_mean_token_mean",
    "selection": "uniform",
    "overlong": "none",
    "beta": 0.04,
    "eps_low": 0.2,
    "eps_high": 0.2,
    "policy_loss": "ppo_clip",
}


def train(cfg, resume: bool = False, progress: bool = True) -> Path:
    from rlvr.trainers.policy_gradient.loop import run_training

    return run_training(cfg, resume, progress)
