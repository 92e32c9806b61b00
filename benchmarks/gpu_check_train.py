"""GPU check for the trainers' vLLM rollouts (run on a CUDA machine with vLLM installed).

On a tiny random-initialised Llama with SmolLM2's tokenizer (nothing downloaded): roll out with
the colocated vLLM engine, run one learner update on the GPU with non-zero advantages, sync the
weights, and assert that vLLM's log-probs of the sampled tokens now match the learner's (and
that they did not before the sync, so the check can fail). Then trains 2 Dr. GRPO steps with
``backend: vllm`` and prints the step time split (generate / score / learn / sync).

    python benchmarks/gpu_check_train.py [--out /tmp/rlvr-gpu-train]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/rlvr-gpu-train")
    parser.add_argument("--tolerance", type=float, default=0.05, help="max |Δ log-prob| per token (bf16)")
    args = parser.parse_args()

    import torch
    from gpu_check_eval import tiny_llama

    from harness.backends.hf import load_model
    from harness.benchmarks.registry import load_problems
    from harness.templates import load_template
    from trainers.config import build_config
    from trainers.loop import run_training, source_instruction
    from trainers.update import batch_logprobs, pack, policy_update
    from trainers.vllm_rollout import VLLMRollout

    out = Path(args.out)
    model_dir = tiny_llama(out / "tiny-llama")
    cfg = build_config(
        "drgrpo",
        "cpu-demo",
        {
            "model": str(model_dir),
            "backend": "vllm",
            "device": "cuda",
            "dtype": "bfloat16",
            "max_tokens": 16,
            "lr": 1e-3,
            "out": str(out / "run"),
            "max_steps": 2,
        },
    )
    model, tokenizer, device = load_model(str(model_dir), "bfloat16", "cuda")
    model.train()
    rollout = VLLMRollout(model, tokenizer, load_template("chat"), dict([source_instruction("arith_train")]), cfg)
    problems = load_problems("arith_train")[:8]
    sampled = rollout.sample(problems, 2, step=0)
    prompts = [p for p, completions, _, _ in sampled for _ in completions]
    completions = [c for _, cs, _, _ in sampled for c in cs]
    advantages = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(completions))])
    batch = pack(prompts, completions, advantages, torch.ones(len(completions)), tokenizer.pad_token_id, device)
    batch.old_logp = batch_logprobs(model, batch, 8)
    policy_update(model, torch.optim.AdamW(model.parameters(), lr=1e-3), batch, cfg)

    def learner(i: int) -> list[float]:
        one = pack([prompts[i]], [completions[i]], advantages[:1], torch.ones(1), tokenizer.pad_token_id, device)
        logp = batch_logprobs(model, one, 1)[0]
        return logp[one.completion_mask[0].bool()].float().tolist()

    def gap() -> float:
        return max(
            max(abs(a - b) for a, b in zip(learner(i), rollout.token_logprobs(prompts[i], completions[i])))
            for i in range(4)
            if completions[i]
        )

    stale = gap()
    rollout.sync(model)
    synced = gap()
    report = {
        "max_abs_logprob_gap_before_sync": stale,
        "max_abs_logprob_gap_after_sync": synced,
        "tolerance": args.tolerance,
    }
    run = run_training(cfg, progress=True)
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    report["step_time_split_s"] = [
        {k: line[k] for k in ("time_generate", "time_score", "time_learn", "time_sync")} for line in log
    ]
    print(json.dumps(report, indent=1))
    ok = synced <= args.tolerance < stale
    print(json.dumps({"sync_check": "ok" if ok else "FAILED"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
