"""rlvr reference trainers. Rewards come only from ``sandbox``; evaluation only from ``harness``.

Two families in two rooms, over what both share: ``policy_gradient/`` (GRPO, Dr. GRPO, DAPO, SRPO),
``populations/`` (RandOpt, CoRP) and ``runtime/`` (distribution, precision, checkpoints, the log)."""

from __future__ import annotations

import importlib
from types import ModuleType

#: the readable module (the algorithm's card) that ``rlvr train NAME`` runs
ALGORITHM_MODULES = {
    "grpo": "rlvr.trainers.policy_gradient.grpo",
    "drgrpo": "rlvr.trainers.policy_gradient.drgrpo",
    "dapo": "rlvr.trainers.policy_gradient.dapo",
    "srpo": "rlvr.trainers.policy_gradient.srpo",
    "randopt": "rlvr.trainers.populations.randopt",
    "corp": "rlvr.trainers.populations.corp",
}


def algorithm_card(name: str) -> ModuleType:
    """The module of algorithm ``name`` (a key of ``ALGORITHM_MODULES``)."""
    return importlib.import_module(ALGORITHM_MODULES[name])
