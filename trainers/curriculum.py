"""Training stages and the rule that switches between them (SRPO's two-stage schedule).

SRPO trains on math only first ("eliciting reasoning"), then adds code ("skill integration");
the paper gives no switch criterion, so both candidate rules are offered and named in the
config (SRPO Sec. on the two-stage schedule; our notes list a fixed step count and a reward
plateau as the plausible triggers):

* ``until_step: N`` — leave the stage after N steps in it;
* ``until_generations: N`` — leave it once N samples were generated in it (a rollout budget,
  for comparing strategies that spend generations differently);
* ``plateau_window: W`` (with ``plateau_delta``) — leave when the mean reward of the last W
  steps improved on the W steps before by less than ``plateau_delta``.

The last stage never ends. Each stage declares its data sources (benchmark names, e.g. the
procedural ``arith_train`` and ``pyfunc_train``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stage:
    name: str
    sources: list[str]
    until_step: int | None = None
    plateau_window: int | None = None
    plateau_delta: float = 0.01
    until_generations: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Stage":
        unknown = set(data) - {"name", "sources", "until_step", "until_generations", "plateau_window", "plateau_delta"}
        if unknown:
            raise ValueError(
                f"unknown stage key(s) {sorted(unknown)}; use name, sources, until_step, until_generations, "
                "plateau_window, plateau_delta"
            )
        sources = data.get("sources") or []
        if isinstance(sources, str):
            sources = [s.strip() for s in sources.split(",") if s.strip()]
        if not sources:
            raise ValueError(f"stage {data.get('name')!r} declares no data sources")
        return cls(
            str(data.get("name", "stage")),
            list(sources),
            data.get("until_step"),
            data.get("plateau_window"),
            float(data.get("plateau_delta", 0.01)),
            data.get("until_generations"),
        )


@dataclass
class Curriculum:
    stages: list[Stage]
    index: int = 0
    steps_in_stage: int = 0
    generations_in_stage: int = 0
    rewards: list[float] = field(default_factory=list)
    switches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]

    def record(self, reward: float, generations: int = 0) -> None:
        self.steps_in_stage += 1
        self.generations_in_stage += generations
        self.rewards.append(float(reward))

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
        if window and len(self.rewards) >= 2 * window:
            recent = sum(self.rewards[-window:]) / window
            before = sum(self.rewards[-2 * window : -window]) / window
            if recent - before < stage.plateau_delta:
                return (
                    f"reward plateau: last {window} steps {recent:.3f} vs {before:.3f} before (< "
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
        return self.stage

    def state_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "steps_in_stage": self.steps_in_stage,
            "generations_in_stage": self.generations_in_stage,
            "rewards": self.rewards,
            "switches": self.switches,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.index, self.steps_in_stage = state["index"], state["steps_in_stage"]
        self.generations_in_stage = state.get("generations_in_stage", 0)
        self.rewards, self.switches = list(state["rewards"]), list(state["switches"])
