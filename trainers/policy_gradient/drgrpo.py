"""Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783).

GRPO without its two biased normalisers (Sec. 3.1-3.2, Fig. 1, App. A eq. 7):

    J(θ) = E[ (1/G) Σ_i Σ_{t≤|o_i|} min(ρ_{i,t} Ã_i, clip(ρ_{i,t}, 1−ε, 1+ε) Ã_i) ]
    Ã_i  = R(q, o_i) − mean_j R(q, o_j)          no std division (question-level bias)

and no 1/|o_i| (response-level length bias): the token sum is divided by a constant C, the
generation budget (oat's ``masked_sum(..., constant_normalizer=generate_max_length)``, C = 3000
in the paper's runs). Here: ``advantage: drgrpo``, ``loss_agg: seq_mean_token_sum_norm`` with
``loss_constant`` = ``max_tokens`` unless set, β = 0, ε = 0.2, and responses cut by the budget
get reward 0 but stay in the loss (``overlong: zero``, oat's default). Published (Table 6):
AdamW (0.9, 0.95), lr 1e-6 constant, grad clip 1.0, G = 8, 128 prompts per step, temperature 1,
max 3000 tokens, one PPO epoch (``presets/drgrpo/paper.yaml``).

Rewards: oat rewards only the last ``\\boxed{}`` under the Qwen-Math and no templates and only
the exact "</think> <answer> ... </answer>" format under R1 (docs/algorithms.md §2.6), stricter than
the default ``math`` policy, which also credits "the answer is X" and bare answers. The
``paper`` presets set ``math_policy`` to the original's (``ORIGINAL_REWARDS``): the policies
``boxed_only`` / ``r1_format`` of the one rlvr verifier, so rewards and evaluation grades agree;
answer equivalence stays the verifier's (oat's mathd / sympy / Math-Verify cascade is not
reproduced). A run on one of these templates under another policy is logged as a variant.
"""

from __future__ import annotations

from pathlib import Path

DEFINING = {
    "temperature": 1.0,  # the policy itself: the loss evaluates softmax(logits / temperature)
    "advantage": "drgrpo",
    "loss_agg": "seq_mean_token_sum_norm",
    "selection": "uniform",
    "overlong": "zero",
    "beta": 0.0,
    "eps_low": 0.2,
    "eps_high": 0.2,
    "policy_loss": "ppo_clip",
}


#: template -> the math policy that reproduces the original reward under it (oat, understand-r1-zero)
ORIGINAL_REWARDS = {"qwen_math": "boxed_only", "no_template": "boxed_only", "r1": "r1_format"}


def train(cfg, resume: bool = False, progress: bool = True) -> Path:
    from rlvr.trainers.policy_gradient.loop import run_training

    return run_training(cfg, resume, progress)
