"""CoRP (Zhang, Yang, Kasneci, "Consolidating Rewarded Perturbations", arXiv 2605.31494): fold a
rewarded perturbation population into one deployable update, with no gradient through the model.

Implemented from the authors' released code, as documented in docs/algorithms.md §5 (the paper
body was not available; step numbers are that section's). In amplitude space (``rlvr.trainers.populations.corp_ops``:
a spec's coordinates are a_j = w_j σ_j over (seed, σ) axes); Stage 1 is ``rlvr.trainers.populations.corp_stage1``,
Stage 2 ``rlvr.trainers.populations.corp_stage2``, and this module runs them in order:

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

from pathlib import Path
from typing import Any

import numpy as np
from rlvr.trainers.populations.config import ESConfig
from rlvr.trainers.populations.corp_ops import KeySpace
from rlvr.trainers.populations.corp_stage1 import Stage1Outcome, Top1Reference, stage1, stage1_holdout_gate
from rlvr.trainers.populations.corp_stage2 import Centre, Stage2Data, Stage2Result, score_splits, stage2, support_halves
from rlvr.trainers.populations.loop import (
    Population,
    SearchRun,
    accuracy_report,
    progress,
    rows_of,
    run_search,
    sample_population,
    split_half,
    write_population,
    write_test_samples,
)
from rlvr.trainers.populations.perturb import Component, save_consolidated
from rlvr.trainers.populations.scoring import PopulationScorer, Scored


def population_space(population: Population) -> tuple[KeySpace, np.ndarray]:
    """Stage 0's candidates as amplitude vectors a_i = σ_i e_i over their (seed, σ) axes (§5.2)."""
    space = KeySpace()
    for seed, sigma in zip(population.seeds, population.sigmas):
        space.index(seed, sigma)
    A = np.zeros((len(population.seeds), len(space)))
    for i, (seed, sigma) in enumerate(zip(population.seeds, population.sigmas)):
        A[i, space.index(seed, sigma)] = sigma
    return space, A


def stage2_start(
    cfg: ESConfig,
    scorer: PopulationScorer,
    space: KeySpace,
    kept: np.ndarray,
    holdout: np.ndarray | None,
    data: Stage2Data,
) -> Centre:
    """The centre Stage 2 starts from (θ₁, or θ₀ when the hold-out gate rejected θ₁), scored on
    every split it is compared on."""
    sel, gat, prb = score_splits(scorer, space, kept, [data.selection, data.gate, data.probe])
    if holdout is None:  # Stage 1 not gated: the centre's hold-out outcomes, if Stage 2 is gated
        gated2 = 2 in cfg.holdout_gate_stages and len(data.holdout) > 0
        holdout = score_splits(scorer, space, kept, [data.holdout])[0].correct if gated2 else np.zeros(0, bool)
    return Centre(kept, sel.correct, gat.correct, prb.correct, holdout)


def save_model(run: SearchRun, spec: list[Component], one: Stage1Outcome, two: Stage2Result) -> None:
    """The consolidated model: base + seeds/σ/weights (``spec.json``), a merged HF checkpoint beside it."""
    cfg = run.cfg
    progress(
        f"saving the consolidated model ({len(spec)} components) and evaluating on {len(run.splits.test)} held-out "
        "problems",
        run.show,
    )
    save_consolidated(
        run.out,
        spec,
        run.model_path,
        run.model_name,
        cfg.noise_dtype,
        {
            "algorithm": "corp",
            "backend": cfg.backend,
            "stage1": one.spec_record(),
            "holdout_gate_stages": cfg.holdout_gate_stages,
            "low_rank_scale": cfg.low_rank_scale,
            "accepted_rounds": two.accepted,
            "rounds": len(two.rounds),
        },
        cfg.dtype,
        cfg.device,
        run.scorer.noise_device,
    )


def evaluate_on_test(
    run: SearchRun, space: KeySpace, spec: list[Component], one: Stage1Outcome, top1: Top1Reference
) -> dict[str, Any]:
    """Every reported model on the test split (base, top-1 reference, the Stage-1 merge, Stage 1
    as shipped, CoRP), logged and written to ``test_samples.jsonl``; the report's ``test``."""
    scorer, test_split = run.scorer, run.splits.test
    base = scorer.score([], test_split)
    merge_test = scorer.score(space.components(space.pad(one.choice.amplitudes)), test_split)
    stage1_test = merge_test if one.gate.kept else base
    top1_test = scorer.score(space.components(space.pad(top1.amplitudes)), test_split)
    final = scorer.score(spec, test_split)
    models: dict[str, Scored] = {
        "top1_reference": top1_test,
        "stage1_merge": merge_test,
        "stage1": stage1_test,
        "corp": final,
    }
    test = {"base": accuracy_report(base)}
    for name, scored in models.items():
        test[name] = {**accuracy_report(scored, base), "inference_passes_per_example": 1}
    for name, entry in test.items():
        run.log.write("test", model=name, accuracy=entry["accuracy"]["value"])
    write_test_samples(run.out, test_split, {"base": rows_of(base), **{k: rows_of(v) for k, v in models.items()}})
    return test


def search(run: SearchRun) -> dict[str, Any]:
    """Stages 0, 1 and 2, the consolidated model saved, every reported model tested."""
    cfg, scorer, splits, log = run.cfg, run.scorer, run.splits, run.log
    population = sample_population(cfg, scorer, splits.support, log, run.show)
    write_population(run.out, population)
    space, A = population_space(population)
    rewards = np.asarray(population.scores, dtype=float)
    base_probe = scorer.score([], splits.probe)
    log.write("base", split="probe", accuracy=base_probe.accuracy)
    grid = stage1(cfg, scorer, space, A, rewards, splits.probe, log, run.show)
    gate = stage1_holdout_gate(cfg, scorer, space, grid.choice.amplitudes, splits.holdout)
    one = Stage1Outcome(grid.choice, base_probe.accuracy, gate)
    log.write("stage1", stage="stage1", **one.record(with_step_norm=True))
    progress(one.summary(), run.show)
    data = Stage2Data(*support_halves(splits.support, cfg.split_seed), splits.probe, splits.holdout)
    centre = stage2_start(cfg, scorer, space, gate.amplitudes, gate.holdout_correct, data)
    two = stage2(
        cfg,
        scorer,
        space,
        centre,
        cloud=grid.choice.merge.cloud,
        sigma=population.best_sigma,
        eta_c=grid.choice.eta,
        data=data,
        log=log,
        show=run.show,
    )
    search_generations = scorer.generations
    spec = space.components(space.pad(two.centre.amplitudes))
    save_model(run, spec, one, two)
    test = evaluate_on_test(run, space, spec, one, grid.top1)
    return {
        "algorithm": "corp",
        "population": cfg.population,
        "best_sigma": population.best_sigma,
        "search_generations": search_generations,
        "test_generations": scorer.generations - search_generations,
        "noise_draws": scorer.noise_draws,
        "stage1": one.record(),
        "stage2": {**two.record(), "low_rank_scale": cfg.low_rank_scale, "holdout_gate": 2 in cfg.holdout_gate_stages},
        "components": len(spec),
        "solution_density": population.density(),
        "split_half": split_half(cfg, population),
        "test": test,
    }


def train(cfg: ESConfig, resume: bool = False, progress: bool = True) -> Path:
    """Run CoRP end to end (``rlvr train corp``); returns the run directory."""
    return run_search(cfg, search, resume, progress)
