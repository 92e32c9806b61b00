"""CoRP (Zhang, Yang, Kasneci, "Consolidating Rewarded Perturbations", arXiv 2605.31494): fold a
rewarded perturbation population into one deployable update, with no gradient through the model.

Implemented from the authors' released code, as documented in ALGORITHMS.md §5 (the paper body
was not available; equation numbers below are that document's steps). In amplitude space
(``trainers.corp_ops``: a spec's coordinates are a_j = w_j σ_j over (seed, σ) axes):

Stage 0 (§5.3)  RandOpt sampling on the support set; ``best σ`` = level with the best mean score.
Stage 1 (§5.4)  E = {r ≥ quantile(r, q)};  w¹ = softmax(β r_E);  m¹ = Σ w¹ a;
                α = cos(a, m¹), δ = ‖a‖² − ⟨a, m¹/‖m¹‖⟩²;  w² = softmax(β r + z(α) − z(δ));
                m = Σ w² a, weighted SVD of diag(√w²)(A − m) → rank-8 subspace, eff. rank, κ;
                θ₁ = θ₀ + s·m, with (q, β, s) chosen on the probe split (first best, strict >).
Stage 2 (§5.5)  rounds of: local population (isotropic σ√λ_iso + low-rank σ√(1−λ_iso)√λ_k z_k),
                CS = (F − λ_r G)/n on the selection half, ESS-targeted softmax(CS/T) search update,
                λ_iso update, proposal sweep over (q, β, η) gated on the gate half
                (CS > 0 and LCB = mean Δ − z·sd(Δ)/√n > 0), probe line search over α and a second
                LCB gate; accept → move the centre, reject → σ ← σ/2; patience / max accepts.
                Proposals as the authors' code draws them (``low_rank_scale: authors``: the
                low-rank part in amplitude² units, negligible at small σ) or with the low-rank part
                a stated share 1 − λ_iso of the proposal (``trace``; ``corp_ops.local_amplitudes``).

Deliberate deviations and options, labelled:
* The hold-out gate (ours; ``holdout_gate_stages``, on in every preset): Stage 1's merge and
  every Stage-2 round the authors' gates accept must also beat the current model on the
  hold-out split — training items that chose nothing — with a paired LCB > 0 (z =
  ``holdout_z``); ties are rejected. The authors' probe gate is kept as released, but the
  probe chose the Stage-1 grid point and the Stage-2 line-search α, so it is not held out.
* The centre is never committed into the base weights: every evaluation applies the full spec
  (Stage 1 + accepted Stage 2 + candidate) to the exact base, so the final model is exactly
  θ₀ + spec, bit for bit, in every process (the released code commits, adding rounding).
* Stage-2 seeds: ``default_rng(42 + 1000 + r)`` draws P seeds without replacement, then the P×k
  normals (the draw order inside that generator is our choice).
* Test scores are computed once at the end (base, top-1 reference, Stage 1, final), not after
  every accepted round.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from harness.benchmarks.problems import Problem
from trainers.corp_ops import (
    Cloud,
    HoldoutDecision,
    KeySpace,
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
from trainers.es_config import ESConfig
from trainers.es_loop import (
    ESLog,
    Splits,
    accuracy_report,
    progress,
    rows_of,
    run_search,
    sample_population,
    split_half,
    write_population,
    write_test_samples,
)
from trainers.perturb import save_consolidated
from trainers.population import PopulationScorer, Scored


def _round(x: float) -> float:
    return float(f"{x:.6g}")


@dataclass
class Centre:
    """The current model as an amplitude vector, and its per-example correctness per split."""

    amplitudes: np.ndarray
    selection: np.ndarray
    gate: np.ndarray
    probe: np.ndarray
    holdout: np.ndarray


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


def stage1(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    A: np.ndarray,
    rewards: np.ndarray,
    probe: Sequence[Problem],
    log: ESLog,
    show: bool,
) -> dict[str, Any]:
    """Grid over (q, β, s) on the probe split; returns the winner and the top-1 reference."""
    best: dict[str, Any] | None = None
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
            if best is None or accuracy > best["probe_accuracy"]:
                best = {
                    "q": q,
                    "beta": beta,
                    "s": s,
                    "probe_accuracy": accuracy,
                    "merge": merge,
                    "amplitudes": s * merge.cloud.mean,
                }
        progress(f"stage 1: q={q} beta={beta} best probe {best['probe_accuracy']:.3f}", show)
    assert best is not None
    top = int(np.argmax(rewards))
    top1: dict[str, Any] | None = None
    for s in cfg.s_grid:
        accuracy = scorer.score(space.components(s * A[top]), probe).accuracy
        if top1 is None or accuracy > top1["probe_accuracy"]:
            top1 = {"s": s, "probe_accuracy": accuracy, "amplitudes": s * A[top]}
    log.write("stage1_top1_reference", stage="stage1", **{k: v for k, v in top1.items() if k != "amplitudes"})
    return {"best": best, "top1": top1}


def support_halves(support: Sequence[Problem], seed: int) -> tuple[list[Problem], list[Problem]]:
    """Stage 2's selection and gate halves: one random permutation of the support set (§5.5)."""
    order = np.random.default_rng(seed).permutation(len(support))
    half = len(order) // 2
    return [support[i] for i in order[:half]], [support[i] for i in order[half:]]


def stage1_holdout_gate(
    cfg: ESConfig, scorer: PopulationScorer, space: KeySpace, amplitudes: np.ndarray, holdout: Sequence[Problem]
) -> tuple[np.ndarray, HoldoutDecision | None, np.ndarray | None]:
    """θ₁ = θ₀ + s·m replaces θ₀ only if it beats θ₀ on the hold-out split (paired LCB > 0);
    else Stage 2 starts from θ₀. Returns (the kept amplitudes, the decision or None when Stage 1
    is not gated, the kept model's hold-out correctness or None)."""
    if 1 not in cfg.holdout_gate_stages:
        return amplitudes, None, None
    base = scorer.score([], holdout)
    merged = scorer.score(space.components(space.pad(amplitudes)), holdout)
    decision = holdout_gate(base.correct, merged.correct, cfg.holdout_z)
    if decision.accepted:
        return amplitudes, decision, merged.correct
    return np.zeros(len(space)), decision, base.correct


def stage2(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    centre: Centre,
    cloud: Cloud,
    sigma: float,
    eta_c: float,
    halves: tuple[list[Problem], list[Problem]],
    probe: Sequence[Problem],
    log: ESLog,
    show: bool,
    holdout: Sequence[Problem] = (),
) -> tuple[Centre, dict[str, Any]]:
    """Adaptive constructive recentring with the authors' validation gates (§5.5), then ours: a
    round the authors' gates accept is kept only if it beats the centre on ``holdout`` (paired
    LCB > 0) when ``2 in cfg.holdout_gate_stages``."""
    selection, gate = halves
    share = cfg.isotropic_share
    final_lambda = cfg.regression_lambda if cfg.regression_lambda_final is None else cfg.regression_lambda_final
    accepted = rejects = 0
    history = []
    for rnd in range(1, cfg.rounds + 1):
        lam = regression_lambda(rnd, cfg.rounds, cfg.regression_lambda, final_lambda)
        ess_r = target_ess(rnd, cfg.rounds, cfg.ess_start, cfg.ess_end)
        rng = np.random.default_rng(cfg.local_seed_base + rnd)
        seeds = [int(s) for s in rng.choice(2**31, size=cfg.local_population, replace=False)]
        normals = rng.standard_normal((cfg.local_population, max(cfg.rank, 1)))
        # 1-2. local population around the centre, scored on the selection half
        low_rank_share = expected_low_rank_share(cloud, share, cfg.low_rank_scale)
        local = local_amplitudes(space, seeds, sigma, share, cloud, normals, cfg.low_rank_scale)
        centre_amp = space.pad(centre.amplitudes)
        scored = scorer.score_many([space.components(centre_amp + space.pad(v)) for v in local], selection)
        outcomes = [compare(centre.selection, s.correct, lam, cfg.gate_z) for s in scored]
        cs = np.array([o.score for o in outcomes])
        positive = np.flatnonzero(cs > 0)
        # 3. search-distribution update (every round, accepted or not)
        temperature = None
        if len(positive):
            weights, temperature = search_weights(cs[positive], min(len(positive), 2 * ess_r))
            cloud = cloud_stats(space.stack([local[i] for i in positive]), weights, cfg.rank)
            share = update_isotropic_share(share, len(positive) / len(local))
        # 4. proposal sweep, gated on the gate half
        L = space.stack(local)
        rewards = np.array([s.accuracy for s in scored])
        proposals = []
        for q, beta in product(cfg.q_grid, cfg.beta_grid):
            merge = two_pass_merge(L, rewards, q, beta, cfg.rank)
            if merge.cloud.norm <= 0:
                continue
            direction = merge.cloud.mean / merge.cloud.norm
            for multiple in cfg.eta_grid:
                eta = multiple * eta_c
                sel, gat = score_splits(
                    scorer, space, space.pad(centre.amplitudes) + eta * space.pad(direction), [selection, gate]
                )
                o_sel = compare(centre.selection, sel.correct, lam, cfg.gate_z)
                o_gate = compare(centre.gate, gat.correct, lam, cfg.gate_z)
                proposals.append(
                    {
                        "q": q,
                        "beta": beta,
                        "eta": eta,
                        "direction": direction,
                        "cs_sel": o_sel.score,
                        "net_sel": o_sel.fixes - o_sel.regressions,
                        "cs_gate": o_gate.score,
                        "lcb_gate": o_gate.lcb,
                        "passed": gate_passes(centre.gate, gat.correct, lam, cfg.gate_z),
                    }
                )
        proposals.sort(key=lambda p: (-p["cs_sel"], -p["net_sel"]))
        chosen = next((p for p in proposals if p["passed"]), proposals[0] if proposals else None)
        # 5. probe line search and second gate
        accept, probe_best, probe_lcb = False, None, None
        if chosen is not None and chosen["passed"]:
            for alpha in cfg.probe_alpha_grid:
                eta = alpha * chosen["eta"]
                result = score_splits(
                    scorer, space, space.pad(centre.amplitudes) + eta * space.pad(chosen["direction"]), [probe]
                )[0]
                if probe_best is None or result.accuracy > probe_best[1].accuracy:
                    probe_best = (eta, result)
            assert probe_best is not None
            accept, probe_lcb = probe_accepts(centre.probe, probe_best[1].correct, cfg.gate_z, cfg.accept_epsilon)
        # 6. ours: the hold-out gate, on data that chose nothing in this round
        authors_accept, held = accept, None
        if accept and 2 in cfg.holdout_gate_stages:
            assert probe_best is not None and chosen is not None
            candidate = space.pad(centre.amplitudes) + probe_best[0] * space.pad(chosen["direction"])
            held_out = score_splits(scorer, space, candidate, [holdout])[0]
            held = holdout_gate(centre.holdout, held_out.correct, cfg.holdout_z)
            accept = held.accepted
        entry = {
            "round": rnd,
            "lambda": lam,
            "target_ess": _round(ess_r),
            "sigma": _round(sigma),
            "isotropic_share": _round(share),
            "low_rank_scale": cfg.low_rank_scale,
            "low_rank_share": _round(low_rank_share),
            "temperature": None if temperature is None else _round(temperature),
            "positives": int(len(positive)),
            "local": len(local),
            "best_cs": _round(float(cs.max())),
            "F_best": outcomes[int(np.argmax(cs))].fixes,
            "G_best": outcomes[int(np.argmax(cs))].regressions,
            "proposals": len(proposals),
            "proposals_passing_gate": sum(p["passed"] for p in proposals),
            "chosen": None
            if chosen is None
            else {k: (_round(v) if isinstance(v, float) else v) for k, v in chosen.items() if k != "direction"},
            "probe_accuracy": None if probe_best is None else probe_best[1].accuracy,
            "probe_lcb": None if probe_lcb is None else _round(probe_lcb),
            "accepted_by_authors_gates": authors_accept,
            "holdout_gate": None if held is None else held.record(),
            "accepted": accept,
            **{f"search_{k}": v for k, v in cloud.diagnostics().items()},
        }
        if accept:
            assert probe_best is not None and chosen is not None
            eta = probe_best[0]
            amplitudes = space.pad(centre.amplitudes) + eta * space.pad(chosen["direction"])
            sel, gat, prb = score_splits(scorer, space, amplitudes, [selection, gate, probe])
            # the hold-out outcomes matter only while the hold-out gate is on, and then they exist
            centre_holdout = held_out.correct if held is not None else centre.holdout
            centre = Centre(amplitudes, sel.correct, gat.correct, prb.correct, centre_holdout)
            eta_c = eta
            accepted += 1
            rejects = 0
        else:
            sigma = max(cfg.sigma_down * sigma, 1e-8)
            rejects += 1
        log.write("stage2_round", stage="stage2", **entry)
        history.append(entry)
        progress(
            f"stage 2 round {rnd}: {len(positive)}/{len(local)} local candidates constructive, "
            f"{entry['proposals_passing_gate']}/{len(proposals)} proposals pass the gate, "
            + ("hold-out gate rejects, " if authors_accept and not accept else "")
            + f"{'ACCEPT' if accept else 'reject'}",
            show,
        )
        if (accept and accepted >= cfg.max_accepts) or (not accept and rejects >= cfg.patience):
            break
    return centre, {"rounds": history, "accepted": accepted, "rejected": len(history) - accepted}


def search(
    cfg: ESConfig,
    scorer: PopulationScorer,
    splits: Splits,
    log: ESLog,
    out: Path,
    model_path: str,
    model_name: str,
    show: bool,
) -> dict[str, Any]:
    # Stage 0
    population = sample_population(cfg, scorer, splits.support, log, show)
    write_population(out, population)
    space = KeySpace()
    for seed, sigma in zip(population.seeds, population.sigmas):
        space.index(seed, sigma)
    A = np.zeros((len(population.seeds), len(space)))
    for i, (seed, sigma) in enumerate(zip(population.seeds, population.sigmas)):
        A[i, space.index(seed, sigma)] = sigma
    rewards = np.asarray(population.scores, dtype=float)
    # Stage 1
    base_probe = scorer.score([], splits.probe)
    log.write("base", split="probe", accuracy=base_probe.accuracy)
    one = stage1(cfg, scorer, space, A, rewards, splits.probe, log, show)
    best = one["best"]
    merge = best["merge"]
    stage1_amp, stage1_decision, centre_holdout = stage1_holdout_gate(
        cfg, scorer, space, best["amplitudes"], splits.holdout
    )
    gated_out = stage1_decision is not None and not stage1_decision.accepted
    stage1_gate = None if stage1_decision is None else stage1_decision.record()
    log.write(
        "stage1",
        stage="stage1",
        q=best["q"],
        beta=best["beta"],
        s=best["s"],
        probe_accuracy=best["probe_accuracy"],
        base_probe_accuracy=base_probe.accuracy,
        step_norm=_round(float(np.linalg.norm(best["amplitudes"]))),
        holdout_gate=stage1_gate,
        kept=not gated_out,
        **merge.cloud.diagnostics(),
    )
    progress(
        f"stage 1: q={best['q']} beta={best['beta']} s={best['s']} probe {best['probe_accuracy']:.3f} (base "
        f"{base_probe.accuracy:.3f})"
        + (
            ""
            if stage1_decision is None
            else f"; hold-out gate: {stage1_decision.fixes} fixed, {stage1_decision.regressions} broken of "
            f"{stage1_decision.n}, LCB {stage1_decision.lcb:+.4f} -> {'kept' if not gated_out else 'rejected'}"
        ),
        show,
    )
    # Stage 2
    selection, gate = support_halves(splits.support, cfg.split_seed)
    sel, gat, prb = score_splits(scorer, space, stage1_amp, [selection, gate, splits.probe])
    if centre_holdout is None:  # Stage 1 not gated: the centre's hold-out outcomes, if Stage 2 is gated
        gated2 = 2 in cfg.holdout_gate_stages and len(splits.holdout) > 0
        centre_holdout = (
            score_splits(scorer, space, stage1_amp, [splits.holdout])[0].correct if gated2 else np.zeros(0, bool)
        )
    centre = Centre(stage1_amp, sel.correct, gat.correct, prb.correct, centre_holdout)
    eta_c = best["s"] * merge.cloud.norm
    centre, rounds = stage2(
        cfg,
        scorer,
        space,
        centre,
        merge.cloud,
        population.best_sigma,
        eta_c,
        (selection, gate),
        splits.probe,
        log,
        show,
        splits.holdout,
    )
    search_generations = scorer.generations
    # the consolidated model: base + seeds/σ/weights, and a merged HF checkpoint beside it
    spec = space.components(space.pad(centre.amplitudes))
    progress(
        f"saving the consolidated model ({len(spec)} components) and evaluating on {len(splits.test)} held-out "
        "problems",
        show,
    )
    save_consolidated(
        out,
        spec,
        model_path,
        model_name,
        cfg.noise_dtype,
        {
            "algorithm": "corp",
            "backend": cfg.backend,
            "stage1": {"q": best["q"], "beta": best["beta"], "s": best["s"], "kept": not gated_out},
            "holdout_gate_stages": cfg.holdout_gate_stages,
            "low_rank_scale": cfg.low_rank_scale,
            "accepted_rounds": rounds["accepted"],
            "rounds": len(rounds["rounds"]),
        },
        cfg.dtype,
        cfg.device,
        scorer.noise_device,
    )
    base = scorer.score([], splits.test)
    merge_test = scorer.score(space.components(space.pad(best["amplitudes"])), splits.test)
    stage1_test = merge_test if not gated_out else base
    top1_test = scorer.score(space.components(space.pad(one["top1"]["amplitudes"])), splits.test)
    final = scorer.score(spec, splits.test)
    test = {
        "base": accuracy_report(base),
        "top1_reference": {**accuracy_report(top1_test, base), "inference_passes_per_example": 1},
        "stage1_merge": {**accuracy_report(merge_test, base), "inference_passes_per_example": 1},
        "stage1": {**accuracy_report(stage1_test, base), "inference_passes_per_example": 1},
        "corp": {**accuracy_report(final, base), "inference_passes_per_example": 1},
    }
    for name, entry in test.items():
        log.write("test", model=name, accuracy=entry["accuracy"]["value"])
    write_test_samples(
        out,
        splits.test,
        {
            "base": rows_of(base),
            "top1_reference": rows_of(top1_test),
            "stage1_merge": rows_of(merge_test),
            "stage1": rows_of(stage1_test),
            "corp": rows_of(final),
        },
    )
    return {
        "algorithm": "corp",
        "population": cfg.population,
        "best_sigma": population.best_sigma,
        "search_generations": search_generations,
        "test_generations": scorer.generations - search_generations,
        "noise_draws": scorer.noise_draws,
        "stage1": {
            "q": best["q"],
            "beta": best["beta"],
            "s": best["s"],
            "probe_accuracy": best["probe_accuracy"],
            "base_probe_accuracy": base_probe.accuracy,
            "holdout_gate": stage1_gate,
            "kept": not gated_out,
            **merge.cloud.diagnostics(),
        },
        "stage2": {**rounds, "low_rank_scale": cfg.low_rank_scale, "holdout_gate": 2 in cfg.holdout_gate_stages},
        "components": len(spec),
        "solution_density": population.density(),
        "split_half": split_half(cfg, population),
        "test": test,
    }


def train(cfg: ESConfig, resume: bool = False, progress: bool = True) -> Path:
    """Run CoRP end to end (``rlvr train corp``); returns the run directory."""
    return run_search(cfg, search, resume, progress)
