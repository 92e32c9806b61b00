"""RandOpt (Gan & Isola, "Neural Thickets", arXiv 2603.12228): random guessing in weight space,
then a vote.

Training, fully parallel and gradient-free (docs/algorithms.md §4.1; paper Alg. 1):

    s_1..s_N ~ without replacement from [0, 2^31)  (default_rng(42));  σ_i ~ Uniform(Σ)
    θ_i = θ_0 + σ_i ε(s_i);    score_i = R(θ_i, D_support)   (greedy decoding)
    keep the top K pairs (s_i, σ_i)

Inference: a_k = answer(greedy(θ_(k), x)) for k = 1..K;  prediction = plurality vote over the
non-empty a_k, answers grouped by the verifier's own equivalence (RandOpt votes on values for
Countdown; we use ``same_answer`` for every math task). Ties go to the answer first cast, i.e.
by the higher-ranked perturbation (``Counter.most_common`` semantics). K = 1 is the single best.

Choices, labelled: σ is drawn at random from Σ (the repo; the project page assigns it in equal
blocks). The population sort is stable, so equal scores keep draw order. Solution density is
the operational definition of §4.5 (share of perturbations whose support score beats the base).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.summary import vote_clusters
from rlvr.trainers.populations.config import ESConfig
from rlvr.trainers.populations.loop import (
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
from rlvr.trainers.populations.perturb import Component
from rlvr.trainers.populations.scoring import Scored


def majority_vote(
    extracted: Sequence[str | None], reasons: Sequence[str], same: Callable[[str, str], bool]
) -> int | None:
    """Index (in rank order) of the first member of the winning answer cluster, or None if no
    specialist produced an answer. Plurality; ties go to the cluster cast first."""
    clusters = vote_clusters([{"extracted": e, "reason": r} for e, r in zip(extracted, reasons)], same)
    counts = Counter(c for c in clusters if c >= 0)
    if not counts:
        return None
    winner = max(counts, key=lambda c: (counts[c], -c))
    return clusters.index(winner)


def ensemble(
    problems: Sequence[Problem], specialists: Sequence[Scored], k: int, same_answer: Callable[[Problem, str, str], bool]
) -> Scored:
    """The top-k vote on every problem; the voted answer's own verdict decides correctness."""
    import numpy as np

    correct, extracted, reasons, texts = [], [], [], []
    for index, problem in enumerate(problems):
        members = specialists[:k]
        same = (lambda a, b: same_answer(problem, a, b)) if problem.kind == "math" else (lambda a, b: a == b)
        pick = majority_vote([m.extracted[index] for m in members], [m.reasons[index] for m in members], same)
        if pick is None:
            correct.append(False), extracted.append(None), reasons.append("no_answer"), texts.append("")
        else:
            chosen = members[pick]
            (
                correct.append(bool(chosen.correct[index])),
                extracted.append(chosen.extracted[index]),
                reasons.append(chosen.reasons[index]),
                texts.append(chosen.texts[index]),
            )
    return Scored(np.array(correct, dtype=bool), extracted, reasons, texts)


def search(run: SearchRun) -> dict[str, Any]:
    """Stage 0, the top-K seeds saved, the base and every top-k vote tested."""
    cfg, scorer, splits, log, out = run.cfg, run.scorer, run.splits, run.log, run.out
    population = sample_population(cfg, scorer, splits.support, log, run.show)
    search_generations = scorer.generations
    ranked = population.ranked()
    write_population(out, population)
    k_max = min(max(cfg.top_k), len(ranked))
    top = [[Component(population.seeds[i], population.sigmas[i])] for i in ranked[:k_max]]
    (out / "top_k_seeds.json").write_text(
        json.dumps(
            {
                "base_model": run.model_name,
                "noise_dtype": cfg.noise_dtype,
                "noise_device": scorer.noise_device,
                "specialists": [{"seed": s[0].seed, "sigma": s[0].sigma} for s in top],
            },
            indent=1,
        )
    )
    progress(f"evaluating base and the top {k_max} specialists on {len(splits.test)} held-out problems", run.show)
    base = scorer.score([], splits.test)
    specialists = scorer.score_many(top, splits.test)
    same_answer = scorer.grader.same_answer
    test: dict[str, Any] = {"base": accuracy_report(base)}
    samples = {"base": rows_of(base)}
    for k in sorted({min(k, k_max) for k in cfg.top_k}):
        voted = specialists[0] if k == 1 else ensemble(splits.test, specialists, k, same_answer)
        name = "top1" if k == 1 else f"ensemble_top{k}"
        test[name] = {**accuracy_report(voted, base), "inference_passes_per_example": k}
        samples[name] = rows_of(voted)
        log.write("test", model=name, accuracy=test[name]["accuracy"]["value"])
    write_test_samples(out, splits.test, samples)
    density = population.density()
    log.write("density", **{k: v for k, v in density.items() if k != "per_sigma"})
    return {
        "algorithm": "randopt",
        "population": cfg.population,
        "top_k": sorted(set(cfg.top_k)),
        "best_sigma": population.best_sigma,
        "search_generations": search_generations,
        "test_generations": scorer.generations - search_generations,
        "solution_density": density,
        "split_half": split_half(cfg, population),
        "test": test,
        "support_accuracy_ranked": [population.scores[i] for i in ranked[:k_max]],
    }


def train(cfg: ESConfig, resume: bool = False, progress: bool = True) -> Path:
    """Run RandOpt end to end (``rlvr train randopt``); returns the run directory."""
    return run_search(cfg, search, resume, progress)
