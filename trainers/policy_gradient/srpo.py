"""SRPO (Zhang et al. 2025, Kwaipilot, arXiv 2504.14286): GRPO with a two-stage cross-domain
schedule and History Resampling. No official code exists; what follows is our reading of the
sources our notes could reach (docs/algorithms.md §3), with every inference labelled.

* Objective: the GRPO clipped surrogate with group-normalised advantage (Â = (r − mean)/std,
  std kept **[inferred]**), token-level aggregation (1/Σ|o_i|) **[secondary source]**, no KL
  **[secondary source]**, symmetric ε = 0.2 **[assumed: not stated]**.
* Overlong responses: advantage set to 0 (``overlong: mask`` — they leave the loss)
  **[secondary source]**.
* History Resampling (``selection: history``): during an epoch every rollout's correctness is
  recorded and nothing is filtered; at the epoch boundary prompts whose every rollout was
  correct are removed for good, mixed and all-wrong prompts stay (all-wrong ones may become
  solvable later). Epoch 1 uses the whole stage pool **[inferred]**.
* Two stages: stage 1 math only ("eliciting reasoning"), stage 2 adds code ("skill
  integration"; read as a math + code mixture **[inferred]**). The switch rule is not
  published: a step count (``until_step``) or a reward plateau (``plateau_window``,
  ``plateau_delta``) is configurable per stage. A plateau is read on the stage's fixed probe
  (``probe_size``, ``probe_every``; ``rlvr.trainers.policy_gradient.curriculum``), never on the trained batch: History
  Resampling removes solved prompts, so the pool's reward falls by itself and would switch
  stages early; the config refuses a plateau without a probe under ``selection: history``.
* Prompts dropped in stage 1 **return in stage 2** **[inferred]**: each stage's selection starts
  over on the stage's whole pool (its sources), with an empty history. The sources describe
  removal within training only; stage 2 is a new data mixture, and its code training can undo
  math it has not seen for a while, so every math prompt is rolled out again in stage 2's first
  epoch (G samples each, then HR drops the ones still solved): a bounded cost that lets HR see
  forgetting, where carrying the drops over would make stage 1's verdicts final (the "absorbing
  state" the DPS paper criticises in HR, docs/algorithms.md §3.3).
* Reflection statistics (recheck / hesitation / exploration) are logged every step with our
  reconstruction of the keyword lists (the paper's are unpublished).

Published (secondary): AdamW (0.9, 0.95), lr 1e-6 constant, 256 prompts x 32 rollouts
(``presets/srpo/paper.yaml``); the paper's format and language-mixing rewards are not modelled.
"""

from __future__ import annotations

from pathlib import Path

DEFINING = {
    "temperature": 1.0,  # the policy itself: the loss evaluates softmax(logits / temperature)
    "advantage": "grpo",
    "loss_agg": "token_mean",
    "selection": "history",
    "overlong": "mask",
    "beta": 0.0,
    "eps_low": 0.2,
    "eps_high": 0.2,
    "policy_loss": "ppo_clip",
}


def train(cfg, resume: bool = False, progress: bool = True) -> Path:
    from rlvr.trainers.policy_gradient.loop import run_training

    return run_training(cfg, resume, progress)
