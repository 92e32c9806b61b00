"""One run configuration: every field of every config says what it means and what changing it does
(``rlvr.harness.run_config``), and the flags, ``--help``, ``config.yaml`` and resume checks follow from that."""

import argparse
import dataclasses
import re

import pytest
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.run_config import Role, fields_in, meaning, shown
from rlvr.harness.run_dir import changed_settings, check_resume, save_config
from rlvr.trainers.policy_gradient.config import ALGORITHMS, TrainConfig, algorithm_module, build_config
from rlvr.trainers.populations.config import ESConfig, build_es_config

from rlvr.cli.main import build_parser

CONFIGS = (EvalConfig, TrainConfig, ESConfig)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_a_one_line_help_and_a_role(cls):
    for name in fields_in(cls):
        about = meaning(cls, name)
        assert isinstance(about.role, Role) and about.group, (cls.__name__, name)
        words = about.help.split()
        assert len(words) >= 3 and "\n" not in about.help, (cls.__name__, name, about.help)
        assert about.help.strip(" .").lower() != name.replace("_", " "), (cls.__name__, name)


def test_every_defining_setting_is_a_protocol_setting():
    for algorithm in ALGORITHMS:
        for name in algorithm_module(algorithm).DEFINING:
            assert meaning(TrainConfig, name).role is Role.PROTOCOL, (algorithm, name)


def test_train_help_lists_every_setting_with_its_default(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["train", "drgrpo", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    defaults = dataclasses.asdict(build_config("drgrpo", None, {}, check_data=False))
    listed = dict(re.findall(r"^  [ *](\w+)=(.*?)(?:\s{2,}|$)", text, flags=re.M))
    assert set(listed) == set(fields_in(TrainConfig))
    for name, value in defaults.items():
        assert listed[name] == shown(value), name
        assert meaning(TrainConfig, name).help.split()[0] in text
    assert "*loss_agg=seq_mean_token_sum_norm" in text  # Dr. GRPO's defining settings are marked
    assert "max_steps=100" in text and "[resumable]" in text


def test_population_help_lists_every_es_setting(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "corp", "--help"])
    listed = dict(re.findall(r"^  [ *](\w+)=(.*?)(?:\s{2,}|$)", capsys.readouterr().out, flags=re.M))
    assert listed.keys() == set(fields_in(ESConfig)) and listed["algorithm"] == "corp"


def test_eval_flags_are_the_fields():
    """One flag per field, named after it, with the field's help; the ablations choose the
    template and the output folders themselves."""
    parser = build_parser()
    for prog, parser, missing in (
        ("eval", _subparser(parser, "eval"), set()),
        ("templates", _subparser(_subparser(parser, "ablate"), "templates"), {"template", "out"}),
    ):
        flags = {a.dest: a for a in parser._actions if a.option_strings and a.dest in fields_in(EvalConfig)}
        assert set(fields_in(EvalConfig)) - set(flags) == missing, prog
        for name, action in flags.items():
            spelled = "--no-progress" if name == "progress" else "--" + name.replace("_", "-")
            assert action.option_strings == [spelled] and action.default is argparse.SUPPRESS
            assert action.help.startswith(meaning(EvalConfig, name).help.replace("%", "%%"))
    help_text = " ".join(_subparser(build_parser(), "eval").format_help().split())
    assert "--temperature TEMPERATURE sampling temperature, 0 = greedy;" in help_text and "(default: 0.0)" in help_text
    assert "--limit LIMIT" in help_text and "[not scored]" in help_text


@pytest.mark.parametrize(
    "make, resumable, refused, message",
    [
        (
            lambda **kw: build_config("drgrpo", "cpu-demo", kw),
            {"max_steps": 7, "save_every": 2, "out": "elsewhere"},
            {"lr": 1e-5},
            "{run_dir} holds a run with other settings (lr: 2e-05 -> 1e-05); rerun with its config.yaml or pass a new "
            "--out",
        ),
        (
            lambda **kw: build_es_config("corp", "cpu-demo", kw),
            {"workers": 2, "noise_cache_gb": 3.0},
            {"population": 9},
            "{run_dir} holds a run with other settings (population: 8 -> 9); rerun with its config.yaml or pass a new "
            "--out",
        ),
        (
            lambda **kw: EvalConfig(benchmarks="arith", **kw),
            {"limit": 3, "batch_size": 2, "pass_k": "1"},
            {"temperature": 0.5},
            "{run_dir} holds a run with other settings (temperature: 0.0 -> 0.5); rerun with its config.yaml or pass "
            "a new --out",
        ),
    ],
    ids=["train", "population", "eval"],
)
def test_resume_refuses_result_changes_and_accepts_resumable_ones(tmp_path, make, resumable, refused, message):
    """Decided from each field's role alone; the refusal is one line naming the field."""
    save_config(make(), tmp_path)
    for name in resumable:
        assert meaning(make(), name).role.resumable
    check_resume(tmp_path, make(**resumable))
    assert changed_settings(tmp_path, make(**resumable)) == []
    with pytest.raises(UserError) as refusal:
        check_resume(tmp_path, make(**resumable, **refused))
    assert str(refusal.value) == message.format(run_dir=tmp_path)
    assert changed_settings(tmp_path, make(**refused)) == sorted(refused)


def test_config_yaml_keeps_field_order(tmp_path):
    import yaml

    cfg = build_config("dapo", "cpu-demo", {})
    save_config(cfg, tmp_path)
    text = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    assert list(yaml.safe_load(text)) == fields_in(TrainConfig)
    assert text == yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False, allow_unicode=True)


def test_an_evaluation_summary_records_the_scored_settings():
    scored = EvalConfig(benchmarks="arith").scored_settings()
    assert list(scored) == [n for n in fields_in(EvalConfig) if meaning(EvalConfig, n).role.scored]
    assert {"limit", "out", "batch_size", "progress", "ray"}.isdisjoint(scored) and "temperature" in scored


def test_a_trained_run_without_its_config_is_refused_on_resume(tmp_path):
    """Trainers resume only a run whose settings can be compared; eval's fresh directories need none."""
    cfg = build_config("drgrpo", "cpu-demo", {"out": str(tmp_path)})
    check_resume(tmp_path, cfg)
    with pytest.raises(UserError, match="no config.yaml, so its settings cannot be checked"):
        check_resume(tmp_path, cfg, saved_required=True)
    save_config(cfg, tmp_path)
    check_resume(tmp_path, cfg, saved_required=True)
