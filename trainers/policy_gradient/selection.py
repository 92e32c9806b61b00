"""Which prompts train each step: interchangeable prompt-selection strategies.

* ``uniform`` — the next B prompts of a seeded shuffle of the pool (GRPO, Dr. GRPO): every
  group trains, degenerate ones contribute zero gradient.
* ``dynamic`` — DAPO dynamic sampling (DAPO Sec. 3.2, Algorithm 1): over-sample generation
  batches, drop groups whose accuracy is exactly 0 or 1, keep filling until B informative groups
  are collected (surplus trimmed), at most ``max_gen_batches`` generation batches per step.
  When the cap comes first, ``dynamic_cap`` decides: ``train`` (the default) trains on the
  informative groups found, fewer than B, and logs ``selection_cap_hit``; ``stop`` ends the run
  with a one-line error, as verl's DAPO recipe raises (the DAPO ``paper`` preset).
* ``history`` — SRPO history resampling (SRPO Sec. on HR): no filtering inside an epoch; every
  rollout's correctness is recorded, and at the epoch boundary prompts whose rollouts were all
  correct leave the pool for the rest of the stage, while mixed and all-wrong prompts stay. A
  new curriculum stage starts a new selection over its whole pool, so they return there (why:
  ``trainers/policy_gradient/srpo.py``).

All keep their position as plain data (``state_dict``), so a resumed run continues exactly.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError

Rollout = Callable[[Sequence[Problem], int], list]
SELECTIONS = ("uniform", "dynamic", "history")
DYNAMIC_CAPS = ("train", "stop")


class PromptStream:
    """Endless seeded shuffles of a pool; epoch e uses permutation seed (seed, e)."""

    def __init__(self, pool: Sequence[Problem], seed: int):
        if not pool:
            raise ValueError("the training pool is empty")
        self.pool = list(pool)
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        order = list(range(len(self.pool)))
        random.Random(f"{self.seed}:{self.epoch}").shuffle(order)
        return order

    def take(self, count: int, stop_at_epoch_end: bool = False) -> list[Problem]:
        out = []
        while len(out) < count:
            if self.position >= len(self.pool):
                if stop_at_epoch_end and out:
                    break
                self.epoch += 1
                self.position = 0
                self._order = self._permutation()
            out.append(self.pool[self._order[self.position]])
            self.position += 1
        return out

    @property
    def epoch_finished(self) -> bool:
        return self.position >= len(self.pool)

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "epoch": self.epoch, "position": self.position, "ids": [p.id for p in self.pool]}

    def load_state_dict(self, state: dict[str, Any], lookup: dict[str, Problem]) -> None:
        self.pool = [lookup[i] for i in state["ids"]]
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
        self._order = self._permutation()


class UniformSelection:
    name = "uniform"

    def __init__(self, pool: Sequence[Problem], seed: int, **_: Any):
        self.stream = PromptStream(pool, seed)

    def next_groups(self, rollout: Rollout, prompts: int, step: int) -> tuple[list, dict[str, Any]]:
        groups = rollout(self.stream.take(prompts), step)
        return groups, {"generation_batches": 1, "prompts_generated": len(groups)}

    def state_dict(self) -> dict[str, Any]:
        return {"stream": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any], lookup: dict[str, Problem]) -> None:
        self.stream.load_state_dict(state["stream"], lookup)


class DynamicSampling(UniformSelection):
    name = "dynamic"

    def __init__(
        self,
        pool: Sequence[Problem],
        seed: int,
        gen_prompts: int | None = None,
        max_gen_batches: int = 10,
        dynamic_cap: str = "train",
        **_: Any,
    ):
        super().__init__(pool, seed)
        self.gen_prompts = gen_prompts
        self.max_gen_batches = max_gen_batches
        self.dynamic_cap = dynamic_cap

    def next_groups(self, rollout: Rollout, prompts: int, step: int) -> tuple[list, dict[str, Any]]:
        kept: list = []
        batches = generated = 0
        while len(kept) < prompts and (self.max_gen_batches <= 0 or batches < self.max_gen_batches):
            groups = rollout(self.stream.take(self.gen_prompts or prompts), step * 1000 + batches)
            batches += 1
            generated += len(groups)
            kept += [g for g in groups if 0.0 < g.accuracy < 1.0]
        stats = {"generation_batches": batches, "prompts_generated": generated, "cap_hit": len(kept) < prompts}
        if stats["cap_hit"] and self.dynamic_cap == "stop":
            raise UserError(
                f"step {step}: dynamic sampling found {len(kept)} of {prompts} groups with mixed rewards in {batches} "
                "generation batches (max_gen_batches); dynamic_cap: stop ends the run here, as verl's DAPO recipe "
                "does: raise max_gen_batches, or set dynamic_cap: train to train on the groups found"
            )
        return kept[:prompts], stats


class HistoryResampling(UniformSelection):
    name = "history"

    def __init__(self, pool: Sequence[Problem], seed: int, **_: Any):
        super().__init__(pool, seed)
        self.base_seed = seed
        self.epochs = 0
        self.record: dict[str, list[bool]] = {}
        self.dropped: list[str] = []

    def next_groups(self, rollout: Rollout, prompts: int, step: int) -> tuple[list, dict[str, Any]]:
        batch = self.stream.take(prompts, stop_at_epoch_end=True)
        groups = rollout(batch, step)
        for g in groups:
            self.record.setdefault(g.problem.id, []).extend(g.correct)
        stats = {"generation_batches": 1, "prompts_generated": len(groups), "pool_size": len(self.stream.pool)}
        if self.stream.epoch_finished:
            stats["epoch_dropped"] = self.end_epoch()
        return groups, stats

    def end_epoch(self) -> int:
        """SRPO's boundary rule: drop prompts whose every recorded rollout was correct."""
        solved = {pid for pid, outcomes in self.record.items() if outcomes and all(outcomes)}
        survivors = [p for p in self.stream.pool if p.id not in solved]
        self.dropped += sorted(solved)
        self.record = {}
        self.epochs += 1
        if survivors:  # (if every prompt is solved the pool stays as it was)
            self.stream = PromptStream(survivors, self.base_seed + 7919 * self.epochs)
        return len(solved)

    def state_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream.state_dict(),
            "base_seed": self.base_seed,
            "epochs": self.epochs,
            "record": self.record,
            "dropped": self.dropped,
        }

    def load_state_dict(self, state: dict[str, Any], lookup: dict[str, Problem]) -> None:
        self.base_seed = state["base_seed"]
        self.epochs = state["epochs"]
        self.stream.load_state_dict(state["stream"], lookup)
        self.record = {k: list(v) for k, v in state["record"].items()}
        self.dropped = list(state["dropped"])


def stage_seed(run_seed: int, stage_index: int) -> int:
    """The selection seed of a curriculum stage: each stage shuffles its own pool its own way."""
    return run_seed + 1000 * stage_index


def make_selection(name: str, pool: Sequence[Problem], seed: int, **options: Any):
    """A fresh selection over ``pool``; ``load_state_dict`` then restores a saved one, seed included."""
    classes = {"uniform": UniformSelection, "dynamic": DynamicSampling, "history": HistoryResampling}
    if name not in classes:
        raise ValueError(f"unknown selection {name!r}; choose from {SELECTIONS}")
    return classes[name](pool, seed, **options)
