"""The learner's memory features that only a GPU can show, in one short run (`make test-gpu`).

1. **vLLM sleeps and wakes**: a rollout engine started with sleep mode and CUDA graphs (no
   ``enforce_eager``) frees most of its GPU memory on ``sleep()``; after ``wake()`` and a weight
   push, greedy generation is token-identical to before the sleep.
2. **A training run with every feature on**: ``rlvr train drgrpo --config cpu-demo`` on the
   embedded model, ``backend: vllm``, bfloat16 compute, ``gradient_checkpointing``,
   ``logits_chunk``, ``micro_token_budget``, ``vllm_sleep`` (two steps, on CUDA).
3. **Prediction against ``torch.cuda.max_memory_allocated``**: one update on the embedded
   model at 2,048 and 8,192 response tokens under bfloat16 autocast, the measured peak beside
   ``rlvr.trainers.policy_gradient.memory.update_peak`` (reported; the CPU benchmark is the one the README's 15%
   table comes from).

Prints one JSON report; exit status 0 only if checks 1 and 2 passed.

    python benchmarks/gpu_check_train_memory.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def sleep_and_wake() -> dict:
    import torch
    from rlvr.harness.backends.hf import load_model
    from rlvr.harness.backends.vllm_engine import push_weights, start_engine
    from rlvr.harness.models import resolve_model
    from vllm import SamplingParams

    path = resolve_model(None)[0]
    llm = start_engine(path, dtype="bfloat16", device="cuda", gpu_memory_utilization=0.3, enable_sleep_mode=True)
    learner, tokenizer, _ = load_model(path, "bfloat16", "cuda")
    prompts = [{"prompt_token_ids": tokenizer(f"What is {i} + {i}?").input_ids} for i in range(4)]
    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    before = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, greedy, use_tqdm=False)]
    torch.cuda.synchronize()
    free_awake = torch.cuda.mem_get_info()[0]
    llm.sleep(level=1)
    free_asleep = torch.cuda.mem_get_info()[0]
    llm.wake_up()
    push_weights(llm, ((n, p.detach()) for n, p in learner.named_parameters()))
    after = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, greedy, use_tqdm=False)]
    freed_gb = (free_asleep - free_awake) / 1e9
    total_gb = torch.cuda.mem_get_info()[1] / 1e9
    cuda_graphs = not llm.llm_engine.model_config.enforce_eager  # start_engine's default on a GPU
    return {
        "freed_gb": round(freed_gb, 2),
        "engine_share_gb": round(0.3 * total_gb, 2),
        "same_tokens_after_wake": before == after,
        "cuda_graphs": cuda_graphs,
        "passed": before == after and freed_gb > 0.5 * 0.3 * total_gb and cuda_graphs,
    }


def train_run() -> dict:
    with tempfile.TemporaryDirectory() as out:
        sets = {
            "backend": "vllm",
            "compute_dtype": "bfloat16",
            "gradient_checkpointing": "true",
            "logits_chunk": 256,
            "micro_token_budget": 512,
            "vllm_sleep": "true",
            "device": "cuda",
        }
        command = [sys.executable, "-m", "rlvr.cli", "train", "drgrpo", "--config", "cpu-demo", "--out", out]
        command += ["--max-steps", "2", "--no-progress"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        log = (Path(out) / "train_log.jsonl").read_text().splitlines() if result.returncode == 0 else []
        return {"returncode": result.returncode, "steps": len(log), "stderr": result.stderr[-1500:],
                "passed": result.returncode == 0 and len(log) == 2}  # fmt: skip


def predicted_vs_measured(tokens: int) -> dict:
    import torch
    from bench_train_memory import PROMPT, _config, settings
    from rlvr.trainers.policy_gradient.memory import dims_from_config, update_peak
    from rlvr.trainers.policy_gradient.update import batch_logprobs, pack, policy_update
    from rlvr.trainers.runtime.precision import Precision
    from transformers import LlamaForCausalLM

    cfg = settings(tokens, ())
    cfg.compute_dtype = "bfloat16"
    model = LlamaForCausalLM(_config()).float().cuda().train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    precision = Precision(cfg, "cuda")
    precision.wrap(model)
    vocab = model.config.vocab_size
    lengths = [tokens, tokens // 4]
    ids = lambda n: torch.randint(3, vocab, (n,)).tolist()  # noqa: E731
    batch = pack([ids(PROMPT) for _ in lengths], [ids(n) for n in lengths], torch.tensor([1.0, -1.0]),
                 torch.ones(2), 0, "cuda")  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    torch.cuda.reset_peak_memory_stats()
    batch.old_logp = batch_logprobs(model, batch, 2, cfg.logits_chunk, cfg.micro_token_budget)
    policy_update(model, optimizer, batch, cfg, precision)
    measured = torch.cuda.max_memory_allocated() / 2**20
    rows = [PROMPT + n for n in lengths]
    predicted = update_peak(dims_from_config(_config().to_dict()), cfg, rows, device="cuda", prompt=PROMPT)
    del model, optimizer
    torch.cuda.empty_cache()
    return {
        "tokens": tokens,
        "measured_mb": round(measured, 1),
        "predicted_mb": round(predicted["total_bytes"] / 2**20, 1),
    }


def main() -> int:
    report = {"sleep_wake": sleep_and_wake()}
    report["train_run"] = train_run()
    report["prediction"] = [predicted_vs_measured(t) for t in (2048, 8192)]
    report["all_passed"] = report["sleep_wake"]["passed"] and report["train_run"]["passed"]
    print(json.dumps(report, indent=1))
    return 0 if report["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
