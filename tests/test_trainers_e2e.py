"""Every trainer for two steps on the embedded model (CPU), the log vocabulary, checkpoints that
`rlvr eval` loads, exact resume (N steps == N/2 + resume + N/2), sinks and user errors."""
import json
import sys
import types

import pytest
import torch
from eval_helpers import rlvr
from safetensors.torch import load_file

from harness.errors import UserError
from trainers.config import build_config
from trainers.loop import run_training
from trainers.telemetry import read_log

TINY = ["--set", "prompts_per_step=2", "--set", "group_size=2", "--set", "max_tokens=8", "--set", "micro_batch_size=4", "--set", "save_every=0"]
LOG_KEYS = {"step", "reward_mean", "accuracy", "zero_variance_fraction", "effective_batch", "generations", "generations_total", "length_correct",
            "length_incorrect", "truncation_rate", "clip_low_fraction", "clip_high_fraction", "kl", "entropy", "grad_norm", "tokens_per_s",
            "time_generate", "time_score", "time_learn", "time_sync", "reflection_drgrpo", "reflection_recheck", "reflection_hesitation",
            "reflection_exploration", "stage", "lr", "unverifiable", "masked_unverifiable"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    out = {}
    for algorithm in ("grpo", "drgrpo", "dapo", "srpo"):
        extra = ["--set", "stages=[{name: math, sources: [arith_train], until_step: 1}, {name: code, sources: [arith_train, pyfunc_train]}]"] if algorithm == "srpo" else []
        result = rlvr("train", algorithm, "--config", "cpu-demo", "--max-steps", "2", "--out", str(root / algorithm), *TINY, *extra)
        out[algorithm] = (root / algorithm, result)
    return out


@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo", "dapo", "srpo"])
def test_two_steps_log_every_health_metric_and_save_a_checkpoint(runs, algorithm):
    folder, result = runs[algorithm]
    assert result.returncode == 0, result.stderr[-3000:]
    log = read_log(folder)
    assert [line["step"] for line in log] == [1, 2]
    for line in log:
        assert LOG_KEYS <= set(line), LOG_KEYS - set(line)
    assert (folder / "checkpoint-000002" / "config.json").exists() and (folder / "checkpoint-000002" / "trainer_state.pt").exists()
    config = (folder / "config.yaml").read_text()
    assert f"algorithm: {algorithm}" in config
    if algorithm == "srpo":
        assert [line["stage"] for line in log] == ["math", "code"]
    if algorithm == "dapo":
        assert all(line["effective_batch"] <= 2 for line in log) and "selection_generation_batches" in log[0]


def test_defining_settings_of_each_algorithm(runs):
    import yaml

    settings = {a: yaml.safe_load((runs[a][0] / "config.yaml").read_text()) for a in runs}
    assert (settings["grpo"]["advantage"], settings["grpo"]["loss_agg"], settings["grpo"]["beta"]) == ("grpo", "seq_mean_token_mean", 0.04)
    assert (settings["drgrpo"]["advantage"], settings["drgrpo"]["loss_agg"], settings["drgrpo"]["overlong"]) == ("drgrpo", "seq_mean_token_sum_norm", "zero")
    assert (settings["dapo"]["loss_agg"], settings["dapo"]["selection"], settings["dapo"]["eps_high"], settings["dapo"]["reward_wrong"]) == ("token_mean", "dynamic", 0.28, -1.0)
    assert (settings["srpo"]["selection"], settings["srpo"]["overlong"], settings["srpo"]["loss_agg"]) == ("history", "mask", "token_mean")


def test_checkpoint_evaluates_with_rlvr_eval(runs, tmp_path):
    folder, _ = runs["drgrpo"]
    result = rlvr("eval", "--model", str(folder / "checkpoint-000002"), "--benchmarks", "arith", "--limit", "2", "--max-tokens", "8", "--template", "chat",
                  "--no-progress", "--out", str(tmp_path / "eval"))
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["model"]["name"] == "checkpoint-000002" and summary["benchmarks"]["arith"]["n_samples"] == 2


def _tiny(out, steps, **extra):
    values = {"prompts_per_step": 2, "group_size": 4, "max_tokens": 12, "micro_batch_size": 2, "minibatch_size": 2, "mu": 2, "save_every": 0,
              "max_steps": steps, "out": str(out), "lr": 1e-4, "overlong": "none",  # every row trains, so steps 3-4 must move the weights
              "stages": [{"name": "math", "sources": ["arith_train"], "until_step": 2}, {"name": "mixed", "sources": ["arith_train", "pyfunc_train"]}], **extra}
    return build_config("srpo", "cpu-demo", values)


def test_resume_is_exact(tmp_path):
    straight = run_training(_tiny(tmp_path / "straight", 4), progress=False)
    run_training(_tiny(tmp_path / "split", 2), progress=False)
    resumed = run_training(_tiny(tmp_path / "split", 4), resume=True, progress=False)
    a = load_file(str(straight / "checkpoint-000004" / "model.safetensors"))
    b = load_file(str(resumed / "checkpoint-000004" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ignore = {"time_generate", "time_score", "time_learn", "time_sync", "tokens_per_s"}
    strip = lambda log: [{k: v for k, v in line.items() if k not in ignore} for line in log]  # noqa: E731
    assert strip(read_log(straight)) == strip(read_log(resumed))
    assert [line["stage"] for line in read_log(resumed)] == ["math", "math", "mixed", "mixed"]
    initial = load_file(str(tmp_path / "split" / "checkpoint-000002" / "model.safetensors"))
    assert not all(torch.equal(initial[k], b[k]) for k in b)  # it did learn something


def test_tensorboard_and_wandb_sinks(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    logged = []
    fake = types.SimpleNamespace(init=lambda **kw: types.SimpleNamespace(log=lambda data, step: logged.append((step, data)), finish=lambda: logged.append("finish")))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = run_training(_tiny(tmp_path / "sinks", 1, log_to=["jsonl", "tensorboard", "wandb"]), progress=False)
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert logged[0][0] == 1 and "reward_mean" in logged[0][1] and logged[-1] == "finish"


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
    from trainers.config import save_settings, settings_differing_from_saved

    cfg = build_config("drgrpo", "cpu-demo", {"out": str(tmp_path / "a")})
    assert settings_differing_from_saved(tmp_path, cfg) == [f for f in sorted(vars(cfg)) if f != "out" and getattr(cfg, f) is not None]
    save_settings(tmp_path, cfg)
    assert settings_differing_from_saved(tmp_path, build_config("drgrpo", "cpu-demo", {"out": str(tmp_path / "b")})) == []
    other = build_config("drgrpo", "cpu-demo", {"lr": 1e-5, "max_steps": 7})
    assert settings_differing_from_saved(tmp_path, other) == ["lr", "max_steps"]
    assert settings_differing_from_saved(tmp_path, other, ("out", "max_steps")) == ["lr"]
