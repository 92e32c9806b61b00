"""RandOpt and CoRP mechanics on a tiny random model with the real tokenizer: voting, the population
scorer, and 2-perturbation runs through ``rlvr train`` (tiny splits so the default suite stays fast)."""

import json
import shutil

import numpy as np
import pytest
import torch
from eval_helpers import rlvr
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.grading import EvalGrader
from rlvr.trainers.populations.randopt import ensemble, majority_vote
from rlvr.trainers.populations.scoring import Scored
from safetensors.torch import load_file


@pytest.fixture(scope="module")
def grader():
    g = EvalGrader()
    yield g
    g.close()


def _problem(answer: str) -> Problem:
    return Problem(id="p", benchmark="toy", kind="math", question="?", gold={"answer": answer})


def test_majority_vote_groups_verifier_equivalent_answers(grader):
    problem = _problem("1/2")
    same = lambda a, b: grader.same_answer(problem, a, b)  # noqa: E731
    ok = ["ok"] * 5
    # "1/2", "0.5" and "\frac{1}{2}" are one answer (3 votes) against "3" (2 votes)
    assert majority_vote(["3", "1/2", "0.5", "3", r"\frac{1}{2}"], ok, same) == 1
    # a 2-2 tie goes to the answer cast first (the higher-ranked perturbation)
    assert majority_vote(["0.5", "3", "3", "1/2"], ok[:4], same) == 0
    assert majority_vote(["3", "0.5", "1/2", "3"], ok[:4], same) == 0
    # empty answers do not vote; no answer at all means no prediction
    assert majority_vote([None, "", "7"], ["no_answer", "no_answer", "ok"], same) == 2
    assert majority_vote([None, None], ["no_answer", "no_answer"], same) is None


def test_ensemble_takes_the_voted_answers_own_verdict(grader):
    problems = [_problem("1/2"), _problem("3")]

    def model(answers, correct):
        return Scored(np.array(correct), answers, ["ok"] * 2, [f"\\boxed{{{a}}}" for a in answers])

    specialists = [
        model(["3", "4"], [False, False]),
        model(["0.5", "3"], [True, True]),
        model(["1/2", "3"], [True, True]),
    ]
    voted = ensemble(problems, specialists, 3, grader.same_answer)
    assert voted.correct.tolist() == [True, True] and voted.extracted == ["0.5", "3"]
    assert ensemble(problems, specialists, 1, grader.same_answer).correct.tolist() == [False, False]


@pytest.mark.slow
def test_worker_processes_score_like_this_process(tiny_model):
    from rlvr.harness.benchmarks.sources import resolve_source, source_instructions
    from rlvr.trainers.populations.perturb import Component
    from rlvr.trainers.populations.scoring import PopulationScorer

    problems = resolve_source("arith_train").problems[:3]
    args = (tiny_model, "chat", source_instructions(["arith_train"]), 8, 8, "float32", 0.0)
    specs = [[Component(1, 0.002)], [Component(2, 0.002, -1.0)]]
    local = PopulationScorer(*args)
    pooled = PopulationScorer(*args, workers=2)
    try:
        mine = local.score_many(specs, problems)
        theirs = pooled.score_many(specs, problems)
    finally:
        local.close()
        pooled.close()
    assert [s.texts for s in mine] == [s.texts for s in theirs]
    assert pooled.generations == local.generations == 6


# hf: population mechanics on the tiny model (vLLM populations: test_vllm_trainers.py)
TINY = [
    "--set",
    "support_size=4",
    "--set",
    "test_limit=4",
    "--set",
    "max_tokens=8",
    "--set",
    "backend=hf",
    "--no-progress",
]


@pytest.mark.slow
def test_randopt_two_perturbations_end_to_end(tmp_path, tiny_model):
    out = tmp_path / "randopt"
    result = rlvr(
        "train",
        "randopt",
        "--config",
        "cpu-demo",
        "--model",
        tiny_model,
        "--population",
        "2",
        "--set",
        "top_k=[1, 2]",
        *TINY,
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["test"]) == {"base", "top1", "ensemble_top2"}
    assert report["search_generations"] == 2 * 4 + 4 and report["test_generations"] == 3 * 4
    assert report["test"]["ensemble_top2"]["inference_passes_per_example"] == 2
    assert 0 <= report["solution_density"]["density"] <= 1 and report["grading"]["math_verifier"].startswith(
        "rlvr-math@"
    )
    top_k = json.loads((out / "top_k_seeds.json").read_text())
    assert top_k["noise_device"] == "cpu"
    seeds = top_k["specialists"]
    ranked = json.loads((out / "population.json").read_text())
    assert [s["seed"] for s in seeds] == [r["seed"] for r in ranked]
    assert len((out / "test_samples.jsonl").read_text().splitlines()) == 4
    events = [json.loads(line)["event"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert events.count("candidate") == 2 and "density" in events


@pytest.mark.slow
def test_corp_two_perturbations_end_to_end_and_the_spec_reproduces_the_checkpoint(tmp_path, tiny_model):
    out = tmp_path / "corp"
    grid = [
        "--set",
        "q_grid=[0.5]",
        "--set",
        "beta_grid=[1.0]",
        "--set",
        "s_grid=[1.0, 4.0]",
        "--set",
        "eta_grid=[1.0]",
        "--set",
        "probe_alpha_grid=[1.0]",
        "--set",
        "rounds=1",
        "--set",
        "local_population=2",
        "--set",
        "probe_size=4",
        "--set",
        "holdout_size=4",
        "--set",
        # Stage 1 ungated, as released, so that the spec has components to rebuild the checkpoint
        # from (the tiny model's merge never beats the base on 4 items); the Stage-1 gate's wiring
        # is tested on a scripted scorer (test_es_gates.py)
        "holdout_gate_stages=[2]",
        "--set",
        "noise_cache_gb=1",
    ]
    result = rlvr(
        "train",
        "corp",
        "--config",
        "cpu-demo",
        "--model",
        tiny_model,
        "--population",
        "2",
        *grid,
        *TINY,
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["test"]) == {"base", "top1_reference", "stage1_merge", "stage1", "corp"}
    assert report["test"]["corp"]["inference_passes_per_example"] == 1
    assert {"effective_rank", "kappa", "top_eigenvalues"} <= set(report["stage1"])
    assert report["splits"]["holdout"] == 4
    assert report["stage1"]["holdout_gate"] is None and report["stage1"]["kept"] is True
    assert report["test"]["stage1"] == report["test"]["stage1_merge"]
    assert len(report["stage2"]["rounds"]) == 1
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert sum(line["event"] == "stage1_grid" for line in log) == 2
    (round_line,) = [line for line in log if line["event"] == "stage2_round"]
    assert {
        "best_cs",
        "F_best",
        "G_best",
        "proposals_passing_gate",
        "accepted",
        "isotropic_share",
        "target_ess",
        "accepted_by_authors_gates",
        "holdout_gate",
        "low_rank_share",
    } <= set(round_line)
    assert round_line["low_rank_scale"] == "trace"
    if round_line["accepted_by_authors_gates"]:
        assert round_line["accepted"] == round_line["holdout_gate"]["accepted"]
    else:
        assert round_line["holdout_gate"] is None and not round_line["accepted"]
    # spec.json alone (base + seeds/σ/weights) rebuilds the merged checkpoint bit for bit
    from rlvr.harness.backends.hf import load_model
    from rlvr.trainers.populations.perturb import Perturber, spec_from_json

    spec = json.loads((out / "spec.json").read_text())
    assert spec["base_model"] == "tiny-llama" and spec["noise_dtype"] == "float32" and spec["noise_device"] == "cpu"
    model, _, _ = load_model(tiny_model, "auto", "cpu")
    assert spec_from_json(spec)
    Perturber(model, spec["noise_dtype"]).apply_json(spec)
    merged = load_file(str(out / "merged" / "model.safetensors"))
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in merged.items())

    # A run killed mid-way (its journal cut after 3 specs, mid-line; no report) resumes to the very
    # same decisions and numbers, generating only what the journal lacks.
    journal = (out / "generations.jsonl").read_text().splitlines(keepends=True)
    assert len(journal) > 4
    killed = tmp_path / "killed"
    shutil.copytree(out, killed)
    (killed / "generations.jsonl").write_text("".join(journal[:3]) + journal[3][:40])
    (killed / "report.json").unlink()
    (killed / "spec.json").unlink()
    shutil.rmtree(killed / "merged")
    again = ["train", "corp", "--config", "cpu-demo", "--model", tiny_model, "--population", "2", *grid, *TINY]
    result = rlvr(*again, "--out", str(killed), "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = json.loads((killed / "report.json").read_text())
    assert resumed["replayed_specs"] == 3 and report["replayed_specs"] == 0
    drop = ("minutes", "replayed_specs")
    assert {k: v for k, v in resumed.items() if k not in drop} == {k: v for k, v in report.items() if k not in drop}
    for name in ("spec.json", "population.json", "test_samples.jsonl"):
        assert (killed / name).read_text() == (out / name).read_text()
    entries = lambda path: [(row["key"], row["texts"]) for row in map(json.loads, path.read_text().splitlines())]  # noqa: E731
    assert entries(killed / "generations.jsonl") == entries(out / "generations.jsonl")
    assert (killed / "train_log.jsonl").read_text() == (out / "train_log.jsonl").read_text()


def test_corp_presets_gate_both_stages_on_the_holdout_split():
    from rlvr.trainers.populations.config import build_es_config

    for preset in ("cpu-demo", "paper"):  # the release gates neither on data that chose nothing
        assert build_es_config("corp", preset, {}).holdout_gate_stages == [1, 2]


@pytest.mark.slow
def test_es_user_errors(tmp_path):
    result = rlvr("train", "corp", "--config", "cpu-demo", "--max-steps", "3", "--out", str(tmp_path / "x"))
    assert result.returncode != 0 and "unknown flag --max-steps" in result.stderr and "Traceback" not in result.stderr
    result = rlvr("train", "randopt", "--config", "cpu-demo", "--set", "sigmas=[-1]", "--out", str(tmp_path / "y"))
    assert result.returncode != 0 and "sigmas must be positive" in result.stderr and "Traceback" not in result.stderr
    used = tmp_path / "z"
    used.mkdir()
    (used / "train_log.jsonl").write_text("")
    (used / "config.yaml").write_text("population: 3\n")
    for resume in ([], ["--resume"]):  # the same command continues a run, with or without --resume
        result = rlvr("train", "randopt", "--config", "cpu-demo", *resume, "--out", str(used))
        assert result.returncode != 0 and "other settings (" in result.stderr and "population" in result.stderr
        assert "Traceback" not in result.stderr


def test_learn_cpu_es_reuses_a_finished_run_when_only_the_noise_cache_or_workers_differ(tmp_path):
    import importlib.util

    from conftest import ROOT
    from rlvr.harness.run_dir import save_config
    from rlvr.trainers.populations.config import build_es_config

    spec = importlib.util.spec_from_file_location("learn_cpu_es", ROOT / "benchmarks" / "learn_cpu_es.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "randopt"
    out.mkdir()
    save_config(build_es_config("randopt", "cpu-demo", {"population": 8, "out": str(out)}), out)
    (out / "report.json").write_text("{}")
    same = {"population": 8, "out": str(tmp_path / "elsewhere"), "noise_cache_gb": 14, "workers": 2}
    assert script.finished_with(out, build_es_config("randopt", "cpu-demo", same))
    assert not script.finished_with(out, build_es_config("randopt", "cpu-demo", {**same, "population": 9}))
