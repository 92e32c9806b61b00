"""Typed settings end to end: YAML, ``--set`` and flags are coerced to each field's type, a bad value
names its field and the type it wanted, and every check runs before a model is loaded."""

import pytest
from eval_helpers import rlvr
from hypothesis import given
from hypothesis import strategies as st
from rlvr.harness.config import build_settings, coerce_settings, parse_overrides, read_yaml
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.trainers.policy_gradient.config import TrainConfig, build_config
from rlvr.trainers.populations.config import ESConfig, build_es_config


def test_set_values_take_the_fields_type():
    cfg = build_config(
        "srpo",
        "cpu-demo",
        parse_overrides(
            [
                "lr=1e-5",
                "max_steps=3",
                "mask_unverifiable=no",
                "eval_benchmarks=arith,pyfunc",
                "betas=[0.9, 0.99]",
                "seed=1e1",
            ]
        ),
    )
    assert cfg.lr == 1e-5 and isinstance(cfg.lr, float)  # YAML 1.1 reads "1e-5" as a string
    assert cfg.max_steps == 3 and cfg.mask_unverifiable is False and cfg.eval_benchmarks == ["arith", "pyfunc"]
    assert cfg.betas == [0.9, 0.99] and cfg.seed == 10 and isinstance(cfg.seed, int)
    es = build_es_config("randopt", "cpu-demo", parse_overrides(["sigmas=0.001", "top_k=[1, 5]", "noise_cache_gb=2"]))
    assert es.sigmas == [0.001] and es.top_k == [1, 5] and es.noise_cache_gb == 2.0


def test_yaml_files_are_coerced_too(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("benchmarks: [arith]\ntemperature: 6e-1\nn: 2\nmath_timeout: 2\n")
    cfg = build_settings(EvalConfig, [read_yaml(path)])
    assert cfg.temperature == 0.6 and cfg.n == 2 and cfg.math_timeout == 2.0


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"lr": "fast"}, "bad training setting lr: expected a number, got 'fast'"),
        ({"max_steps": 2.5}, "bad training setting max_steps: expected an integer, got 2.5"),
        ({"mask_unverifiable": "maybe"}, "bad training setting mask_unverifiable: expected true or false"),
        ({"group_size": True}, "bad training setting group_size: expected an integer, got True"),
        ({"stages": "arith_train"}, "bad training setting stages: expected a list of a mapping"),
        ({"template": 3}, "bad training setting template: expected a string, got 3"),
        ({"minibatch_size": "x"}, "minibatch_size: expected an integer or null"),
    ],
)
def test_a_bad_value_names_its_field_and_type(values, needle):
    with pytest.raises(UserError, match=needle.replace("[", r"\[")):
        build_config("drgrpo", "cpu-demo", values)


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"stages": [{"name": "a", "sources": ["arith_train"], "until_stpe": 3}]}, "unknown stage key"),
        ({"stages": [{"name": "a", "sources": []}]}, "declares no data sources"),
        ({"stages": [{"name": "a", "sources": ["arith_trian"]}]}, "did you mean 'arith_train'"),
        ({"stages": [{"name": "a", "sources": ["mine.jsonl"]}]}, "names mine.jsonl, which does not exist"),
        ({"eval_benchmarks": ["gsm9k"]}, "eval_benchmarks"),
        ({"selection": "random"}, "selection must be one of"),
    ],
)
def test_stage_and_source_errors_come_before_any_model_loads(values, needle):
    with pytest.raises(UserError, match=needle):
        build_config("srpo", "cpu-demo", values)


def test_es_sources_are_checked_up_front():
    with pytest.raises(UserError, match="names nowhere.jsonl"):
        build_es_config("corp", "cpu-demo", {"train_source": "nowhere.jsonl"})


def test_the_command_line_reports_one_line(tmp_path):
    result = rlvr("train", "srpo", "--config", "cpu-demo", "--set", "lr=fast", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "rlvr train: error: bad training setting lr: expected a number, got 'fast'"
    ]
    result = rlvr("train", "srpo", "--config", "cpu-demo", "--set", "stages=[{name: a", "--out", str(tmp_path / "y"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "not valid YAML" in result.stderr
    assert not (tmp_path / "x").exists()  # nothing was started
    result = rlvr("eval", "--benchmarks", "arith", "--temperature", "hot", "--out", str(tmp_path / "z"))
    assert result.returncode == 2 and "--temperature" in result.stderr


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=1e-12, max_value=1e6))
def test_any_float_spelling_reads_back_as_the_same_float(x):
    for spelling in (str(x), f"{x:e}", repr(x)):
        assert coerce_settings(TrainConfig, {"lr": spelling})["lr"] == float(spelling)


def test_every_field_of_every_config_has_a_type_the_coercion_knows():
    import typing

    for cls in (TrainConfig, ESConfig, EvalConfig):
        for name, hint in typing.get_type_hints(cls).items():
            default = getattr(cls(**({"benchmarks": "arith"} if cls is EvalConfig else {})), name)
            assert coerce_settings(cls, {name: default})[name] == default, (cls.__name__, name, hint)
