"""`rlvr eval` end to end (CPU; a tiny random model with the real tokenizer, the embedded model where
generation must take a while): files and fields, CIs, fingerprints,
seeded reproducibility, resume after SIGKILL, regrade, compare, config files and user errors."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT
from eval_helpers import SMALL, rlvr, samples, summary

SAMPLE_FIELDS = {
    "id",
    "benchmark",
    "sample_idx",
    "prompt",
    "completion",
    "extracted",
    "correct",
    "reward",
    "reason",
    "finish_reason",
    "n_tokens",
    "seed",
    "template",
    "verifier",
}
BENCH_FIELDS = {
    "n_problems",
    "n_samples",
    "mean_at_n",
    "pass_at_k",
    "maj_at_k",
    "truncation_rate",
    "no_answer_rate",
    "timeout_rate",
    "length",
    "fingerprint",
}


def small_run(model, template, out):
    """GSM8K + HumanEval+ at the SMALL size: the run these tests compare against each other."""
    return rlvr(
        "eval", "--model", model, "--benchmarks", "gsm8k,humanevalplus", "--template", template, *SMALL, "--out", out
    )


@pytest.fixture(scope="module")
def run_a(tmp_path_factory, tiny_model):
    out = tmp_path_factory.mktemp("eval") / "a"
    result = small_run(tiny_model, "qwen_math", str(out))
    assert result.returncode == 0, result.stderr
    return out, result


def test_run_writes_config_samples_and_summary(run_a):
    out, result = run_a
    assert "mean@n" in result.stdout and "gsm8k" in result.stdout and "humanevalplus" in result.stdout
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["n"] == 2 and config["max_tokens"] == 24 and config["model"].endswith("tiny-llama")
    rows = samples(out)
    assert len(rows) == 2 * 2 * 2
    for row in rows:
        assert SAMPLE_FIELDS <= set(row)
        assert row["finish_reason"] in ("stop", "length")
        assert row["template"] == "qwen_math"
        assert row["prompt"].startswith("<|im_start|>system\nPlease reason step by step")
        assert 0 < row["n_tokens"] <= 24
    assert sorted((r["id"], r["sample_idx"]) for r in rows) == sorted({(r["id"], r["sample_idx"]) for r in rows})
    s = summary(out)
    for key in ("fingerprint", "protocol_fingerprint", "model", "versions", "hardware", "timings", "benchmarks"):
        assert key in s
    assert s["model"]["weights_hash"] and s["versions"]["math_verifier"].startswith("rlvr-math@")
    for name in ("gsm8k", "humanevalplus"):
        bench = s["benchmarks"][name]
        assert BENCH_FIELDS <= set(bench)
        assert bench["n_problems"] == 2 and bench["n_samples"] == 4
        lo, hi = bench["mean_at_n"]["ci95"]
        assert lo <= bench["mean_at_n"]["value"] <= hi
        assert set(bench["pass_at_k"]) == {"1", "2"}
        assert set(bench["length"]) == {"correct", "incorrect", "all"}
    assert s["benchmarks"]["gsm8k"]["maj_at_k"] is not None
    assert s["benchmarks"]["humanevalplus"]["maj_at_k"] is None


@pytest.mark.slow
def test_identical_runs_share_fingerprint_and_samples_and_template_changes_it(run_a, tmp_path, tiny_model):
    out_a, _ = run_a
    same = small_run(tiny_model, "qwen_math", str(tmp_path / "b"))
    assert same.returncode == 0, same.stderr
    assert summary(tmp_path / "b")["fingerprint"] == summary(out_a)["fingerprint"]
    # per-sample seeds: the same command reproduces every completion
    key = lambda r: (r["id"], r["sample_idx"])  # noqa: E731
    assert sorted((key(r), r["completion"]) for r in samples(tmp_path / "b")) == sorted(
        (key(r), r["completion"]) for r in samples(out_a)
    )
    other = small_run(tiny_model, "r1", str(tmp_path / "c"))
    assert other.returncode == 0, other.stderr
    assert summary(tmp_path / "c")["fingerprint"] != summary(out_a)["fingerprint"]
    assert summary(tmp_path / "c")["protocol_fingerprint"] != summary(out_a)["protocol_fingerprint"]
    assert all(r["prompt"].startswith("A conversation between User and Assistant.") for r in samples(tmp_path / "c"))


def test_regrade_reproduces_stored_verdicts(run_a):
    out, _ = run_a
    result = rlvr("regrade", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "regrade-ours.json").read_text())
    for bench in report["benchmarks"].values():
        assert bench["agree"] == bench["samples"] > 0
    mv = rlvr("regrade", str(out), "--grader", "math-verify")
    assert mv.returncode == 0, mv.stderr
    assert "code samples skipped" in mv.stdout
    assert set(json.loads((out / "regrade-math-verify.json").read_text())["benchmarks"]) == {"gsm8k"}


def test_compare_reports_paired_difference(run_a):
    out, _ = run_a
    result = rlvr("compare", str(out), str(out), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["benchmarks"]["gsm8k"]["value"] == 0.0 and data["benchmarks"]["gsm8k"]["n_problems"] == 2
    assert data["protocol_differences"] == {}


@pytest.mark.slow  # ~30 s of the embedded model; the older-verifier resume below is slow too (two evals)
def test_sigkill_then_same_command_resumes_without_loss_or_regeneration(tmp_path):
    out = tmp_path / "killed"
    args = [
        sys.executable,
        "-m",
        "rlvr.cli",
        "eval",
        "--benchmarks",
        "gsm8k",
        "--limit",
        "4",
        "--n",
        "2",
        "--temperature",
        "0.7",
        "--max-tokens",
        "16",
        "--batch-size",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    path = out / "samples.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") >= 3:
            break
        assert proc.poll() is None, "run finished before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = path.read_text()
    written = before[: before.rfind("\n") + 1]
    with path.open("a") as fh:  # a write torn by the kill
        fh.write('{"id": "gsm8k/00')
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    after = path.read_text()
    assert after.startswith(written)
    rows = samples(out)
    keys = [(r["id"], r["sample_idx"]) for r in rows]
    assert len(keys) == len(set(keys)) == 8
    n_before = written.count("\n")
    timings = summary(out)["timings"]
    assert timings["samples_resumed"] == n_before
    assert timings["samples_generated"] == 8 - n_before
    # the completed run resumes to a no-op
    third = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0 and path.read_text() == after
    assert summary(out)["timings"]["samples_generated"] == 0


@pytest.mark.slow
def test_yaml_config_with_flag_override(tmp_path, tiny_model):
    config = tmp_path / "run.yaml"
    config.write_text("benchmarks: [gsm8k]\ntemplate: no_template\nn: 1\nlimit: 1\nmax_tokens: 64\nprogress: false\n")
    result = rlvr(
        "eval", "--config", str(config), "--model", tiny_model, "--max-tokens", "8", "--out", str(tmp_path / "run")
    )
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert resolved["max_tokens"] == 8 and resolved["template"] == "no_template" and resolved["limit"] == 1
    row = samples(tmp_path / "run")[0]
    assert row["n_tokens"] <= 8 and row["prompt"].startswith("Janet")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--benchmarks", "gsm9k"], "did you mean 'gsm8k'"),
        (["--benchmarks", "gsm8k", "--template", "nope"], "unknown template"),
        (["--benchmarks", "gsm8k", "--n", "2", "--pass-k", "4"], "pass@4 needs k between 1 and --n"),
        pytest.param(
            ["--benchmarks", "gsm8k", "--backend", "vllm", "--device", "cuda"],
            "no CUDA GPU is visible",
            marks=pytest.mark.slow,
        ),
        (["--benchmarks", "gsm8k", "--backend", "openai", "--model", "m"], "--base-url"),
        (["--benchmarks", "gsm8k", "--model", "/nonexistent/dir/x"], "cannot load model"),
        (["--benchmarks", "livecodebench", "--template", "fewshot"], "no worked solutions"),
        (["--benchmarks", "gsm8k", "--config", "/nonexistent.yaml"], "does not exist"),
    ],
)
def test_user_errors_are_one_line(args, needle, tmp_path):
    result = rlvr("eval", *args, "--limit", "1", "--out", str(tmp_path / "x"), "--no-progress")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_bad_yaml_and_unknown_key_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmarks: [gsm8k\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("benchmarks: gsm8k\ntemprature: 0.5\n")
    for path, needle in ((bad, "not valid YAML"), (unknown, "temprature")):
        result = rlvr("eval", "--config", str(path), "--out", str(tmp_path / "x"))
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1 and needle in result.stderr


def test_resume_refuses_other_settings(run_a, tiny_model):
    out, _ = run_a
    result = small_run(tiny_model, "r1", str(out))
    assert result.returncode == 2 and "template: 'qwen_math' -> 'r1'" in result.stderr


@pytest.mark.slow
def test_resume_regrades_samples_from_an_older_verifier(tmp_path, tiny_model):
    out = tmp_path / "stale"
    args = [
        "eval",
        "--model",
        tiny_model,
        "--benchmarks",
        "gsm8k",
        "--limit",
        "2",
        "--max-tokens",
        "16",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert rlvr(*args).returncode == 0
    original = samples(out)
    tampered = [
        {**r, "verifier": "rlvr-math@0.0.1", "correct": not r["correct"], "reason": "tampered"} for r in original
    ]
    (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tampered))
    again = rlvr(*args)
    assert again.returncode == 0 and "re-graded 2 stored samples graded by rlvr-math@0.0.1" in again.stdout
    restored = samples(out)
    assert [(r["correct"], r["reason"], r["verifier"], r["completion"]) for r in restored] == [
        (r["correct"], r["reason"], r["verifier"], r["completion"]) for r in original
    ]
    assert summary(out)["timings"]["samples_generated"] == 0
