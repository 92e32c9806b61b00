"""CoRP Stage 1: constructive collapse (docs/algorithms.md §5.4), then ours, the hold-out gate.

The two-pass merge of the Stage-0 population for every (q, β) of the grid, each scaled by every
s, is scored on the probe; the first best (strict >) wins, and θ₁ = θ₀ + s·m. A top-1 reference
(the single best candidate, its own s chosen on the probe) is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any, Sequence

import numpy as np
from rlvr.harness.benchmarks.problems import Problem
from rlvr.trainers.populations.config import ESConfig
from rlvr.trainers.populations.corp_ops import HoldoutDecision, KeySpace, Merge, holdout_gate, two_pass_merge
from rlvr.trainers.populations.loop import ESLog, progress
from rlvr.trainers.populations.scoring import PopulationScorer


@dataclass(frozen=True)
class Stage1Choice:
    """The winning grid point: its merge, and the update s·m it proposes (amplitude space)."""

    q: float
    beta: float
    s: float
    probe_accuracy: float
    merge: Merge
    amplitudes: np.ndarray

    @property
    def eta(self) -> float:
        """η* = s·‖m‖: Stage 2's first reference step."""
        return self.s * self.merge.cloud.norm


@dataclass(frozen=True)
class Top1Reference:
    """The single best Stage-0 candidate at the s the probe prefers (reported, never shipped)."""

    s: float
    probe_accuracy: float
    amplitudes: np.ndarray


@dataclass(frozen=True)
class Stage1Result:
    choice: Stage1Choice
    top1: Top1Reference


@dataclass(frozen=True)
class Stage1Gate:
    """θ₁ after our hold-out gate: the amplitudes Stage 2 starts from, the decision (None when
    Stage 1 is not gated) and the kept model's hold-out correctness (None when not scored)."""

    amplitudes: np.ndarray
    decision: HoldoutDecision | None
    holdout_correct: np.ndarray | None

    @property
    def kept(self) -> bool:
        return self.decision is None or self.decision.accepted


@dataclass(frozen=True)
class Stage1Outcome:
    """Stage 1 as the log, the report and ``spec.json`` record it."""

    choice: Stage1Choice
    base_probe_accuracy: float
    gate: Stage1Gate

    def record(self, with_step_norm: bool = False) -> dict[str, Any]:
        """The report's ``stage1``; the log's ``stage1`` line adds the step's norm."""
        c = self.choice
        out: dict[str, Any] = {"q": c.q, "beta": c.beta, "s": c.s, "probe_accuracy": c.probe_accuracy}
        out["base_probe_accuracy"] = self.base_probe_accuracy
        if with_step_norm:
            out["step_norm"] = float(f"{float(np.linalg.norm(c.amplitudes)):.6g}")
        out["holdout_gate"] = None if self.gate.decision is None else self.gate.decision.record()
        out["kept"] = self.gate.kept
        return {**out, **c.merge.cloud.diagnostics()}

    def spec_record(self) -> dict[str, Any]:
        """What ``spec.json`` keeps of Stage 1."""
        return {"q": self.choice.q, "beta": self.choice.beta, "s": self.choice.s, "kept": self.gate.kept}

    def summary(self) -> str:
        c, d = self.choice, self.gate.decision
        line = (
            f"stage 1: q={c.q} beta={c.beta} s={c.s} probe {c.probe_accuracy:.3f} (base {self.base_probe_accuracy:.3f})"
        )
        if d is None:
            return line
        return (
            f"{line}; hold-out gate: {d.fixes} fixed, {d.regressions} broken of {d.n}, LCB {d.lcb:+.4f} -> "
            f"{'kept' if self.gate.kept else 'rejected'}"
        )


def stage1(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    A: np.ndarray,
    rewards: np.ndarray,
    probe: Sequence[Problem],
    log: ESLog,
    show: bool,
) -> Stage1Result:
    """Grid over (q, β, s) on the probe split (§5.4 step 8); the winner and the top-1 reference."""
    best: Stage1Choice | None = None
    for q, beta in product(cfg.q_grid, cfg.beta_grid):
        merge = two_pass_merge(A, rewards, q, beta, cfg.rank)
        for s in cfg.s_grid:
            accuracy = scorer.score(space.components(s * merge.cloud.mean), probe).accuracy
            log.write(
                "stage1_grid",
                stage="stage1",
                q=q,
                beta=beta,
                s=s,
                probe_accuracy=accuracy,
                elite=len(merge.elite),
                **merge.cloud.diagnostics(),
            )
            if best is None or accuracy > best.probe_accuracy:
                best = Stage1Choice(q, beta, s, accuracy, merge, s * merge.cloud.mean)
        assert best is not None
        progress(f"stage 1: q={q} beta={beta} best probe {best.probe_accuracy:.3f}", show)
    assert best is not None
    top1 = top1_reference(cfg, scorer, space, A[int(np.argmax(rewards))], probe)
    log.write("stage1_top1_reference", stage="stage1", s=top1.s, probe_accuracy=top1.probe_accuracy)
    return Stage1Result(best, top1)


def top1_reference(
    cfg: ESConfig, scorer: PopulationScorer, space: KeySpace, top: np.ndarray, probe: Sequence[Problem]
) -> Top1Reference:
    """The best single candidate at each s of the grid on the probe; the first best wins."""
    best: Top1Reference | None = None
    for s in cfg.s_grid:
        accuracy = scorer.score(space.components(s * top), probe).accuracy
        if best is None or accuracy > best.probe_accuracy:
            best = Top1Reference(s, accuracy, s * top)
    assert best is not None
    return best


def stage1_holdout_gate(
    cfg: ESConfig, scorer: PopulationScorer, space: KeySpace, amplitudes: np.ndarray, holdout: Sequence[Problem]
) -> Stage1Gate:
    """θ₁ = θ₀ + s·m replaces θ₀ only if it beats θ₀ on the hold-out split (paired LCB > 0);
    else Stage 2 starts from θ₀."""
    if 1 not in cfg.holdout_gate_stages:
        return Stage1Gate(amplitudes, None, None)
    base = scorer.score([], holdout)
    merged = scorer.score(space.components(space.pad(amplitudes)), holdout)
    decision = holdout_gate(base.correct, merged.correct, cfg.holdout_z)
    if decision.accepted:
        return Stage1Gate(amplitudes, decision, merged.correct)
    return Stage1Gate(np.zeros(len(space)), decision, base.correct)
