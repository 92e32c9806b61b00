"""``rlvr train ALGO --config PRESET --plan``: the derived schedule of every preset, checked
against what each paper states (``fixtures/paper_hyperparameters.yaml``), the optimizer-step
count checked against the update itself, the device estimate against transformers' own parameter
count, and nothing loaded (no model, no data, no hub)."""

import json
import math
import types
from pathlib import Path

import pytest
import torch
import yaml
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.config import ALGORITHMS, build_config, preset_names
from rlvr.trainers.policy_gradient.plan import (
    device_estimate,
    format_plan,
    parameter_count,
    params_from_config,
    training_plan,
)
from rlvr.trainers.policy_gradient.update import Batch, policy_update

from rlvr.cli.main import main

TABLE = yaml.safe_load((Path(__file__).parent / "fixtures" / "paper_hyperparameters.yaml").read_text())
PRESETS = [(a, p) for a in ALGORITHMS for p in preset_names(a)]
#: optimizer steps per rollout of every shipped preset (minibatch_size counts rows)
OPTIMIZER_STEPS = {
    ("grpo", "paper"): 1,  # DeepSeekMath §4.2: a single update per exploration stage
    ("grpo", "paper-gspo"): 4,  # GSPO §5.1: four mini-batches per rollout
    ("drgrpo", "paper"): 8,  # oat: 1024 rollouts / train batch 128
    ("drgrpo", "paper-r1"): 8,
    ("dapo", "paper"): 16,  # DAPO §4.1: 8192 rows / mini-batch 512
    ("srpo", "paper"): 1,  # not published: our choice
    **{(a, "cpu-demo"): 1 for a in ALGORITHMS},
}


def _at(plan: dict, key: str):
    value = plan
    for part in key.split("."):
        value = value[part]
    return value


def _plan(algorithm: str, preset: str, **overrides) -> dict:
    return training_plan(build_config(algorithm, preset, overrides, check_data=False), preset)


def test_the_table_covers_every_paper_preset():
    assert sorted(TABLE) == sorted(f"{a}/{p}" for a, p in PRESETS if p.startswith("paper"))
    for name, entry in TABLE.items():
        for row in entry["rows"]:
            assert row["source"], (name, row)
            if row["value"] == "unknown":
                assert row.get("preset_note"), f"{name} {row['key']}: say what the preset uses instead"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_paper_preset_plans_what_its_paper_states(name):
    algorithm, preset = name.split("/")
    plan = _plan(algorithm, preset)
    wrong = []
    for row in TABLE[name]["rows"]:
        if row.get("modelled", True) is False:
            continue
        value = _at(plan, row["key"])  # every modelled row names a field of the plan
        if row["value"] != "unknown" and value != row["value"]:
            wrong.append(f"{row['key']}: preset {value!r}, published {row['value']!r} ({row['source']})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("algorithm", "preset"), PRESETS)
def test_optimizer_steps_per_rollout_of_every_preset(algorithm, preset):
    plan = _plan(algorithm, preset)
    update = plan["update"]
    assert update["optimizer_steps_per_rollout"] == OPTIMIZER_STEPS[(algorithm, preset)]
    assert update["optimizer_steps_per_rollout"] == update["mu"] * math.ceil(update["rows"] / update["minibatch_size"])
    assert update["rows"] == plan["rollout"]["prompts_per_step"] * plan["rollout"]["group_size"]
    text = format_plan(plan)
    assert f"= {update['optimizer_steps_per_rollout']} optimizer step(s) per rollout" in text
    assert "ESTIMATE" in text


def test_dapo_paper_schedule():
    plan = _plan("dapo", "paper")
    assert plan["rollout"]["samples_per_step"] == 8192 and plan["update"]["minibatch_size"] == 512
    assert plan["rollout"]["gen_samples_per_batch"] == 1536 * 16
    assert plan["rollout"]["max_samples_generated"] == 1536 * 16 * 10
    assert plan["update"]["micro_batches_per_optimizer_step"] == 512
    assert plan["update"]["max_tokens_per_step"] == 8192 * 20480
    assert plan["optimizer"]["schedule"].startswith("linear warm-up over 20 rollout steps")
    assert (plan["precision"]["master_dtype"], plan["precision"]["compute_dtype"]) == ("float32", "bfloat16")
    assert "Σ|o_i|" in plan["loss"]["divides_by"]


class _Toy(torch.nn.Module):
    """An HF-shaped causal LM small enough to run the update in milliseconds."""

    def __init__(self, vocab=11):
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(vocab, 8), torch.nn.Linear(8, vocab)

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.head

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0):
        hidden = self.embed(input_ids)  # the head sees the kept positions only, as in transformers
        return types.SimpleNamespace(logits=self.head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden))


@pytest.mark.parametrize(("prompts", "group", "minibatch", "mu", "micro"), [(3, 4, 5, 2, 2), (2, 8, None, 1, 3)])
def test_the_plan_counts_the_optimizer_steps_the_update_takes(prompts, group, minibatch, mu, micro):
    cfg = build_config(
        "drgrpo",
        "cpu-demo",
        {"prompts_per_step": prompts, "group_size": group, "minibatch_size": minibatch, "mu": mu}
        | {"micro_batch_size": micro},
    )
    rows = prompts * group
    torch.manual_seed(0)
    ids = torch.randint(0, 11, (rows, 6))
    completion = torch.zeros(rows, 6)
    completion[:, 3:] = 1
    batch = Batch(ids, torch.ones_like(ids), completion, torch.randn(rows))
    batch.old_logp = torch.zeros(rows, 6)
    model = _Toy()
    steps = policy_update(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batch, cfg)["optimizer_steps"]
    assert steps == training_plan(cfg)["update"]["optimizer_steps_per_rollout"]


def test_plan_on_the_command_line_loads_nothing(monkeypatch, tmp_path, capsys):
    import rlvr.harness.backends.hf
    import rlvr.harness.models

    def refuse(*_, **__):
        raise AssertionError("--plan loaded something")

    monkeypatch.setattr(rlvr.harness.backends.hf, "load_model", refuse)
    monkeypatch.setattr(rlvr.harness.models, "resolve_model", refuse)
    monkeypatch.setattr(rlvr.harness.models, "embedded_model_dir", refuse)
    monkeypatch.chdir(tmp_path)  # the paper's data files are not here: the plan says so, no error
    assert main(["train", "dapo", "--config", "paper", "--plan"]) == 0
    text = capsys.readouterr().out
    assert "= 16 optimizer step(s) per rollout" in text and "not found here" in text
    assert "compute bfloat16 (autocast)" in text and "ESTIMATE" in text
    assert main(["train", "dapo", "--config", "paper", "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan == json.loads(json.dumps(_plan("dapo", "paper")))
    assert main(["train", "dapo", "--config", "paper"]) == 2  # a real run still needs its data
    assert "data/dapo_math_17k.jsonl, which does not exist" in capsys.readouterr().err


def test_plan_of_a_yaml_file_and_of_set_flags(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text("prompts_per_step: 6\ngroup_size: 8\nminibatch_size: 16\nmu: 2\nwarmup_steps: 5\n")
    assert main(["train", "grpo", "--config", str(path), "--plan", "--set", "micro_batch_size=4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["update"]["optimizer_steps_per_rollout"] == 2 * 3  # mu 2 x ceil(48 / 16)
    assert plan["update"]["micro_batches_per_optimizer_step"] == 4
    assert plan["config"] == str(path) and plan["loss"]["beta"] == 0.04  # GRPO's defining KL


def test_plan_flags_are_refused_where_they_mean_nothing(capsys):
    assert main(["train", "randopt", "--config", "cpu-demo", "--plan"]) == 2
    assert "--plan is for the policy-gradient trainers" in capsys.readouterr().err
    assert main(["train", "dapo", "--config", "paper", "--json"]) == 2
    assert "--json goes with --plan" in capsys.readouterr().err


# --- the device estimate -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("Qwen/Qwen2.5-32B", 32e9),
        ("Qwen/Qwen2.5-Math-1.5B", 1.5e9),
        ("deepseek-ai/deepseek-math-7b-instruct", 7e9),
        ("meta-llama/Llama-3.2-3B", 3e9),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", 135e6),
        ("some/model", None),
    ],
)
def test_parameters_from_the_name(name, count):
    assert parameter_count(name)[0] == count


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("tie", [False, True])
def test_parameters_from_a_local_config_match_transformers(tmp_path, family, tie):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        family,
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        tie_word_embeddings=tie,
    )
    config.save_pretrained(tmp_path)
    with torch.device("meta"):
        expected = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    assert params_from_config(json.loads((tmp_path / "config.json").read_text())) == expected
    count, source = parameter_count(str(tmp_path))
    assert count == expected and "config.json" in source


def test_device_estimate_counts_bytes_per_parameter():
    dapo = device_estimate(build_config("dapo", "paper", {}, check_data=False))
    assert dapo["estimate"] and dapo["parameters"] == 32e9
    assert sum(dapo["bytes_per_parameter"].values()) == 4 + 4 + 8 + 2  # master, grads, AdamW, bf16 copy
    assert dapo["ddp"]["fits_one_gpu"] is False and dapo["ddp"]["gpus"] is None
    budget = 80 * (1 - 0.35)  # the colocated vLLM engine's share is gpu_memory_utilization
    assert dapo["fsdp"]["min_gpus"] == math.ceil(16 * 32 / budget)
    assert dapo["vllm_engine"]["weights_gb"] == 64.0 and dapo["vllm_engine"]["fits"] is False
    grpo = device_estimate(build_config("grpo", "paper", {}, check_data=False))
    assert grpo["bytes_per_parameter"]["reference_model"] == 4  # beta 0.04: a float32 reference copy
    small = device_estimate(build_config("drgrpo", "paper-r1", {}, check_data=False))
    assert small["ddp"]["fits_one_gpu"] and small["ddp"]["gpus"] == 1


def test_bfloat16_master_weights_are_refused_before_a_plan():
    with pytest.raises(UserError, match="set dtype: float32 and compute_dtype: bfloat16"):
        build_config("dapo", "paper", {"dtype": "bfloat16"}, check_data=False)
