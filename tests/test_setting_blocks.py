"""The settings eval, train and the populations share are declared once (rlvr.harness.setting_blocks)."""

from __future__ import annotations

import dataclasses

import pytest
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.setting_blocks import (
    BLOCKS,
    GPU_SHARE_ALONE,
    GPU_SHARE_BESIDE_LEARNER,
    block_fields,
    gpu_memory_share,
)
from rlvr.trainers.policy_gradient.config import ALGORITHMS, TrainConfig, algorithm_module, build_config
from rlvr.trainers.populations.config import ESConfig, build_es_config

CONFIGS = (EvalConfig, TrainConfig, ESConfig)

#: one name, two meanings: declared apart on purpose, each with the reason
DISTINCT = {
    "workers": "rlvr eval: grading processes per verifier; populations: model copies scoring members",
    "batch_size": "rlvr eval: sequences per forward batch, not scored; populations: prompts per greedy scoring "
    "batch, a result setting",
    "algorithm": "set by rlvr train ALGO, from a different list for each trainer family",
}


def _shared_names() -> set[str]:
    seen: dict[str, int] = {}
    for cls in CONFIGS:
        for f in dataclasses.fields(cls):
            seen[f.name] = seen.get(f.name, 0) + 1
    return {name for name, count in seen.items() if count > 1}


def test_a_name_two_configs_share_is_one_declaration_or_a_listed_difference():
    """The same Field object (help, role, group, default) wherever a block is composed in; a
    config that re-declared a block's setting would hold a Field of its own and fail here."""
    owner = {name: block for block in BLOCKS for name in block_fields(block)}
    for name in sorted(_shared_names()):
        if name in DISTINCT:
            continue
        assert name in owner, f"{name} is declared in two configs: move it into a block or list it in DISTINCT"
        declared = owner[name].__dataclass_fields__[name]
        for cls in CONFIGS:
            if name in cls.__dataclass_fields__:
                assert cls.__dataclass_fields__[name] is declared, (cls.__name__, name)
    assert set(DISTINCT) <= _shared_names(), "DISTINCT lists a name only one config has"


def test_no_two_blocks_declare_one_setting():
    names = [name for block in BLOCKS for name in block_fields(block)]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("max_tokens", 0, "--max-tokens must be at least 1"),
        ("backend", "nope", "--backend must be one of hf, vllm"),
    ],
)
def test_one_check_refuses_a_shared_setting_in_every_command(setting, value, message):
    with pytest.raises(UserError, match=message):
        EvalConfig(benchmarks="gsm8k", **{setting: value})
    with pytest.raises(UserError, match=message):
        build_config("drgrpo", None, {setting: value}, check_data=False)
    with pytest.raises(UserError, match=message):
        build_es_config("corp", None, {setting: value})


def test_sampling_checks_are_shared_and_training_adds_its_own():
    with pytest.raises(UserError, match=r"--top-p must be in \(0, 1\]"):
        EvalConfig(benchmarks="gsm8k", top_p=0)
    with pytest.raises(UserError, match=r"--top-p must be in \(0, 1\]"):
        build_config("grpo", None, {"top_p": 1.5}, check_data=False)
    # greedy is a valid evaluation and a refused rollout (the loss needs the sampled policy)
    assert EvalConfig(benchmarks="gsm8k", temperature=0).temperature == 0
    with pytest.raises(UserError, match="temperature must be positive"):
        build_config("grpo", None, {"temperature": 0}, check_data=False)


def test_each_command_refuses_the_backends_it_cannot_run():
    assert set(TrainConfig.BACKENDS) == {"hf", "vllm"}
    assert set(ESConfig.BACKENDS) == {"hf", "vllm", "ray"} and "openai" in EvalConfig.BACKENDS
    with pytest.raises(UserError, match="--backend must be one of hf, vllm .got 'openai'"):
        build_config("drgrpo", None, {"backend": "openai"}, check_data=False)
    with pytest.raises(UserError, match="--backend must be one of hf, vllm, openai"):
        EvalConfig(benchmarks="gsm8k", backend="ray")
    assert build_es_config("randopt", None, {"backend": "ray"}).backend == "ray"


def test_one_default_per_meaning():
    """The block's default everywhere; the rollout temperature is the algorithms' definition (every
    policy-gradient algorithm defines 1.0), not a second default."""
    for name in ("max_tokens", "template", "temperature", "top_p", "seed", "dtype"):
        defaults = {
            getattr(cls(**({"benchmarks": "gsm8k"} if cls is EvalConfig else {})), name)
            for cls in CONFIGS
            if name in cls.__dataclass_fields__
        }
        assert len(defaults) == 1, name
    for algorithm in ALGORITHMS:
        assert algorithm_module(algorithm).DEFINING["temperature"] == 1.0
        assert TrainConfig(**algorithm_module(algorithm).DEFINING).temperature == 1.0
    assert EvalConfig(benchmarks="gsm8k").temperature == 0.0


def test_gpu_memory_utilization_auto_is_a_fact_of_the_run_not_a_second_default():
    assert EvalConfig(benchmarks="gsm8k").gpu_memory_utilization is None
    assert TrainConfig().gpu_memory_utilization is None
    assert gpu_memory_share(None, beside_learner=False) == GPU_SHARE_ALONE == 0.85
    assert gpu_memory_share(None, beside_learner=True) == GPU_SHARE_BESIDE_LEARNER == 0.35
    assert gpu_memory_share(0.5, beside_learner=True) == 0.5
    with pytest.raises(UserError, match="--gpu-memory-utilization is the share"):
        EvalConfig(benchmarks="gsm8k", gpu_memory_utilization=1.5)


def test_config_yaml_starts_with_the_blocks():
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    model = block_fields(BLOCKS[0])
    assert names[names.index("model") : names.index("model") + len(model)] == model
    assert [f.name for f in dataclasses.fields(EvalConfig)][: len(model)] == model
