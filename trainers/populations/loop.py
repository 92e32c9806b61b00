"""What RandOpt and CoRP share: data splits, Stage-0 population sampling, the run directory,
the log, held-out reporting with CIs, and the split-half analysis.

Run directory: ``config.yaml``; ``train_log.jsonl`` (one line per scored candidate, grid point,
round); ``population.json`` (every seed, σ and support score, ranked); ``generations.jsonl`` (the
completions of every scored spec, which ``--resume`` replays); ``report.json`` (held-out
numbers with 95% bootstrap CIs, generations spent, verifier versions); ``test_samples.jsonl``
(per-problem answers of every reported model); CoRP adds ``spec.json`` and ``merged/``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError
from rlvr.harness.metrics import bootstrap_mean, paired_difference
from rlvr.harness.run_dir import RunDir, holds_file
from rlvr.trainers.populations.config import ESConfig
from rlvr.trainers.populations.corp_ops import best_sigma, draw_population, split_half_overlap
from rlvr.trainers.populations.journal import GenerationJournal
from rlvr.trainers.populations.perturb import Component, noise_sketch
from rlvr.trainers.populations.scoring import PopulationScorer, Scored
from rlvr.trainers.runtime.telemetry import TrainLog


@dataclass
class Splits:
    support: list[Problem]
    probe: list[Problem]
    test: list[Problem]
    holdout: list[Problem] = dataclasses.field(default_factory=list)


def _problem_key(problem: Problem) -> tuple[str, str]:
    """What makes two problems the same, whatever split or benchmark name they carry."""
    return problem.question.strip(), str(problem.gold.get("answer", problem.gold))


def load_splits(cfg: ESConfig) -> Splits:
    """support = first ``support_size`` training items, probe = the next ``probe_size`` (CoRP's
    ``load_data_splits`` for separate train and test files), hold-out gate = the next
    ``holdout_size`` (CoRP; ours), test = the held-out source. The four must be pairwise disjoint
    (by id, and by question and answer), else one line says which two overlap."""
    from rlvr.harness.benchmarks.sources import resolve_source

    train = resolve_source(cfg.train_source).problems
    probe_size = cfg.probe_size if cfg.algorithm == "corp" else 0
    holdout_size = cfg.holdout_size if cfg.algorithm == "corp" and cfg.holdout_gate_stages else 0
    needed = cfg.support_size + probe_size + holdout_size
    if len(train) < needed:
        raise UserError(
            f"{cfg.train_source} has {len(train)} items; support_size + probe_size + holdout_size = {needed}"
        )
    test = resolve_source(cfg.test_source).problems
    if cfg.test_limit:
        test = test[: cfg.test_limit]
    support = train[: cfg.support_size]
    probe = train[cfg.support_size : cfg.support_size + probe_size]
    holdout = train[cfg.support_size + probe_size : needed]
    named = [("support", support), ("probe", probe), ("hold-out gate", holdout), ("test", test)]
    for i, (name_a, a) in enumerate(named):
        keys_a = {p.id for p in a} | {_problem_key(p) for p in a}
        for name_b, b in named[i + 1 :]:
            shared = sum(p.id in keys_a or _problem_key(p) in keys_a for p in b)
            if shared:
                hint = "; use a held-out test_source" if name_b == "test" else ""
                raise UserError(f"{name_a} and {name_b} share {shared} problems{hint}")
    return Splits(support, probe, test, holdout)


@dataclass
class Population:
    """Stage 0 (RandOpt sampling): candidates ranked by support score (stable, descending)."""

    seeds: list[int]
    sigmas: list[float]
    scores: list[float]
    outcomes: list[Scored]
    base: Scored

    def ranked(self) -> list[int]:
        return sorted(range(len(self.seeds)), key=lambda i: -self.scores[i])

    @property
    def best_sigma(self) -> float:
        return best_sigma(self.sigmas, self.scores)

    def density(self) -> dict[str, Any]:
        """Solution density (operational definition, docs/algorithms.md §4.5 [I]): the share of
        perturbations whose support score beats the base's, overall and per σ."""
        base = self.base.accuracy
        per_sigma = {}
        for level in sorted(set(self.sigmas)):
            mine = [r for s, r in zip(self.sigmas, self.scores) if s == level]
            per_sigma[str(level)] = {
                "n": len(mine),
                "density": round(sum(r > base for r in mine) / len(mine), 4),
                "mean_score": round(float(np.mean(mine)), 4),
            }
        return {
            "base_support_accuracy": round(base, 4),
            "density": round(sum(r > base for r in self.scores) / len(self.scores), 4),
            "equal_to_base": round(sum(r == base for r in self.scores) / len(self.scores), 4),
            "per_sigma": per_sigma,
        }


def write_population(out: Path, population: Population) -> None:
    """``population.json``: every seed, σ and support score, best first."""
    rows = [
        {
            "rank": r + 1,
            "seed": population.seeds[i],
            "sigma": population.sigmas[i],
            "support_accuracy": population.scores[i],
        }
        for r, i in enumerate(population.ranked())
    ]
    (out / "population.json").write_text(json.dumps(rows, indent=1))


class ESLog:
    """``train_log.jsonl`` for gradient-free runs: one numbered line per event."""

    def __init__(self, out: Path, config: dict[str, Any]):
        self.log = TrainLog(out, ["jsonl"], config, resume=False)
        self.count = 0

    def write(self, event: str, **fields: Any) -> None:
        self.count += 1
        self.log.write(self.count, {"event": event, **fields})

    def close(self) -> None:
        self.log.close()


def population_run_dir(cfg: ESConfig) -> RunDir:
    """A population run's directory: its work is the search log ``train_log.jsonl``."""
    return RunDir(cfg.run_dir(), holds_file("train_log.jsonl"), "run")


def prepare_run(cfg: ESConfig, resume: bool) -> tuple[Path, bool]:
    """The run directory and whether it holds a run to continue, under the one resume rule
    (``rlvr.harness.run_dir``): such a run continues from its generation journal
    (``rlvr.trainers.populations.journal``)."""
    run = population_run_dir(cfg)
    continuing = run.open(cfg, resume)
    run.save_config(cfg)
    return run.path, continuing


def progress(message: str, enabled: bool) -> None:
    if enabled:
        print(message, flush=True)


def sample_population(
    cfg: ESConfig, scorer: PopulationScorer, support: Sequence[Problem], log: ESLog, show: bool
) -> Population:
    """θ_i = θ_0 + σ_i ε(s_i) for N draws, each scored greedily on the support set."""
    seeds, sigmas = draw_population(cfg.population, cfg.sigmas, cfg.population_seed)
    base = scorer.score([], support)
    log.write("base", split="support", accuracy=base.accuracy)
    outcomes: list[Scored] = []
    t0 = time.perf_counter()
    batch = max(1, cfg.workers)
    for start in range(0, len(seeds), batch):
        chunk = range(start, min(start + batch, len(seeds)))
        for i, scored in zip(chunk, scorer.score_many([[Component(seeds[i], sigmas[i])] for i in chunk], support)):
            outcomes.append(scored)
            log.write(
                "candidate", stage="stage0", index=i, seed=seeds[i], sigma=sigmas[i], support_accuracy=scored.accuracy
            )
        done = len(outcomes)
        if done % 10 == 0 or done == len(seeds):
            best = max(o.accuracy for o in outcomes)
            progress(
                f"population {done}/{len(seeds)}  base {base.accuracy:.3f}  best {best:.3f}  "
                f"({time.perf_counter() - t0:.0f}s)",
                show,
            )
    return Population(seeds, sigmas, [o.accuracy for o in outcomes], outcomes, base)


def split_half(cfg: ESConfig, population: Population) -> dict[str, Any]:
    """Our reconstruction of CoRP's split-half analysis (the protocol is not in the release):
    rows a_i·sketch(ε_i) on ``sketch_dims`` fixed weight coordinates, rewards = support scores."""
    rows = np.stack(
        [
            s * noise_sketch(seed, cfg.sketch_dims, cfg.noise_dtype)
            for seed, s in zip(population.seeds, population.sigmas)
        ]
    )
    if len(rows) < 6:
        return {"skipped": f"population of {len(rows)} is too small to split"}
    result = split_half_overlap(
        rows, np.asarray(population.scores), cfg.split_half_rank, cfg.split_half_splits, seed=cfg.population_seed
    )
    chance = result.rank / cfg.sketch_dims
    return {
        "label": "our reconstruction (protocol not in the authors' release)",
        "rank": result.rank,
        "overlap": round(result.overlap, 4),
        "shuffled_reward_null": round(result.null_overlap, 4),
        "chance_r_over_D": round(chance, 4),
        "splits": result.splits,
    }


def accuracy_report(scored: Scored, base: Scored | None = None) -> dict[str, Any]:
    """Held-out accuracy with a 95% bootstrap CI, and the paired gain over the base."""
    out: dict[str, Any] = {"accuracy": bootstrap_mean(scored.correct.astype(float).tolist())}
    if base is not None:
        out["gain_vs_base"] = paired_difference(
            [[float(v)] for v in base.correct], [[float(v)] for v in scored.correct]
        )
    return out


def write_test_samples(
    out: Path, problems: Sequence[Problem], models: dict[str, list[tuple[str | None, bool, str]]]
) -> None:
    """One line per problem: every reported model's (extracted answer, correct, completion)."""
    with (out / "test_samples.jsonl").open("w", encoding="utf-8") as fh:
        for index, problem in enumerate(problems):
            row = {"problem_id": problem.id, "gold": problem.gold.get("answer")}
            for name, answers in models.items():
                extracted, correct, text = answers[index]
                row[name] = {"extracted": extracted, "correct": bool(correct), "completion": text}
            fh.write(json.dumps(row) + "\n")


def rows_of(scored: Scored) -> list[tuple[str | None, bool, str]]:
    return list(zip(scored.extracted, scored.correct.tolist(), scored.texts))


@dataclass(frozen=True)
class SearchRun:
    """What a population search works with: its settings, the scorer (the model, its exact base
    copy, the grader), the data splits, the run's log and directory, the model it perturbs and
    whether it prints progress."""

    cfg: ESConfig
    scorer: PopulationScorer
    splits: Splits
    log: ESLog
    out: Path
    model_path: str
    model_name: str
    show: bool = True


class PopulationSearch(Protocol):
    """An algorithm's search (``randopt.search``, ``corp.search``): it spends ``run.scorer`` on
    ``run.splits``, writes its own files under ``run.out`` and returns its report, which
    ``run_search`` completes (model, minutes, grading, splits) and saves as ``report.json``."""

    def __call__(self, run: SearchRun) -> dict[str, Any]: ...


def run_search(cfg: ESConfig, search: PopulationSearch, resume: bool = False, show_progress: bool = True) -> Path:
    """The loop RandOpt and CoRP share: splits, the population scorer, the log, then the
    algorithm's ``search`` (its module passes it in), the report; returns the run directory."""
    from rlvr.harness.benchmarks.sources import source_instructions
    from rlvr.harness.models import resolve_model

    out, continuing = prepare_run(cfg, resume)
    model_path, model_name = resolve_model(cfg.model)
    splits = load_splits(cfg)
    instructions = source_instructions((cfg.train_source, cfg.test_source))
    scorer = PopulationScorer(
        model_path,
        cfg.template,
        instructions,
        cfg.max_tokens,
        cfg.batch_size,
        cfg.noise_dtype,
        cfg.noise_cache_gb,
        cfg.workers,
        cfg.dtype,
        cfg.device,
        cfg.backend,
    )
    scorer.journal = journal = GenerationJournal(out, keep=continuing)
    if journal.entries:
        progress(f"resuming {out}: {len(journal.entries)} scored specs in its generation journal", show_progress)
    log = ESLog(out, dataclasses.asdict(cfg))
    t0 = time.perf_counter()
    try:
        run = SearchRun(cfg, scorer, splits, log, out, model_path, model_name, show_progress)
        report = search(run)
    finally:
        log.close()
        journal.close()
        scorer.close()
    report.update(
        model=model_name,
        # Wall time of this process plus the generation time of the specs it replayed.
        minutes=round((time.perf_counter() - t0 + journal.replayed_seconds) / 60, 2),
        replayed_specs=journal.replayed,
        grading=scorer.grader.settings(),
        splits={
            "train_source": cfg.train_source,
            "support": len(splits.support),
            "probe": len(splits.probe),
            "holdout": len(splits.holdout),
            "test_source": cfg.test_source,
            "test": len(splits.test),
        },
    )
    (out / "report.json").write_text(json.dumps(report, indent=2))
    progress(summary_line(report), show_progress)
    return out


def summary_line(report: dict[str, Any]) -> str:
    parts = [f"{name} {100 * entry['accuracy']['value']:.1f}%" for name, entry in report["test"].items()]
    return f"{report['algorithm']} held-out ({report['splits']['test_source']}): " + ", ".join(parts)
