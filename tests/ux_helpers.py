"""A synthetic finished run directory, as `rlvr eval --benchmarks arith --limit 3` leaves one (its
three samples graded by hand): for the tests of `rlvr show`, export, leaderboards and README commands."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from rlvr.harness.eval_config import EvalConfig


def make_run(root: Path, name: str = "run-a", limit: int | None = 3, with_samples: bool = True) -> Path:
    """A run directory as `rlvr eval --benchmarks arith --limit 3` leaves it (samples graded by hand)."""
    run = root / name
    run.mkdir(parents=True)
    config = {**vars(EvalConfig(benchmarks=["arith"], limit=limit)), "model": "tiny"}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [
        ("arith/add1-5+1", "The sum is \\boxed{6}.", "6", True, "ok", None),
        ("arith/add1-9+7", "so \\boxed{15}", "15", False, "wrong_answer", "16"),
        ("arith/sub1-8-5", "I think about it", None, False, "no_answer", None),
    ]
    if with_samples:
        samples = [
            {
                "id": pid,
                "benchmark": "arith",
                "sample_idx": 0,
                "seed": 1,
                "template": "qwen_math",
                "prompt": f"Question {pid}?",
                "completion": completion,
                "extracted": extracted,
                "gold": gold,
                "correct": ok,
                "reward": float(ok),
                "reason": reason,
                "detail": reason,
                "finish_reason": "stop",
                "n_tokens": 7,
                "n_prompt_tokens": 10,
                "verifier": "rlvr-math@1.3.0",
            }
            for pid, completion, extracted, ok, reason, gold in rows
        ]
        (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    metric = {"value": 1 / 3, "ci95": [0.0, 1.0]}
    bench = {
        "n_problems": 3,
        "n_samples": 3,
        "mean_at_n": metric,
        "pass_at_k": {"1": metric},
        "maj_at_k": {"1": metric},
        "truncation_rate": 0.0,
        "no_answer_rate": 1 / 3,
        "timeout_rate": 0.0,
        "length": {k: {"n": 1, "mean": 7.0} for k in ("correct", "incorrect", "all")},
        "kind": "math",
        "data_revision": f"rev-{limit}",
        "fingerprint": f"fp-{limit}",
    }
    summary = {
        "summary_version": 1,
        "run": name,
        "fingerprint": f"run-{name}",
        "protocol_fingerprint": "proto",
        "protocol": {"template": {"name": "qwen_math"}, "sampling": {"n": 1, "temperature": 0.0}},
        "model": {"name": "tiny", "path": "/models/tiny", "weights_hash": None},
        "config": {"limit": limit},
        "benchmarks": {"arith": bench},
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return run
