"""CoRP Stage 2: adaptive constructive recentring with the authors' validation gates
(docs/algorithms.md §5.5), then ours, the hold-out gate (``rlvr.trainers.populations.config.ESConfig``).

One round, in the order the steps draw random numbers and spend generations: draw the local
population (``draw_local``), score it on the selection half, update the search distribution
(every round, accepted or not), sweep the (q, β, η) proposals gated on the gate half
(``sweep_proposals``), line-search the chosen one on the probe (``probe_line_search``), gate it on
the hold-out split, then move the centre or halve σ.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import product
from typing import Any, Sequence

import numpy as np
from rlvr.harness.benchmarks.problems import Problem
from rlvr.trainers.populations.config import ESConfig
from rlvr.trainers.populations.corp_ops import (
    Cloud,
    HoldoutDecision,
    KeySpace,
    Outcomes,
    cloud_stats,
    compare,
    expected_low_rank_share,
    gate_passes,
    holdout_gate,
    local_amplitudes,
    probe_accepts,
    regression_lambda,
    search_weights,
    target_ess,
    two_pass_merge,
    update_isotropic_share,
)
from rlvr.trainers.populations.loop import ESLog, progress
from rlvr.trainers.populations.scoring import PopulationScorer, Scored


def round6(x: float) -> float:
    """Six significant digits: what the logs and the report record of a float."""
    return float(f"{x:.6g}")


@dataclass
class Centre:
    """The current model as an amplitude vector, and its per-example correctness per split."""

    amplitudes: np.ndarray
    selection: np.ndarray
    gate: np.ndarray
    probe: np.ndarray
    holdout: np.ndarray


@dataclass(frozen=True)
class Stage2Data:
    """Stage 2's data: the support set's selection and gate halves, the probe, the hold-out split."""

    selection: list[Problem]
    gate: list[Problem]
    probe: Sequence[Problem]
    holdout: Sequence[Problem] = ()


@dataclass(frozen=True)
class Proposal:
    """θ_c + η·d for one (q, β, η) of the sweep (step 4), scored on both support halves."""

    q: float
    beta: float
    eta: float
    direction: np.ndarray
    cs_sel: float
    net_sel: int
    cs_gate: float
    lcb_gate: float
    passed: bool

    def record(self) -> dict[str, Any]:
        """The log's ``chosen``: every field but the direction, floats to six digits."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self) if f.name != "direction")
        return {name: round6(v) if isinstance(v, float) else v for name, v in values}


@dataclass(frozen=True)
class LineSearch:
    """The best point of the probe line search (step 5) and the authors' second gate on it."""

    eta: float
    scored: Scored
    accepted: bool
    lcb: float


@dataclass(frozen=True)
class Stage2Result:
    centre: Centre
    rounds: list[dict[str, Any]]
    accepted: int

    def record(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "accepted": self.accepted, "rejected": len(self.rounds) - self.accepted}


@dataclass
class _Search:
    """What carries from round to round."""

    centre: Centre
    cloud: Cloud
    sigma: float
    eta_c: float
    share: float
    accepted: int = 0
    rejects: int = 0


def score_splits(
    scorer: PopulationScorer, space: KeySpace, amplitudes: np.ndarray, parts: Sequence[Sequence[Problem]]
) -> list[Scored]:
    """One generation pass over several splits, cut back into per-split outcomes."""
    problems = [p for part in parts for p in part]
    scored = scorer.score(space.components(space.pad(amplitudes)), problems)
    out, start = [], 0
    for part in parts:
        stop = start + len(part)
        out.append(
            Scored(
                scored.correct[start:stop],
                scored.extracted[start:stop],
                scored.reasons[start:stop],
                scored.texts[start:stop],
            )
        )
        start = stop
    return out


def support_halves(support: Sequence[Problem], seed: int) -> tuple[list[Problem], list[Problem]]:
    """Stage 2's selection and gate halves: one random permutation of the support set (§5.5)."""
    order = np.random.default_rng(seed).permutation(len(support))
    half = len(order) // 2
    return [support[i] for i in order[:half]], [support[i] for i in order[half:]]


def draw_local(cfg: ESConfig, rnd: int) -> tuple[list[int], np.ndarray]:
    """Round ``rnd``'s P seeds without replacement, then the P×k normals, from
    ``default_rng(local_seed_base + rnd)`` (the draw order inside that generator is ours)."""
    rng = np.random.default_rng(cfg.local_seed_base + rnd)
    seeds = [int(s) for s in rng.choice(2**31, size=cfg.local_population, replace=False)]
    return seeds, rng.standard_normal((cfg.local_population, max(cfg.rank, 1)))


def sweep_proposals(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    state: _Search,
    local: list[np.ndarray],
    rewards: np.ndarray,
    lam: float,
    data: Stage2Data,
) -> list[Proposal]:
    """Step 4: the two-pass merge of the local candidates for every (q, β), each direction at
    every η, ranked by (CS_sel, F_sel − G_sel), best first."""
    centre, L = state.centre, space.stack(local)
    proposals = []
    for q, beta in product(cfg.q_grid, cfg.beta_grid):
        merge = two_pass_merge(L, rewards, q, beta, cfg.rank)
        if merge.cloud.norm <= 0:
            continue
        direction = merge.cloud.mean / merge.cloud.norm
        for multiple in cfg.eta_grid:
            eta = multiple * state.eta_c
            candidate = space.pad(centre.amplitudes) + eta * space.pad(direction)
            sel, gat = score_splits(scorer, space, candidate, [data.selection, data.gate])
            o_sel = compare(centre.selection, sel.correct, lam, cfg.gate_z)
            o_gate = compare(centre.gate, gat.correct, lam, cfg.gate_z)
            passed = gate_passes(centre.gate, gat.correct, lam, cfg.gate_z)
            net = o_sel.fixes - o_sel.regressions
            proposals.append(Proposal(q, beta, eta, direction, o_sel.score, net, o_gate.score, o_gate.lcb, passed))
    proposals.sort(key=lambda p: (-p.cs_sel, -p.net_sel))
    return proposals


def probe_line_search(
    cfg: ESConfig, scorer: PopulationScorer, space: KeySpace, centre: Centre, chosen: Proposal, probe: Sequence[Problem]
) -> LineSearch:
    """Step 5: η = α·η_proposal for α in the grid on the probe (first best kept), then the
    authors' second gate: probe LCB > 0 and accuracy ≥ the centre's + ε."""
    best: tuple[float, Scored] | None = None
    for alpha in cfg.probe_alpha_grid:
        eta = alpha * chosen.eta
        candidate = space.pad(centre.amplitudes) + eta * space.pad(chosen.direction)
        result = score_splits(scorer, space, candidate, [probe])[0]
        if best is None or result.accuracy > best[1].accuracy:
            best = (eta, result)
    assert best is not None
    accepted, lcb = probe_accepts(centre.probe, best[1].correct, cfg.gate_z, cfg.accept_epsilon)
    return LineSearch(best[0], best[1], accepted, lcb)


def stage2(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    centre: Centre,
    *,
    cloud: Cloud,
    sigma: float,
    eta_c: float,
    data: Stage2Data,
    log: ESLog,
    show: bool,
) -> Stage2Result:
    """Rounds until ``max_accepts`` accepted, ``patience`` consecutive rejects or ``rounds`` (§5.5
    step 6). A round the authors' gates accept is kept only if it beats the centre on
    ``data.holdout`` (paired LCB > 0) when ``2 in cfg.holdout_gate_stages``."""
    state = _Search(centre, cloud, sigma, eta_c, cfg.isotropic_share)
    final_lambda = cfg.regression_lambda if cfg.regression_lambda_final is None else cfg.regression_lambda_final
    history: list[dict[str, Any]] = []
    for rnd in range(1, cfg.rounds + 1):
        entry = _round(cfg, scorer, space, state, rnd, final_lambda, data)
        log.write("stage2_round", stage="stage2", **entry)
        history.append(entry)
        accept = entry["accepted"]
        progress(
            f"stage 2 round {rnd}: {entry['positives']}/{entry['local']} local candidates constructive, "
            f"{entry['proposals_passing_gate']}/{entry['proposals']} proposals pass the gate, "
            + ("hold-out gate rejects, " if entry["accepted_by_authors_gates"] and not accept else "")
            + f"{'ACCEPT' if accept else 'reject'}",
            show,
        )
        if (accept and state.accepted >= cfg.max_accepts) or (not accept and state.rejects >= cfg.patience):
            break
    return Stage2Result(state.centre, history, state.accepted)


def _round(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    state: _Search,
    rnd: int,
    final_lambda: float,
    data: Stage2Data,
) -> dict[str, Any]:
    """One round (steps 1–5, then ours); updates ``state`` and returns the round's log record."""
    lam = regression_lambda(rnd, cfg.rounds, cfg.regression_lambda, final_lambda)
    ess_r = target_ess(rnd, cfg.rounds, cfg.ess_start, cfg.ess_end)
    seeds, normals = draw_local(cfg, rnd)
    # 1-2. local population around the centre, scored on the selection half
    low_rank_share = expected_low_rank_share(state.cloud, state.share, cfg.low_rank_scale)
    local = local_amplitudes(space, seeds, state.sigma, state.share, state.cloud, normals, cfg.low_rank_scale)
    centre_amp = space.pad(state.centre.amplitudes)
    scored = scorer.score_many([space.components(centre_amp + space.pad(v)) for v in local], data.selection)
    outcomes = [compare(state.centre.selection, s.correct, lam, cfg.gate_z) for s in scored]
    cs = np.array([o.score for o in outcomes])
    positive = np.flatnonzero(cs > 0)
    # 3. search-distribution update (every round, accepted or not)
    temperature = None
    if len(positive):
        weights, temperature = search_weights(cs[positive], min(len(positive), 2 * ess_r))
        state.cloud = cloud_stats(space.stack([local[i] for i in positive]), weights, cfg.rank)
        state.share = update_isotropic_share(state.share, len(positive) / len(local))
    # 4. proposal sweep, gated on the gate half
    rewards = np.array([s.accuracy for s in scored])
    proposals = sweep_proposals(cfg, scorer, space, state, local, rewards, lam, data)
    chosen = next((p for p in proposals if p.passed), proposals[0] if proposals else None)
    # 5. probe line search and second gate
    line = probe_line_search(cfg, scorer, space, state.centre, chosen, data.probe) if chosen and chosen.passed else None
    # 6. ours: the hold-out gate, on data that chose nothing in this round
    authors_accept = line is not None and line.accepted
    held: HoldoutDecision | None = None
    held_out: Scored | None = None
    if authors_accept and 2 in cfg.holdout_gate_stages:
        assert line is not None and chosen is not None
        candidate = space.pad(state.centre.amplitudes) + line.eta * space.pad(chosen.direction)
        held_out = score_splits(scorer, space, candidate, [data.holdout])[0]
        held = holdout_gate(state.centre.holdout, held_out.correct, cfg.holdout_z)
    accept = authors_accept if held is None else held.accepted
    best = outcomes[int(np.argmax(cs))]
    entry = _record(cfg, state, rnd, lam, ess_r, low_rank_share, temperature, positive, local, cs, best)
    entry.update(
        proposals=len(proposals),
        proposals_passing_gate=sum(p.passed for p in proposals),
        chosen=None if chosen is None else chosen.record(),
        probe_accuracy=None if line is None else line.scored.accuracy,
        probe_lcb=None if line is None else round6(line.lcb),
        accepted_by_authors_gates=authors_accept,
        holdout_gate=None if held is None else held.record(),
        accepted=accept,
        **{f"search_{k}": v for k, v in state.cloud.diagnostics().items()},
    )
    if accept:
        assert line is not None and chosen is not None
        _move_centre(scorer, space, state, line.eta, chosen.direction, held_out, data)
    else:
        state.sigma = max(cfg.sigma_down * state.sigma, 1e-8)
        state.rejects += 1
    return entry


def _record(
    cfg: ESConfig,
    state: _Search,
    rnd: int,
    lam: float,
    ess_r: float,
    low_rank_share: float,
    temperature: float | None,
    positive: np.ndarray,
    local: list[np.ndarray],
    cs: np.ndarray,
    best: Outcomes,
) -> dict[str, Any]:
    """The first half of a round's record: its settings and its local population."""
    return {
        "round": rnd,
        "lambda": lam,
        "target_ess": round6(ess_r),
        "sigma": round6(state.sigma),
        "isotropic_share": round6(state.share),
        "low_rank_scale": cfg.low_rank_scale,
        "low_rank_share": round6(low_rank_share),
        "temperature": None if temperature is None else round6(temperature),
        "positives": int(len(positive)),
        "local": len(local),
        "best_cs": round6(float(cs.max())),
        "F_best": best.fixes,
        "G_best": best.regressions,
    }


def _move_centre(
    scorer: PopulationScorer,
    space: KeySpace,
    state: _Search,
    eta: float,
    direction: np.ndarray,
    held_out: Scored | None,
    data: Stage2Data,
) -> None:
    """Accept: θ_c ← θ_c + η·d, its correctness re-cached on every split, η_c ← η."""
    amplitudes = space.pad(state.centre.amplitudes) + eta * space.pad(direction)
    sel, gat, prb = score_splits(scorer, space, amplitudes, [data.selection, data.gate, data.probe])
    # the hold-out outcomes matter only while the hold-out gate is on, and then they exist
    holdout = held_out.correct if held_out is not None else state.centre.holdout
    state.centre = Centre(amplitudes, sel.correct, gat.correct, prb.correct, holdout)
    state.eta_c = eta
    state.accepted += 1
    state.rejects = 0
