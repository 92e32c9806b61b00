"""Training stages and the rule that switches between them (SRPO's two-stage schedule).

SRPO trains on math only first ("eliciting reasoning"), then adds code ("skill integration");
the paper gives no switch criterion, so both candidate rules are offered and named in the
config (SRPO Sec. on the two-stage schedule; our notes list a fixed step count and a reward
plateau as the plausible triggers):

* ``until_step: N`` — leave the stage after N steps in it;
* ``until_generations: N`` — leave it once N samples were generated in it (a rollout budget,
  for comparing strategies that spend generations differently);
* ``plateau_window: W`` (with ``plateau_delta``) — leave when the mean reward of the last W
  readings improved on the W readings before by less than ``plateau_delta``.

What a plateau reads. The trained batch's ``reward_mean`` measures the policy only while the
batch is a fair draw of the stage's data. SRPO's History Resampling removes solved prompts at
every epoch boundary, so the pool left is the harder part and its reward falls by construction,
which fakes a plateau (or a decline) and switched stages early (issue 29, part 6); DAPO dynamic
sampling trains only mixed groups, whose reward hovers near 0.5 whatever the policy does. So a
stage can declare a **probe**: ``probe_size`` prompts drawn once from the stage's own pool, by
the stage's seed (``probe_set``), whose reward — G samples each from the current policy at the
training temperature, the same verifier, policy and reward shaping as ``reward_mean`` — is read
every ``probe_every`` steps after the update; then the plateau compares probe readings, and W
counts readings, not steps. A fixed set also takes prompt-sampling noise out of the comparison:
both windows score the same prompts. Why a separate rollout rather than reusing training groups:
a probe prompt is trained at most once per epoch and leaves the pool once solved, so the training
rollouts cannot give a curve on a fixed set. Cost: ``probe_size`` x G generations every
``probe_every`` steps (``presets/srpo/paper.yaml``: 128 x 32 every 10 steps, 5% of the
256 x 32 per step), logged as ``probe_generations`` and kept out of ``generations`` and the rollout
budgets (like evaluations). The probe prompts stay in the training pool: the probe estimates the
reward on the stage's data as a whole, whatever History Resampling has filtered out. A plateau
without a probe reads ``reward_mean``, which ``TrainConfig.validate`` refuses under the
``history`` and ``dynamic`` selections.

The last stage never ends. Each stage declares its data sources (benchmark names, e.g. the
procedural ``arith_train`` and ``pyfunc_train``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

STAGE_KEYS = (
    "name",
    "sources",
    "until_step",
    "until_generations",
    "plateau_window",
    "plateau_delta",
    "probe_size",
    "probe_every",
)


@dataclass
class Stage:
    name: str
    sources: list[str]
    until_step: int | None = None
    plateau_window: int | None = None
    plateau_delta: float = 0.01
    until_generations: int | None = None
    probe_size: int | None = None
    probe_every: int = 1

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Stage":
        unknown = set(data) - set(STAGE_KEYS)
        if unknown:
            raise ValueError(f"unknown stage key(s) {sorted(unknown)}; use {', '.join(STAGE_KEYS)}")
        sources = data.get("sources") or []
        if isinstance(sources, str):
            sources = [s.strip() for s in sources.split(",") if s.strip()]
        if not sources:
            raise ValueError(f"stage {data.get('name')!r} declares no data sources")
        probe_size, probe_every = data.get("probe_size"), int(data.get("probe_every", 1))
        if (probe_size is not None and int(probe_size) < 1) or probe_every < 1:
            raise ValueError(f"stage {data.get('name')!r}: probe_size and probe_every must be at least 1")
        return cls(
            str(data.get("name", "stage")),
            list(sources),
            data.get("until_step"),
            data.get("plateau_window"),
            float(data.get("plateau_delta", 0.01)),
            data.get("until_generations"),
            None if probe_size is None else int(probe_size),
            probe_every,
        )


def probe_set(pool: Sequence[Any], size: int, seed: int) -> list[Any]:
    """The stage's fixed probe: ``size`` prompts of ``pool`` (all when it is smaller), drawn once
    from the stage seed alone, so a resumed run probes the same prompts."""
    return random.Random(f"{seed}:probe").sample(list(pool), min(size, len(pool)))


@dataclass
class Curriculum:
    stages: list[Stage]
    index: int = 0
    steps_in_stage: int = 0
    generations_in_stage: int = 0
    rewards: list[float] = field(default_factory=list)
    switches: list[dict[str, Any]] = field(default_factory=list)
    probe_rewards: list[float] = field(default_factory=list)

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]

    def record(self, reward: float, generations: int = 0) -> None:
        self.steps_in_stage += 1
        self.generations_in_stage += generations
        self.rewards.append(float(reward))

    def probe_due(self) -> bool:
        """Does the stage read its probe after this step (every ``probe_every`` steps in it)?"""
        stage = self.stage
        return stage.probe_size is not None and self.steps_in_stage % stage.probe_every == 0

    def record_probe(self, reward: float) -> None:
        self.probe_rewards.append(float(reward))

    def should_switch(self) -> str | None:
        """The reason to move to the next stage now, or None."""
        if self.index >= len(self.stages) - 1:
            return None
        stage = self.stage
        if stage.until_step is not None and self.steps_in_stage >= stage.until_step:
            return f"step {self.steps_in_stage} of stage {stage.name!r} reached"
        if stage.until_generations is not None and self.generations_in_stage >= stage.until_generations:
            return f"{self.generations_in_stage} generations in stage {stage.name!r}"
        window = stage.plateau_window
        series, unit = (self.probe_rewards, "probe readings") if stage.probe_size else (self.rewards, "steps")
        if window and len(series) >= 2 * window:
            recent = sum(series[-window:]) / window
            before = sum(series[-2 * window : -window]) / window
            if recent - before < stage.plateau_delta:
                return (
                    f"reward plateau: last {window} {unit} {recent:.3f} vs {before:.3f} before (< "
                    f"+{stage.plateau_delta})"
                )
        return None

    def advance(self, step: int, reason: str) -> Stage:
        self.switches.append(
            {"step": step, "from": self.stage.name, "to": self.stages[self.index + 1].name, "reason": reason}
        )
        self.index += 1
        self.steps_in_stage = 0
        self.generations_in_stage = 0
        self.rewards = []
        self.probe_rewards = []
        return self.stage

    def state_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "steps_in_stage": self.steps_in_stage,
            "generations_in_stage": self.generations_in_stage,
            "rewards": self.rewards,
            "switches": self.switches,
            "probe_rewards": self.probe_rewards,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.index, self.steps_in_stage = state["index"], state["steps_in_stage"]
        self.generations_in_stage = state.get("generations_in_stage", 0)
        self.rewards, self.switches = list(state["rewards"]), list(state["switches"])
        self.probe_rewards = list(state.get("probe_rewards", []))
