"""CoRP's hold-out gate (Stage 1 and Stage 2, on data that chose nothing), Stage 2's proposal
scaling, the splits' disjointness, the 1,010-problem ``arith_test1k`` test set, the MDE and the
equal-budget rule of ``benchmarks/learn_cpu_es.py``, and the noise device recorded in specs.
Stages run on a scripted scorer (no model): outcomes are a function of (spec, problem)."""

import importlib.util
import json
import math

import numpy as np
import pytest
import torch
from conftest import ROOT
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError
from rlvr.trainers.populations.config import ESConfig, build_es_config
from rlvr.trainers.populations.corp_ops import (
    KeySpace,
    cloud_stats,
    expected_low_rank_share,
    holdout_gate,
    local_amplitudes,
)
from rlvr.trainers.populations.corp_stage1 import stage1, stage1_holdout_gate
from rlvr.trainers.populations.corp_stage2 import Centre, Stage2Data, stage2, support_halves
from rlvr.trainers.populations.perturb import Component, Perturber, spec_to_json
from rlvr.trainers.populations.scoring import Scored


def _problems(split: str, n: int) -> list[Problem]:
    return [
        Problem(id=f"{split}-{i}", benchmark=split, kind="math", question=f"{split} {i}?", gold={"answer": "1"})
        for i in range(n)
    ]


class ScriptedScorer:
    """``PopulationScorer``'s interface; ``outcome(perturbed, problem)`` decides every verdict.
    The base (empty spec) is right on even-numbered problems only."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.generations = 0
        self.calls: list[tuple[bool, tuple[str, ...]]] = []

    def _correct(self, spec, problem: Problem) -> bool:
        if not spec:
            return int(problem.id.rsplit("-", 1)[1]) % 2 == 0
        return self.outcome(problem)

    def score_many(self, specs, problems):
        problems = list(problems)
        self.generations += len(specs) * len(problems)
        out = []
        for spec in specs:
            self.calls.append((bool(spec), tuple(sorted({p.benchmark for p in problems}))))
            correct = np.array([self._correct(spec, p) for p in problems], dtype=bool)
            out.append(Scored(correct, ["1"] * len(problems), ["ok"] * len(problems), [""] * len(problems)))
        return out

    def score(self, spec, problems):
        return self.score_many([spec], problems)[0]


class NoLog:
    def write(self, event, **fields):
        pass


def _base_or_better(better_on_holdout: bool):
    """Perturbed models are right everywhere on support and probe; on the hold-out split they are
    right everywhere (``better_on_holdout``) or exactly where the base is (a tie)."""

    def outcome(problem: Problem) -> bool:
        if problem.benchmark == "holdout" and not better_on_holdout:
            return int(problem.id.rsplit("-", 1)[1]) % 2 == 0
        return True

    return outcome


def _population(n: int = 6):
    rng = np.random.default_rng(0)
    space = KeySpace()
    seeds = [int(s) for s in rng.choice(2**31, size=n, replace=False)]
    A = np.zeros((n, n))
    for i, seed in enumerate(seeds):
        A[i, space.index(seed, 0.001)] = 0.001
    return space, A, rng.random(n)


def _cfg(**overrides) -> ESConfig:
    settings = dict(
        algorithm="corp",
        q_grid=[0.5],
        beta_grid=[1.0],
        s_grid=[1.0, 2.0],
        eta_grid=[1.0],
        probe_alpha_grid=[1.0],
        rounds=1,
        local_population=4,
        rank=2,
        holdout_size=20,
    )
    return ESConfig(**{**settings, **overrides})


# ---------------------------------------------------------------- the gate rule
def test_holdout_gate_rejects_ties_losses_and_noise_and_accepts_a_reliable_gain():
    current = [True] * 10 + [False] * 10
    assert not holdout_gate(current, current).accepted  # a tie: the bound is exactly 0
    assert holdout_gate(current, current).lcb == 0.0
    worse = [False] * 2 + [True] * 8 + [False] * 10
    assert not holdout_gate(current, worse).accepted
    one_fix = [True] * 10 + [True] + [False] * 9  # +1 of 20: inside the noise at z = 1.645
    assert np.mean(one_fix) > np.mean(current) and not holdout_gate(current, one_fix).accepted
    four_fixes = [True] * 10 + [True] * 4 + [False] * 6
    decision = holdout_gate(current, four_fixes)
    sd = np.std([1] * 4 + [0] * 16, ddof=1)
    assert decision.accepted and decision.lcb == pytest.approx(0.2 - 1.645 * sd / math.sqrt(20))
    assert (decision.fixes, decision.regressions, decision.n) == (4, 0, 20)
    assert not holdout_gate([], []).accepted


# ---------------------------------------------------------------- Stage 1
@pytest.mark.parametrize("better_on_holdout", [False, True])
def test_stage1_merge_that_wins_on_the_probe_is_kept_only_if_it_beats_the_base_on_the_holdout(better_on_holdout):
    cfg = _cfg()
    scorer = ScriptedScorer(_base_or_better(better_on_holdout))
    space, A, rewards = _population()
    probe, holdout = _problems("probe", 16), _problems("holdout", 20)
    one = stage1(cfg, scorer, space, A, rewards, probe, NoLog(), False)
    assert one.choice.probe_accuracy == 1.0 > scorer.score([], probe).accuracy  # chosen on the probe, wins there
    gate = stage1_holdout_gate(cfg, scorer, space, one.choice.amplitudes, holdout)
    decision, kept = gate.decision, gate.amplitudes
    assert decision is not None and decision.accepted is better_on_holdout and gate.kept is better_on_holdout
    assert gate.holdout_correct is not None
    if better_on_holdout:  # 10 fixed, 0 broken of 20
        assert np.array_equal(kept, one.choice.amplitudes) and gate.holdout_correct.all()
    else:  # equal on the hold-out split: rejected, Stage 2 starts from the base
        assert decision.lcb == 0.0 and not kept.any() and gate.holdout_correct.sum() == 10
    assert all(benchmarks == ("holdout",) for perturbed, benchmarks in scorer.calls[-2:])


@pytest.mark.parametrize("better_on_holdout", [False, True])
def test_corp_search_ships_the_stage1_merge_only_through_the_holdout_gate(tmp_path, monkeypatch, better_on_holdout):
    """The whole CoRP search on a scripted scorer: every perturbed model wins on the support and
    the probe; on the hold-out split it ties the base or beats it."""
    import rlvr.trainers.populations.corp as corp
    from rlvr.trainers.populations.loop import SearchRun, Splits

    saved = {}
    monkeypatch.setattr(corp, "save_consolidated", lambda out, spec, *args, **kw: saved.update(spec=spec))
    cfg = _cfg(population=6, sigmas=[0.001], holdout_gate_stages=[1], split_half_splits=2, sketch_dims=16)
    scorer = ScriptedScorer(_base_or_better(better_on_holdout))
    scorer.noise_device, scorer.noise_draws = "cpu", None
    splits = Splits(_problems("support", 12), _problems("probe", 8), _problems("test", 10), _problems("holdout", 20))
    report = corp.search(SearchRun(cfg, scorer, splits, NoLog(), tmp_path, "model", "model", show=False))
    stage1 = report["stage1"]
    assert stage1["probe_accuracy"] == 1.0 > stage1["base_probe_accuracy"] == 0.5
    assert stage1["kept"] is better_on_holdout and stage1["holdout_gate"]["accepted"] is better_on_holdout
    assert stage1["holdout_gate"]["fixes"] == (10 if better_on_holdout else 0)
    shipped = "stage1_merge" if better_on_holdout else "base"
    assert report["test"]["stage1"]["accuracy"] == report["test"][shipped]["accuracy"]
    assert bool(saved["spec"]) is better_on_holdout or report["stage2"]["accepted"] > 0


def test_stage1_is_ungated_only_when_asked_as_released():
    cfg = _cfg(holdout_gate_stages=[2])
    scorer = ScriptedScorer(_base_or_better(False))
    space, A, rewards = _population()
    amplitudes = A[0]
    gate = stage1_holdout_gate(cfg, scorer, space, amplitudes, _problems("holdout", 20))
    assert gate.decision is None and gate.kept and gate.amplitudes is amplitudes and scorer.generations == 0


# ---------------------------------------------------------------- Stage 2
@pytest.mark.parametrize("better_on_holdout", [False, True])
def test_stage2_round_passing_the_authors_gates_needs_the_holdout_too(better_on_holdout):
    cfg = _cfg()
    scorer = ScriptedScorer(_base_or_better(better_on_holdout))
    space, A, rewards = _population()
    cloud = cloud_stats(A, np.full(len(A), 1 / len(A)), cfg.rank)
    selection, gate = _problems("selection", 12), _problems("gate", 12)
    probe, holdout = _problems("probe", 16), _problems("holdout", 20)
    base = [scorer.score([], part).correct for part in (selection, gate, probe, holdout)]
    centre = Centre(np.zeros(len(space)), *base)
    data = Stage2Data(selection, gate, probe, holdout)
    result = stage2(
        cfg, scorer, space, centre, cloud=cloud, sigma=0.001, eta_c=0.001, data=data, log=NoLog(), show=False
    )
    final, rounds = result.centre, result.record()
    (entry,) = rounds["rounds"]
    # selection half, gate half and probe all say "better": the authors' gates accept
    assert entry["accepted_by_authors_gates"] is True and entry["proposals_passing_gate"] >= 1
    assert entry["holdout_gate"]["n"] == 20
    assert entry["accepted"] is better_on_holdout and rounds["accepted"] == int(better_on_holdout)
    if better_on_holdout:
        assert final.amplitudes.any() and final.holdout.all() and entry["holdout_gate"]["lcb"] > 0
    else:
        assert not final.amplitudes.any() and entry["holdout_gate"]["lcb"] == 0.0
    # the hold-out split is scored on its own, for the centre (above) and to gate the round: never
    # for a local candidate, a proposal or the line search
    held = [benchmarks for _, benchmarks in scorer.calls if "holdout" in benchmarks]
    assert held == [("holdout",), ("holdout",)]


def test_the_holdout_gate_is_on_in_every_preset():
    for preset in ("cpu-demo", "paper"):
        cfg = build_es_config("corp", preset, {})
        assert cfg.holdout_gate_stages == [1, 2] and cfg.holdout_size >= 64 and cfg.holdout_z == 1.645
    assert build_es_config("corp", "paper", {}).low_rank_scale == "authors"  # as released
    with pytest.raises(UserError, match="holdout_size >= 2"):
        build_es_config("corp", "cpu-demo", {"holdout_size": 0})
    ungated = build_es_config("corp", "paper", {"holdout_size": 0, "holdout_gate_stages": []})
    assert ungated.holdout_gate_stages == []


# ---------------------------------------------------------------- splits
def test_support_probe_holdout_and_test_are_disjoint_and_the_holdout_chose_nothing():
    from rlvr.trainers.populations.loop import load_splits

    cfg = build_es_config("corp", "cpu-demo", {"test_source": "arith_test1k"})
    splits = load_splits(cfg)
    sizes = (len(splits.support), len(splits.probe), len(splits.holdout), len(splits.test))
    assert sizes == (cfg.support_size, cfg.probe_size, cfg.holdout_size, 1010)
    parts = {
        "support": splits.support,
        "probe": splits.probe,
        "holdout": splits.holdout,
        "test": splits.test,
    }
    questions = {name: {p.question for p in part} for name, part in parts.items()}
    names = list(parts)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not questions[a] & questions[b], (a, b)
    selection, gate = support_halves(splits.support, cfg.split_seed)  # Stage 2 chooses on these and the probe
    assert {p.id for p in selection} | {p.id for p in gate} == {p.id for p in splits.support}
    assert not ({p.id for p in selection} & {p.id for p in gate})
    assert not ({p.id for p in splits.holdout} & ({p.id for p in splits.support} | {p.id for p in splits.probe}))
    with pytest.raises(UserError, match="support and test share"):
        load_splits(build_es_config("corp", "cpu-demo", {"test_source": "arith_train"}))
    with pytest.raises(UserError, match="holdout_size"):
        load_splits(build_es_config("corp", "cpu-demo", {"holdout_size": 300}))


def test_arith_test1k_has_1010_held_out_problems_none_from_training():
    from rlvr.harness.benchmarks.registry import get_benchmark
    from rlvr.harness.benchmarks.sources import resolve_source

    test = resolve_source("arith_test1k").problems
    train = resolve_source("arith_train").problems
    assert len(test) == len({p.id for p in test}) == 1010 >= 1000
    assert not {p.question for p in test} & {p.question for p in train}
    assert {p.question for p in resolve_source("arith").problems} <= {p.question for p in test}
    assert get_benchmark("arith_test1k").policy == "arith" and all(p.gold["policy"] == "arith" for p in test)
    for p in test:  # every gold answer is the arithmetic of its question
        a, op, b = p.question.removeprefix("What is ").removesuffix("?").split()
        assert int(p.gold["answer"]) == {"+": int(a) + int(b), "-": int(a) - int(b), "\u00d7": int(a) * int(b)}[op]
    assert [p.id for p in resolve_source("arith_test1k").problems] == [p.id for p in test]  # a fixed order


# ---------------------------------------------------------------- Stage-2 proposals
def _cloud_with_scale(scale: float):
    rng = np.random.default_rng(1)
    A = np.zeros((10, 10))
    A[:, :10] = rng.standard_normal((10, 10)) * scale * np.linspace(3, 0.3, 10)
    return cloud_stats(A, np.full(10, 0.1), rank=4)


@pytest.mark.parametrize("isotropic_share", [0.2, 0.5, 0.9])
def test_trace_scaled_proposals_give_the_low_rank_part_its_stated_share(isotropic_share):
    cloud = _cloud_with_scale(1e-3)
    space = KeySpace()
    for seed in range(10):
        space.index(seed, 0.001)
    P, sigma = 2000, 0.002
    rng = np.random.default_rng(7)
    seeds = [int(s) for s in rng.choice(2**31, size=P, replace=False)]
    vectors = np.stack(
        local_amplitudes(space, seeds, sigma, isotropic_share, cloud, rng.standard_normal((P, 4)), "trace")
    )
    basis = cloud.directions  # orthonormal rows spanning the low-rank subspace
    low = np.square(vectors[:, :10] @ basis.T).sum(axis=1).mean()
    rest = np.square(vectors).sum(axis=1).mean() - low
    assert low / (low + rest) == pytest.approx(1 - isotropic_share, abs=0.025)
    assert low + rest == pytest.approx(sigma**2, rel=0.05)  # the proposal's scale is σ
    assert expected_low_rank_share(cloud, isotropic_share, "trace") == pytest.approx(1 - isotropic_share)
    # the authors' form at the same σ: a low-rank part in amplitude² units, ~λ small
    authors = expected_low_rank_share(cloud, isotropic_share, "authors")
    low_authors = (1 - isotropic_share) * cloud.eigenvalues.sum()
    assert authors < 1e-4 and authors == pytest.approx(low_authors / (isotropic_share + low_authors))


def test_authors_scaled_proposals_are_as_released():
    cloud = _cloud_with_scale(1e-3)
    space = KeySpace()
    for seed in range(10):
        space.index(seed, 0.001)
    normals = np.random.default_rng(2).standard_normal((1, 4))
    (vector,) = local_amplitudes(space, [99], 0.002, 0.5, cloud, normals, "authors")
    expected = 0.002 * math.sqrt(0.5) * np.sqrt(cloud.eigenvalues) * normals[0]
    assert np.allclose(vector[:10], expected @ cloud.directions)
    assert vector[space.index(99, 0.002 * math.sqrt(0.5))] == pytest.approx(0.002 * math.sqrt(0.5))
    with pytest.raises(UserError, match="low_rank_scale"):
        build_es_config("corp", "cpu-demo", {"low_rank_scale": "both"})


# ---------------------------------------------------------------- the device noise was drawn on
def test_specs_record_their_noise_device_and_refuse_another_in_one_line():
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 4)
    perturber = Perturber(model, "float32")
    assert perturber.noise_device == "cpu"
    spec = [Component(3, 0.01, 2.0)]
    data = json.loads(json.dumps(spec_to_json(spec, "toy", "float32", noise_device=perturber.noise_device)))
    assert data["noise_device"] == "cpu"
    perturber.apply_json(data)
    applied = model.weight.detach().clone()
    perturber.restore()
    perturber.apply(spec)
    assert torch.equal(applied, model.weight)
    for bad, message in (({"noise_device": "cuda"}, "drawn on cuda"), ({"noise_dtype": "bfloat16"}, "bfloat16")):
        with pytest.raises(UserError, match=message) as error:
            perturber.apply_json({**data, **bad})
        assert "\n" not in str(error.value)


# ---------------------------------------------------------------- learn_cpu_es: MDE, equal budget, table
@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("learn_cpu_es", ROOT / "benchmarks" / "learn_cpu_es.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mde_closed_form(script):
    factor = 1.959963984540054 + 0.8416212335729143
    assert script.mde(110, 10) == pytest.approx(factor * math.sqrt(10) / 110)  # the 110-problem test: ~8 points
    assert script.mde(110, 10) == pytest.approx(0.0805, abs=1e-4)
    assert script.mde(1010, 92) == pytest.approx(factor * math.sqrt(92) / 1010)  # same discordance rate: ~2.7
    assert script.mde(1000, 90, alpha=0.05, power=0.5) == pytest.approx(1.959963984540054 * math.sqrt(90) / 1000)
    assert script.mde(110, 0) is None and script.mde(0, 0) is None


def test_the_table_shows_the_command_that_writes_it_in_one_go(script):
    argv = ["--equal-budget", "--only", "randopt", "--set", "sigmas=[0.0005, 0.001]", "--resume", "--only=corp"]
    shown = "python benchmarks/learn_cpu_es.py --equal-budget --set 'sigmas=[0.0005, 0.001]'"
    assert script.shown_command(argv) == shown


def test_equal_budget_population(script):
    assert script.equal_budget_population(23136, 192) == 119  # (119 + 1)·192 = 23040 <= 23136 < 23232
    assert (script.equal_budget_population(23136, 192) + 1) * 192 <= 23136


def test_table_shows_the_mde_and_head_to_head_beside_every_comparison(script):
    results = ROOT / "results" / "learn_cpu_es_500"
    randopt = json.loads((results / "randopt" / "report.json").read_text())
    corp = json.loads((results / "corp" / "report.json").read_text())
    samples = {name: script._read_samples(results / name / "test_samples.jsonl") for name in ("randopt", "corp")}
    versus = script.head_to_head(samples["randopt"], samples["corp"])
    assert [row["randopt"] for row in versus] == ["top1", "ensemble_top5", "ensemble_top9"]
    text = script.render(randopt, corp, "python benchmarks/learn_cpu_es.py", versus)
    # RandOpt top-1: +4.5 points, 5 fixed / 0 broken of 110 -> MDE 2.80·√5/110 = 5.7 points
    assert "| RandOpt top1 (N=500) | 53.6 [44.5, 62.7] | +4.5 [+0.9, +8.2] | 5 / 0 | 5.7 |" in text
    # CoRP: +3.6, 7 fixed / 3 broken -> MDE 2.80·√10/110 = 8.1 points: the test cannot resolve it
    assert "| **CoRP** (N=50) | 52.7 [43.6, 61.8] | +3.6 [-1.8, +9.1] | 7 / 3 | 8.1 |" in text
    top1 = next(row for row in versus if row["randopt"] == "top1")["difference"]
    assert "| CoRP − RandOpt top1 | -0.9 [-7.3, +4.5] | 5 / 6 | 8.4 |" in text
    assert top1["value"] == pytest.approx(-1 / 110, abs=1e-6)
    assert "Stage 1 gated on the probe it was chosen on (kept)" in text  # this run predates the hold-out gate
    assert "held-out test `arith`: 110 problems" in text


def test_the_readme_equal_budget_command_resolves_to_the_papers_sigmas_and_the_1k_test(script):
    import shlex

    from doc_pages import doc_text
    from rlvr.harness.config import parse_overrides
    from rlvr.trainers.populations.loop import load_splits

    text = doc_text()
    command = "--equal-budget" + text.split("python benchmarks/learn_cpu_es.py --equal-budget", 1)[1].split("\n\n")[0]
    args = script.build_parser().parse_args(shlex.split(command.replace("\\\n", " ")))
    assert args.equal_budget and args.resume and args.corp_population == 50
    shared = parse_overrides(args.overrides)
    corp = build_es_config("corp", "cpu-demo", {**shared, "population": args.corp_population})
    randopt = build_es_config("randopt", "cpu-demo", {**shared, "population": 2})
    splits = load_splits(corp)  # support + probe + hold-out fit the training split, disjoint from the test
    assert len(splits.test) == 1010 and len(splits.holdout) == corp.holdout_size > 0
    assert corp.sigmas == randopt.sigmas == [0.0005, 0.001, 0.002]
    assert corp.support_size == randopt.support_size and corp.holdout_gate_stages == [1, 2]


@pytest.mark.slow
def test_equal_budget_comparison_runs_in_parts_end_to_end(tmp_path, tiny_model, script):
    """The README's equal-budget path at toy scale (about 2 minutes on 2 busy cores)."""
    results, board = tmp_path / "results", tmp_path / "board"
    toy = [
        "--equal-budget",
        "--corp-population=3",
        "--top-k=1,2",
        f"--results={results}",
        f"--board={board}",
        *[
            f"--set={setting}"
            for setting in (
                "backend=hf",
                f"model={tiny_model}",
                "support_size=4",
                "probe_size=4",
                "holdout_size=4",
                "test_limit=8",
                "test_source=arith_test1k",
                "sigmas=[0.0005, 0.001, 0.002]",
                "q_grid=[0.5]",
                "beta_grid=[1.0]",
                "s_grid=[1.0, 2.0]",
                "rounds=1",
                "local_population=2",
                "eta_grid=[1.0]",
                "probe_alpha_grid=[1.0]",
            )
        ],
    ]
    with pytest.raises(UserError, match="run the CoRP part first"):
        script.main([*toy, "--only=randopt", "--resume"])
    assert script.main([*toy, "--only", "corp", "--resume"]) == 0 and not (board / "README.md").exists()
    assert script.main([*toy, "--only", "randopt", "--resume"]) == 0
    corp = json.loads((results / "corp" / "report.json").read_text())
    randopt = json.loads((results / "randopt" / "report.json").read_text())
    passes = corp["search_generations"]
    assert randopt["population"] == passes // 4 - 1 and passes - 4 < randopt["search_generations"] <= passes
    assert corp["splits"]["holdout"] == 4 and corp["splits"]["test_source"] == "arith_test1k"
    table = (board / "README.md").read_text()
    assert "MDE, points" in table and "CoRP − RandOpt top1" in table and "Equal budget:" in table
    assert "--only" not in table
    assert json.loads((board / "results.json").read_text())["equal_budget"]["corp_passes"] == passes
    before = (results / "corp" / "report.json").read_text()
    assert script.main([*toy, "--resume"]) == 0  # both finished: reused, table written again
    assert (results / "corp" / "report.json").read_text() == before
