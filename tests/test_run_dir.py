"""One run directory and one command-line convention for every command that runs something
(``rlvr.harness.run_dir``, ``rlvr.cli.main``): the same resume rule for eval, train and the populations, a
typed flag plus ``--config`` / ``--set`` on each, and third-party commands through entry points."""

import sys
from importlib.metadata import EntryPoint

import pytest
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.run_dir import PARTIAL_FILE, RunDir, default_run_path, holds_file, save_config
from rlvr.trainers.cli import resolve
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.populations.config import build_es_config

from rlvr.cli.main import build_parser, main


def test_one_rule_fresh_continue_or_refuse(tmp_path):
    cfg = EvalConfig(benchmarks="arith")
    run = RunDir(tmp_path / "run", holds_file("samples.jsonl"), "samples")
    assert run.open(cfg) is False and run.path.is_dir()  # fresh
    with pytest.raises(UserError, match="--resume: no samples in .* to continue; start without --resume"):
        run.open(cfg, resume=True)
    (run.path / "samples.jsonl").write_text("")
    with pytest.raises(UserError, match="holds a run but no config.yaml"):
        run.open(cfg)  # work whose settings cannot be compared
    save_config(cfg, run.path)
    assert run.open(cfg) is True and run.open(EvalConfig(benchmarks="arith", limit=3), resume=True) is True
    with pytest.raises(UserError, match=r"other settings \(temperature: 0.0 -> 0.5\); rerun with its config.yaml"):
        run.open(EvalConfig(benchmarks="arith", temperature=0.5))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds other files \\(notes.txt\\) and no run"):
        RunDir(foreign, holds_file("samples.jsonl")).open(cfg)
    run.mark_partial("interrupted", 4, "run it again")
    assert (run.path / PARTIAL_FILE).is_file()
    run.finish()
    assert not (run.path / PARTIAL_FILE).exists()


def test_default_run_directories_are_named_in_one_place():
    assert build_config("dapo", "cpu-demo", {}).run_dir() == default_run_path("train", "dapo")
    assert build_es_config("corp", "cpu-demo", {}).run_dir() == default_run_path("train", "corp")
    assert str(default_run_path("a b", "c/d")) == "results/a_b-c_d"
    assert (
        str(EvalConfig(benchmarks="arith", limit=5).run_dir())
        == "results/smollm2-135m-instruct-qwen_math-arith-n1-t0-limit5"
    )


def test_a_trained_directory_continues_without_resume(tmp_path):
    """The rule of eval is the trainers' too: the same command continues the run (it refused
    without --resume before), and a result-changing setting is still refused."""
    from rlvr.trainers.policy_gradient.loop import _prepare_out

    cfg = build_config("drgrpo", "cpu-demo", {"out": str(tmp_path)})
    save_config(cfg, tmp_path)
    (tmp_path / "checkpoint-000002").mkdir()
    (tmp_path / "checkpoint-000002" / "trainer_state.pt").write_bytes(b"")
    run, checkpoint = _prepare_out(cfg, resume=False)
    assert run.path == tmp_path and checkpoint == tmp_path / "checkpoint-000002"
    with pytest.raises(UserError, match=r"other settings \(lr: "):
        _prepare_out(build_config("drgrpo", "cpu-demo", {"out": str(tmp_path), "lr": 1e-5}), resume=False)


def test_every_train_setting_is_a_typed_flag_beside_config_and_set():
    args = build_parser().parse_args(
        ["train", "drgrpo", "--config", "cpu-demo", "--lr", "1e-5", "--no-mask-unverifiable", "--set", "mu=2"]
    )
    cfg = resolve(args, check_data=False)
    assert (cfg.lr, cfg.mask_unverifiable, cfg.mu) == (1e-5, False, 2)
    args = build_parser().parse_args(
        ["train", "randopt", "--config", "cpu-demo", "--top-k", "1,5", "--population", "4"]
    )
    assert (resolve(args).top_k, resolve(args).population) == ([1, 5], 4)
    stages = "[{name: a, sources: [arith_train]}]"
    args = build_parser().parse_args(["train", "srpo", "--config", "cpu-demo", "--stages", stages])
    assert resolve(args, check_data=False).stages == [{"name": "a", "sources": ["arith_train"]}]


def test_eval_takes_set_and_the_ablations_refuse_what_they_choose(capsys):
    from rlvr.harness.config import resolve_config

    args = build_parser().parse_args(["eval", "--benchmarks", "arith", "--set", "temperature=0.5"])
    assert resolve_config(EvalConfig, args).temperature == 0.5
    assert main(["ablate", "templates", "--benchmarks", "arith", "--set", "template=r1"]) == 2
    err = capsys.readouterr().err
    assert "ablations choose template themselves" in err and len(err.strip().splitlines()) == 1


def test_third_party_commands_register_through_the_entry_point_group(tmp_path, monkeypatch):
    """A package's ``rlvr.commands`` entry point adds its command; one named like ours is ignored."""
    (tmp_path / "rlvr_hello.py").write_text(
        "def register(sub):\n"
        "    p = sub.add_parser('hello', help='say hello')\n"
        "    p.set_defaults(func=lambda args: print('hello') or 0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = [
        EntryPoint("hello", "rlvr_hello", "rlvr.commands"),
        EntryPoint("train", "rlvr_hello_missing", "rlvr.commands"),  # ours wins; never imported
    ]
    monkeypatch.setattr("rlvr.harness.plugins.entry_points", lambda group: [e for e in entries if e.group == group])
    assert main(["hello"]) == 0
    assert "rlvr_hello_missing" not in sys.modules
    assert "train" in build_parser().format_help()
