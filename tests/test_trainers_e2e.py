"""The policy-gradient trainers' mechanics on a tiny random model with the real tokenizer (every
algorithm two steps, the log vocabulary, checkpoints, exact resume across a stage switch, sinks)
and one end-to-end run on the embedded model through ``rlvr train``, whose checkpoint
``rlvr eval`` loads."""

import json
import shutil
import sys
import types

import pytest
import torch
from eval_helpers import rlvr
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.policy_gradient.losses import MISMATCH_METRICS
from rlvr.trainers.runtime.checkpoint import STATE_FILE, load_trainer_state
from rlvr.trainers.runtime.telemetry import read_log
from safetensors.torch import load_file

LOG_KEYS = {
    "step",
    "reward_mean",
    "accuracy",
    "zero_variance_fraction",
    "effective_batch",
    "generations",
    "generations_total",
    "length_correct",
    "length_incorrect",
    "truncation_rate",
    "clip_low_fraction",
    "clip_high_fraction",
    "kl",
    "entropy",
    "grad_norm",
    "tokens_per_s",
    "time_generate",
    "time_score",
    "time_learn",
    "time_sync",
    "reflection_drgrpo",
    "reflection_recheck",
    "reflection_hesitation",
    "reflection_exploration",
    "stage",
    "lr",
    "unverifiable",
    "masked_unverifiable",
    *MISMATCH_METRICS,
}
ALGORITHMS = ("grpo", "drgrpo", "dapo", "srpo")
TIMINGS = {"time_generate", "time_score", "time_learn", "time_sync", "time_probe", "tokens_per_s"}


def _tiny(algorithm, model, out, steps, **extra):
    """Two stages, the switch after step 1 (so a resume from step 2 restarts inside the second)."""
    model, data = model
    stages = [
        {"name": "math", "sources": [data], "until_step": 1},
        {"name": "mixed", "sources": [data, "pyfunc_train"]},
    ]
    values = {
        "model": model,
        "prompts_per_step": 2,
        "group_size": 4,
        "max_tokens": 8,
        "overlong_cache": 4,
        "gen_prompts": 4,
        "micro_batch_size": 8,
        "minibatch_size": 4,
        "mu": 2,
        "max_gen_batches": 4,
        "save_every": 0,
        "save_optimizer": False,
        "max_steps": steps,
        "out": str(out),
        "lr": 1e-2,
        "stages": stages,
        "backend": "hf",  # trainer mechanics; the vLLM rollout path has its own tests (test_vllm_trainers.py)
        **extra,
    }
    return build_config(algorithm, "cpu-demo", values)


@pytest.fixture(scope="module")
def tiny(tiny_model, digits_source):
    return tiny_model, digits_source


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny):
    root = tmp_path_factory.mktemp("train")
    return {a: run_training(_tiny(a, tiny, root / a, 2), progress=False) for a in ALGORITHMS}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_steps_log_every_health_metric_and_save_a_checkpoint(runs, algorithm):
    folder = runs[algorithm]
    log = read_log(folder)
    assert [line["step"] for line in log] == [1, 2]
    for line in log:
        assert LOG_KEYS <= set(line), LOG_KEYS - set(line)
        assert all(line[k] is None for k in MISMATCH_METRICS)  # hf: the sampler is the learner
    assert [line["stage"] for line in log] == ["math", "mixed"]
    final = folder / "checkpoint-000002"
    assert (final / "config.json").exists() and (final / "model.safetensors").exists()
    assert "optimizer" not in load_trainer_state(final)  # save_optimizer: false keeps checkpoints small
    assert f"algorithm: {algorithm}" in (folder / "config.yaml").read_text()
    if algorithm == "dapo":
        assert all(line["effective_batch"] <= 4 for line in log) and "selection_generation_batches" in log[0]


def test_defining_settings_of_each_algorithm():
    settings = {a: build_config(a, "cpu-demo", {}) for a in ALGORITHMS}
    grpo, drgrpo, dapo, srpo = (settings[a] for a in ALGORITHMS)
    assert (grpo.advantage, grpo.loss_agg, grpo.beta) == ("grpo", "seq_mean_token_mean", 0.04)
    assert (drgrpo.advantage, drgrpo.loss_agg, drgrpo.overlong) == ("drgrpo", "seq_mean_token_sum_norm", "zero")
    assert (dapo.loss_agg, dapo.selection, dapo.eps_high, dapo.reward_wrong) == ("token_mean", "dynamic", 0.28, -1.0)
    assert (srpo.selection, srpo.overlong, srpo.loss_agg) == ("history", "mask", "token_mean")


#: Resume across a stage switch (~15 s a run: grpo's KL reference must be the base model again
#: after a resume) runs in the slow suite for every algorithm; the default suite's exact resume
#: (the srpo plateau test below) restarts inside the first stage
RESUMED = [pytest.param(a, marks=pytest.mark.slow) for a in ("grpo", "drgrpo", "dapo", "srpo")]


@pytest.mark.parametrize("algorithm", RESUMED)
def test_resume_after_a_stage_switch_is_exact(tmp_path, tiny, algorithm, capsys):
    keep = {"save_optimizer": True}
    straight = run_training(_tiny(algorithm, tiny, tmp_path / "straight", 4, **keep), progress=False)
    run_training(_tiny(algorithm, tiny, tmp_path / "split", 2, **keep), progress=False)
    assert load_trainer_state(tmp_path / "split" / "checkpoint-000002")["curriculum"]["index"] == 1
    capsys.readouterr()
    resumed = run_training(_tiny(algorithm, tiny, tmp_path / "split", 4, **keep), resume=True, progress=False)
    assert f"resuming {tmp_path / 'split'} from checkpoint-000002: 2 steps done, 2 to go" in capsys.readouterr().out
    a = load_file(str(straight / "checkpoint-000004" / "model.safetensors"))
    b = load_file(str(resumed / "checkpoint-000004" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda log: [{k: v for k, v in line.items() if k not in TIMINGS} for line in log]  # noqa: E731
    assert strip(read_log(straight)) == strip(read_log(resumed))
    assert [line["stage"] for line in read_log(resumed)] == ["math", "mixed", "mixed", "mixed"]
    initial = load_file(str(tmp_path / "split" / "checkpoint-000002" / "model.safetensors"))
    assert not all(torch.equal(initial[k], b[k]) for k in b)  # steps 3-4 moved the weights
    shutil.rmtree(tmp_path)  # passed: free its checkpoints now (the suite stays under 1 GB of temporary disk)


def test_resume_needs_the_optimizer_state(tmp_path, tiny):
    run_training(_tiny("drgrpo", tiny, tmp_path / "run", 1), progress=False)
    assert (tmp_path / "run" / "checkpoint-000001" / STATE_FILE).exists()
    with pytest.raises(UserError, match="save_optimizer"):
        run_training(_tiny("drgrpo", tiny, tmp_path / "run", 2), resume=True, progress=False)


def test_tensorboard_and_wandb_sinks(tmp_path, monkeypatch, tiny):
    pytest.importorskip("tensorboard")
    logged = []
    fake = types.SimpleNamespace(
        init=lambda **kw: types.SimpleNamespace(
            log=lambda data, step: logged.append((step, data)), finish=lambda: logged.append("finish")
        )
    )
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = run_training(
        _tiny("drgrpo", tiny, tmp_path / "sinks", 1, log_to=["jsonl", "tensorboard", "wandb"]), progress=False
    )
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert logged[0][0] == 1 and "reward_mean" in logged[0][1] and logged[-1] == "finish"


def test_changing_a_defining_setting_is_logged(tmp_path, tiny, capsys):
    run_training(_tiny("drgrpo", tiny, tmp_path / "variant", 1, loss_agg="token_mean"), progress=False)
    err = capsys.readouterr().err
    assert (
        "warning: drgrpo run with a defining setting changed (loss_agg: 'seq_mean_token_sum_norm' -> 'token_mean')"
        in err
    )


@pytest.mark.slow
def test_embedded_model_end_to_end_through_the_command_line(tmp_path):
    """The README's own example (``--set lr=1e-5``: a string to YAML) trains the embedded model for
    two steps; ``rlvr eval`` grades the checkpoint with the same verifier."""
    out = tmp_path / "drgrpo"
    result = rlvr(
        "train",
        "drgrpo",
        "--config",
        "cpu-demo",
        "--max-steps",
        "2",
        "--out",
        str(out),
        "--set",
        "lr=1e-5",
        "--set",
        "prompts_per_step=2",
        "--set",
        "group_size=2",
        "--set",
        "max_tokens=8",
        "--set",
        "save_optimizer=false",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert [line["step"] for line in read_log(out)] == [1, 2] and "step 2/2" in result.stdout
    evaluated = rlvr(
        "eval",
        "--model",
        str(out / "checkpoint-000002"),
        "--benchmarks",
        "arith",
        "--limit",
        "2",
        "--max-tokens",
        "8",
        "--template",
        "chat",
        "--no-progress",
        "--out",
        str(tmp_path / "eval"),
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["model"]["name"] == "checkpoint-000002" and summary["benchmarks"]["arith"]["n_samples"] == 2


def test_user_errors(tmp_path):
    with pytest.raises(UserError, match="no preset 'nope'"):
        build_config("drgrpo", "nope", {})
    with pytest.raises(UserError, match="unknown training setting"):
        build_config("drgrpo", "cpu-demo", {"learning_rate": 1})
    with pytest.raises(UserError, match="group_size must be at least 2"):
        build_config("drgrpo", "cpu-demo", {"group_size": 1})
    result = rlvr("train", "drgrpo", "--config", "cpu-demo", "--out", str(tmp_path / "none"), "--resume")
    assert result.returncode == 2 and "no checkpoint" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_run_directory_matches_saved_settings(tmp_path):
    from rlvr.harness.run_dir import changed_settings, save_config

    cfg = build_config("drgrpo", "cpu-demo", {"out": str(tmp_path / "a")})
    assert changed_settings(tmp_path, cfg) == []  # nothing saved, nothing to compare
    save_config(cfg, tmp_path)
    assert changed_settings(tmp_path, build_config("drgrpo", "cpu-demo", {"out": str(tmp_path / "b")})) == []
    other = build_config("drgrpo", "cpu-demo", {"lr": 1e-5, "max_steps": 7})
    assert changed_settings(tmp_path, other) == ["lr"]  # max_steps may change on resume
    longer = build_config("drgrpo", "cpu-demo", {"max_steps": 7, "save_every": 3, "log_to": ["jsonl", "tensorboard"]})
    assert changed_settings(tmp_path, longer) == []


@pytest.mark.slow
def test_srpo_plateau_reads_the_probe_in_the_loop_and_resumes_exactly(tmp_path, tiny):
    """Stage 1 reads a 2-prompt probe after every step; with plateau_delta 2 the second reading
    ends it, so step 3 runs in stage 2 — also when the run is resumed from step 2, whose
    checkpoint carries the readings. Probe samples are counted apart from training generations."""
    _, data = tiny
    stages = [
        {"name": "math", "sources": [data], "plateau_window": 1, "plateau_delta": 2.0, "probe_size": 2},
        {"name": "mixed", "sources": [data, "pyfunc_train"]},
    ]
    keep = {"save_optimizer": True, "stages": stages}
    straight = run_training(_tiny("srpo", tiny, tmp_path / "straight", 3, **keep), progress=False)
    log = read_log(straight)
    assert [line["stage"] for line in log] == ["math", "math", "mixed"]
    assert [line["probe_generations"] for line in log] == [2 * 4, 2 * 4, 0]
    assert all(0.0 <= line["probe_reward"] <= 1.0 for line in log[:2]) and log[2]["probe_reward"] is None
    assert all(line["generations"] == 2 * 4 for line in log)  # the probe's samples are not training's
    switch = load_trainer_state(straight / "checkpoint-000003")["curriculum"]["switches"][0]
    assert switch["step"] == 3 and "1 probe readings" in switch["reason"]
    run_training(_tiny("srpo", tiny, tmp_path / "split", 2, **keep), progress=False)
    assert len(load_trainer_state(tmp_path / "split" / "checkpoint-000002")["curriculum"]["probe_rewards"]) == 2
    resumed = run_training(_tiny("srpo", tiny, tmp_path / "split", 3, **keep), resume=True, progress=False)
    strip = lambda log: [{k: v for k, v in line.items() if k not in TIMINGS} for line in log]  # noqa: E731
    assert strip(read_log(straight)) == strip(read_log(resumed))
    a = load_file(str(straight / "checkpoint-000003" / "model.safetensors"))
    b = load_file(str(resumed / "checkpoint-000003" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
