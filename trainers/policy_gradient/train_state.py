"""``TrainState``: what a policy-gradient run carries from one rollout step to the next, in one
object instead of a dozen hand-threaded arguments (``rlvr.trainers.policy_gradient.loop.train_step`` and the
checkpoint writer take it whole; the settings stay in the config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from rlvr.trainers.policy_gradient.curriculum import Curriculum
from rlvr.trainers.runtime.precision import Precision


@dataclass
class TrainState:
    """The live objects of a run: the policy ``model``, the frozen KL ``reference`` (None without one), the
    optimizer, its learning-rate ``scheduler`` and the loss scaler (``precision``), the rollout
    ``worker`` and its ``sampler`` engine, the curriculum with the current stage's prompt
    ``selection`` and ``probe`` prompts, and the samples generated so far."""

    model: torch.nn.Module
    reference: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: Any
    precision: Precision
    tokenizer: Any
    device: Any
    curriculum: Curriculum
    selection: Any
    probe: list
    worker: Any
    sampler: Any
    generations_total: int = 0

    def trainer_fields(self) -> dict[str, Any]:
        """What a checkpoint's ``trainer_state.pt`` keeps besides the step, the RNG and the
        weights: enough for a resume to continue exactly."""
        return {
            "scheduler": self.scheduler.state_dict(),
            "curriculum": self.curriculum.state_dict(),
            "selection": self.selection.state_dict(),
            "generations_total": self.generations_total,
            "precision": self.precision.state_dict(),
        }
