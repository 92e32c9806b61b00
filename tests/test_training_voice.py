"""A training run talks while it works: a legend first, progress inside a step on a terminal,
one line per step with an ETA in a pipe, a closing summary with the command to evaluate the
checkpoint, and an interrupt line that names the checkpoint kept."""

import io

import pytest
from rlvr.trainers.policy_gradient import live_progress
from rlvr.trainers.policy_gradient.live_progress import LEGEND, RunProgress, closing_summary, format_eta
from test_trainers_e2e import _tiny


@pytest.fixture(scope="module")
def tiny(tiny_model, digits_source):
    return tiny_model, digits_source


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_pipe_one_line_per_step_with_an_eta_after_the_legend():
    stream = io.StringIO()
    with RunProgress(1, 3, stream=stream) as voice:
        live_progress.report_rollout(2, 8, 100)  # nothing in a pipe between step lines
        live_progress.report_learn(1, 4)
        for step in (1, 2, 3):
            voice.step_done(step, f"step {step}/3 reward 0.5")
    lines = stream.getvalue().splitlines()
    assert lines[0] == LEGEND
    assert [line.split(" eta ")[0] for line in lines[1:]] == [
        "step 1/3 reward 0.5",
        "step 2/3 reward 0.5",
        "step 3/3 reward 0.5",
    ]
    assert all(" eta " in line for line in lines[1:3]) and " eta " not in lines[3]  # nothing left at the end
    assert live_progress._current is None  # reports after the run go nowhere


def test_on_a_terminal_the_bar_shows_the_phase_inside_a_step():
    stream = Terminal()
    with RunProgress(1, 2, stream=stream) as voice:
        live_progress.report_rollout(0, 8, 0)
        live_progress.report_rollout(3, 8, 120)
        assert "rollout 3/8 samples" in stream.getvalue() and "tok/s" in stream.getvalue()
        live_progress.report_learn(2, 4)
        assert "learning 2/4 micro-batches" in stream.getvalue()
        voice.step_done(1, "step 1/2 reward 0.250")
    assert "step 1/2 reward 0.250 eta " in stream.getvalue()


def test_eta_is_the_mean_step_time_times_the_steps_left(monkeypatch):
    clock = iter([100.0, 160.0])
    monkeypatch.setattr(live_progress.time, "monotonic", lambda: next(clock))
    voice = RunProgress(5, 10, stream=io.StringIO(), enabled=False)  # resumed at step 5
    assert voice.eta(6) == pytest.approx(30.0 * 4)  # two steps in 60 s, four left
    assert format_eta(125) == "2m05s" and format_eta(3 * 3600 + 61) == "3h01m"


def test_closing_summary_compares_windows_names_the_best_step_and_the_eval_command(tmp_path):
    rows = [{"step": s, "reward_mean": s / 10, "accuracy": s / 20} for s in range(1, 9)]
    rows[5]["eval_gsm8k"] = 0.7
    rows[2]["eval_gsm8k"] = 0.4
    ckpt = tmp_path / "run dir" / "checkpoint-000008"
    text = closing_summary(rows, tmp_path / "run dir", ckpt, ["gsm8k", "math500"])
    assert "reward 0.150 (steps 1-2) -> 0.750 (steps 7-8); acc 0.075 -> 0.375" in text
    assert "best step 6: eval_gsm8k 0.700" in text
    assert f"checkpoint: {ckpt}" in text
    assert f"evaluate it: rlvr eval --model '{ckpt}' --benchmarks gsm8k,math500" in text
    assert "no checkpoint was saved" in closing_summary([], tmp_path, None, [])


def test_a_real_run_says_legend_steps_and_summary(tmp_path, tiny, capsys):
    from rlvr.trainers.cli import train

    cfg = _tiny("drgrpo", tiny, tmp_path / "run", 2, eval_benchmarks=[])
    train("drgrpo", cfg, False, True)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == LEGEND
    assert "step 1/2 [" in out and " eta " in out and "step 2/2 [" in out
    assert f"done -> {tmp_path / 'run'}" in out and "reward " in out and "best step " in out
    assert f"evaluate it: rlvr eval --model {tmp_path / 'run' / 'checkpoint-000002'}" in out


@pytest.mark.slow
def test_ctrl_c_in_training_names_the_checkpoint_kept_and_the_resume_says_what_it_reuses(
    tmp_path, tiny, monkeypatch, capsys
):
    from rlvr.trainers.policy_gradient import loop

    real = loop.train_step

    def interrupted_at_step_2(cfg, step, *args, **kwargs):
        if step == 2:
            raise KeyboardInterrupt
        return real(cfg, step, *args, **kwargs)

    monkeypatch.setattr(loop, "train_step", interrupted_at_step_2)
    cfg = _tiny("grpo", tiny, tmp_path / "run", 3, save_every=1, save_optimizer=True)
    with pytest.raises(KeyboardInterrupt) as caught:
        loop.run_training(cfg, progress=False)
    kept = caught.value.rlvr_kept
    assert f"last checkpoint {tmp_path / 'run' / 'checkpoint-000001'}" in kept and "--resume" in kept
    monkeypatch.setattr(loop, "train_step", real)
    capsys.readouterr()
    loop.run_training(_tiny("grpo", tiny, tmp_path / "run", 2, save_every=1, save_optimizer=True), resume=True)
    assert f"resuming {tmp_path / 'run'} from checkpoint-000001: 1 steps done, 1 to go" in capsys.readouterr().out
    cfg = _tiny("grpo", tiny, tmp_path / "early", 3)
    monkeypatch.setattr(loop, "train_step", interrupted_at_step_1)
    with pytest.raises(KeyboardInterrupt) as caught:
        loop.run_training(cfg, progress=False)
    assert caught.value.rlvr_kept.startswith("no checkpoint was saved yet")


def interrupted_at_step_1(*args, **kwargs):
    raise KeyboardInterrupt
