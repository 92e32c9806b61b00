"""TRL's ``GRPOTrainer`` and ``rlvr train drgrpo`` side by side on the same CPU: peak memory and
time per step, rollout and update apart.

Same model (the embedded SmolLM2-135M-Instruct, float32), same prompts (the first
``prompts × steps`` of ``arith_train``, rendered by the model's chat template with the same
instruction), group size 4, 8 prompts a step, up to ``--max-tokens`` new tokens at temperature
1, one AdamW step per rollout (lr 1e-6, betas 0.9/0.95, grad clip 1) accumulated over
micro-batches of 8 rows, no KL, Dr. GRPO's loss on both sides (TRL ``loss_type: dr_grpo``,
``scale_rewards: none``), gradient checkpointing on both. TRL generates with transformers
(its vLLM colocation needs a GPU); ours with vLLM's CPU build (``backend: vllm``), which is the
point of the comparison. Rewards on both sides: our math verifier (``rlvr.sandbox.serving.rewards``).

Each trainer runs in a fresh process (``MALLOC_MMAP_THRESHOLD_=65536``); peak memory is the
resident-set high-water mark minus the resident set after imports (``bench_train_memory``'s
method), so ours includes the vLLM engine (its weights and ``kv_cache_gb``). Times are the mean
of the steps after the first (warm-up): rollout = generation + grading, update = the rest of
the step (old log-probs, forward/backward, AdamW, and for ours the weight sync to vLLM).

    flock /tmp/cpu-heavy.lock python benchmarks/bench_trl_compare.py --steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PROMPTS, GROUP, MICRO, LR = 8, 4, 8, 1e-6


def _hwm_mb(baseline: int) -> float:
    from bench_train_memory import _status

    return round((_status("VmHWM") - baseline) / 2**20, 1)


def _problems(steps: int):
    from rlvr.harness.benchmarks.sources import resolve_source

    source = resolve_source("arith_train")
    return source.problems[: PROMPTS * steps], source.instruction


def run_trl(steps: int, max_tokens: int) -> dict:
    from bench_train_memory import _status
    from datasets import Dataset
    from rlvr.harness.models import resolve_model
    from rlvr.harness.templates import load_template, render
    from rlvr.sandbox.serving.rewards import trl_reward
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    baseline = _status("VmRSS")
    problems, instruction = _problems(steps)
    template = load_template("chat")
    rows = [{"prompt": render(template, p.question, instruction), "answer": p.gold["answer"]} for p in problems]
    reward = trl_reward("math", policy="arith")
    reward.__name__ = "rlvr_math"
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            max_steps=steps,
            per_device_train_batch_size=MICRO,
            gradient_accumulation_steps=PROMPTS * GROUP // MICRO,
            num_generations=GROUP,
            max_completion_length=max_tokens,
            temperature=1.0,
            learning_rate=LR,
            adam_beta2=0.95,
            max_grad_norm=1.0,
            lr_scheduler_type="constant",
            beta=0.0,
            loss_type="dr_grpo",
            scale_rewards="none",
            gradient_checkpointing=True,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            bf16=False,
            use_cpu=True,
            seed=0,
            shuffle_dataset=False,
        )
        trainer = GRPOTrainer(
            model=resolve_model(None)[0], reward_funcs=[reward], args=config, train_dataset=Dataset.from_list(rows)
        )
        rollout, step = [], []
        generate, train = trainer._generate_and_score_completions, trainer.training_step

        def timed_generate(*args, **kwargs):
            t0 = time.perf_counter()
            result = generate(*args, **kwargs)
            rollout.append(time.perf_counter() - t0)
            return result

        def timed_step(*args, **kwargs):
            t0 = time.perf_counter()
            result = train(*args, **kwargs)
            step.append(time.perf_counter() - t0)
            return result

        trainer._generate_and_score_completions, trainer.training_step = timed_generate, timed_step
        walls = []  # a whole optimizer step: rollout, micro-batches, clipping and the AdamW step

        class StepWall(TrainerCallback):
            def on_step_begin(self, *args, **kwargs):
                walls.append(-time.perf_counter())

            def on_step_end(self, *args, **kwargs):
                walls[-1] += time.perf_counter()

        trainer.add_callback(StepWall())
        trainer.train()
    return _summary("trl", rollout, [w - r for w, r in zip(walls, rollout)], _hwm_mb(baseline))


def run_ours(steps: int, max_tokens: int) -> dict:
    import vllm  # noqa: F401
    from bench_train_memory import _status
    from rlvr.trainers.policy_gradient import loop
    from rlvr.trainers.policy_gradient.config import build_config
    from rlvr.trainers.runtime.telemetry import read_log
    from trl import GRPOTrainer  # noqa: F401  (TRL's side imports it, and vLLM with it, before its baseline)

    baseline = _status("VmRSS")
    with tempfile.TemporaryDirectory() as out:
        overrides = {
            "prompts_per_step": PROMPTS,
            "group_size": GROUP,
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "micro_batch_size": MICRO,
            "minibatch_size": None,
            "lr": LR,
            "betas": [0.9, 0.95],
            "grad_clip": 1.0,
            "max_steps": steps,
            "save_every": 0,
            "backend": "vllm",
            "kv_cache_gb": 0.5,
            "gradient_checkpointing": True,
            "loss_constant": max_tokens,
            "out": out,
        }
        cfg = build_config("drgrpo", "cpu-demo", overrides)
        walls, step = [], loop.train_step  # a whole step: rollout, update, weight sync to vLLM

        def timed_step(*args, **kwargs):
            t0 = time.perf_counter()
            result = step(*args, **kwargs)
            walls.append(time.perf_counter() - t0)
            return result

        loop.train_step = timed_step
        loop.run_training(cfg, progress=False)
        log = read_log(Path(out))
    rollout = [line["time_generate"] + line["time_score"] for line in log]
    update = [wall - r for wall, r in zip(walls, rollout)]
    summary = _summary("rlvr", rollout, update, _hwm_mb(baseline))
    summary["of_which_weight_sync_s"] = round(sum(line["time_sync"] for line in log[1:]) / max(1, len(log) - 1), 2)
    return summary


def _summary(name: str, rollout: list[float], update: list[float], peak_mb: float) -> dict:
    warm = slice(1, None) if len(rollout) > 1 else slice(None)
    mean = lambda xs: round(sum(xs) / len(xs), 2)  # noqa: E731
    r, u = mean(rollout[warm]), mean(update[warm])
    return {"trainer": name, "peak_mb": peak_mb, "rollout_s": r, "update_s": u, "step_s": round(r + u, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--child", choices=["trl", "rlvr"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = run_trl if args.child == "trl" else run_ours
        print(json.dumps(run(args.steps, args.max_tokens)), flush=True)
        return
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    lines = {}
    for name in ("trl", "rlvr"):
        command = [sys.executable, __file__, "--child", name, "--steps", str(args.steps)]
        command += ["--max-tokens", str(args.max_tokens)]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
        found = [json.loads(x) for x in result.stdout.splitlines() if x.startswith('{"trainer')]
        if result.returncode or not found:
            raise SystemExit(f"{name} failed: {result.stderr[-3000:]}")
        lines[name] = found[-1]
        print(json.dumps(found[-1]), flush=True)
    trl, ours = lines["trl"], lines["rlvr"]
    print(json.dumps({"speedup_step": round(trl["step_s"] / ours["step_s"], 2), "memory_ratio": round(
        ours["peak_mb"] / trl["peak_mb"], 2)}))  # fmt: skip


if __name__ == "__main__":
    main()
