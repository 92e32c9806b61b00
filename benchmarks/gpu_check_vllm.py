"""The vLLM checks a CPU cannot settle, in one run on one CUDA GPU (under 10 minutes; `make test-gpu`).

The CPU suite already proves on vLLM's CPU build: eval parity with hf, resume, rollout sync,
the prefix-cache reset, Dr. GRPO with ``backend: vllm``, populations equal to hf. Here, on CUDA:

1. **CUDA graphs with in-place weight updates**: a rollout engine built *without* ``enforce_eager``
   (captured graphs hold weight pointers), weights pushed with ``push_weights``; vLLM's log-probs
   of sampled tokens must match the learner's after the push and not before.
2. **bf16 log-prob gap** of the same check on a real model (``--model``, e.g. a local
   Qwen2.5-Math-1.5B; skipped when absent), reported against ``--tolerance``.
3. **Two engines in one process**: an eval engine beside a live rollout engine, both generating.
4. **Multi-process engine mode**: the eval backend with ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` (engine
   core in its own process) gives the in-process engine's greedy tokens; a weight-pushing engine
   asked for under that setting is still built in-process.
5. A population member perturbed in place and restored: greedy log-probs bit-identical to before.

Prints one JSON report; exit status 0 only if every check passed.

    python benchmarks/gpu_check_vllm.py [--model /path/to/Qwen2.5-Math-1.5B] [--tolerance 0.05]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def sync_gaps(model_dir: str, dtype: str, eager: bool) -> tuple[dict, object]:
    """Log-prob gap between engine and learner before and after a push (CUDA graphs unless eager)."""
    import torch
    from rlvr.harness.backends.hf import load_model
    from rlvr.harness.backends.vllm_engine import push_weights, start_engine
    from vllm_helpers import learner_logprobs, max_gap

    learner, tokenizer, _ = load_model(model_dir, dtype, "cuda")
    llm = start_engine(
        model_dir, dtype=dtype, device="cuda", gpu_memory_utilization=0.3, enforce_eager=eager, max_model_len=2048
    )
    from vllm import SamplingParams

    prompts = [tokenizer(f"Question {i}: what is {i} + {i}?").input_ids for i in range(4)]
    params = SamplingParams(temperature=1.0, max_tokens=16, min_tokens=8, seed=0, logprobs=0)

    def gap() -> float:
        outs = [o.outputs[0] for o in llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)]
        learner_fp32 = learner.float()
        try:
            return max(
                max_gap(
                    learner_logprobs(learner_fp32, p, list(o.token_ids)),
                    [lp[t].logprob for lp, t in zip(o.logprobs, o.token_ids)],
                )
                for p, o in zip(prompts, outs)
            )
        finally:
            learner.to(getattr(torch, dtype))

    synced_at_start = gap()
    with torch.no_grad():
        generator = torch.Generator(device="cuda").manual_seed(1)
        for p in learner.parameters():
            p.add_(0.02 * p.abs().mean() * torch.randn(p.shape, generator=generator, device="cuda", dtype=p.dtype))
    stale = gap()
    t0 = time.perf_counter()
    push_weights(llm, learner.named_parameters())
    push_s = time.perf_counter() - t0
    synced = gap()
    return {"before_push": stale, "after_push": synced, "at_start": synced_at_start, "push_s": round(push_s, 3)}, llm


def greedy_logprobs(population, problems) -> list:
    outputs = population.greedy(problems, logprobs=True)
    return [(list(o.token_ids), [lp[t].logprob for lp, t in zip(o.logprobs, o.token_ids)]) for o in outputs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/rlvr-gpu-vllm")
    parser.add_argument("--model", default=None, help="a real checkpoint for the bf16 gap (skipped when absent)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="max |Δ log-prob| per token in bf16")
    args = parser.parse_args()

    import torch
    from rlvr.harness.backends.base import GenerationRequest, SamplingParams
    from rlvr.harness.backends.vllm_engine import MULTIPROCESSING_ENV, VLLMBackend, start_engine
    from rlvr.harness.models import tiny_random_model

    assert torch.cuda.is_available(), "no CUDA GPU visible"
    out = Path(args.out)
    tiny = str(tiny_random_model(out / "tiny", hidden=256, layers=2, heads=4, tie=True))
    report: dict = {"gpu": torch.cuda.get_device_name(0)}
    checks: dict[str, bool] = {}

    graphs, rollout_llm = sync_gaps(tiny, "float32", eager=False)
    report["cuda_graphs_fp32"] = graphs
    checks["cuda_graphs_follow_pushed_weights"] = graphs["after_push"] < 1e-3 < graphs["before_push"]

    if args.model and Path(args.model).exists():
        real, real_llm = sync_gaps(args.model, "bfloat16", eager=False)
        report["real_model_bf16"] = {"model": args.model, **real, "tolerance": args.tolerance}
        checks["real_model_bf16_gap"] = real["after_push"] <= args.tolerance < real["before_push"]
        del real_llm
    else:
        report["real_model_bf16"] = "skipped (no --model)"

    requests = [GenerationRequest(f"Count: {i}, {i + 1},", seed=i) for i in range(8)]
    greedy = SamplingParams(temperature=0.0, max_tokens=16)
    second = VLLMBackend(tiny, "float32", gpu_memory_utilization=0.2, device="cuda")
    in_process = [g.token_ids for g in second.generate(requests, greedy)]
    rollout_tokens = rollout_llm.generate(["Count: 1, 2,"], use_tqdm=False)[0].outputs[0].token_ids
    checks["two_engines_in_one_process"] = bool(in_process) and len(rollout_tokens) > 0
    second.close()

    os.environ[MULTIPROCESSING_ENV] = "1"
    multi = VLLMBackend(tiny, "float32", gpu_memory_utilization=0.2, device="cuda")
    checks["multiprocess_engine_same_greedy_tokens"] = [g.token_ids for g in multi.generate(requests, greedy)] == (
        in_process
    )
    multi.close()
    forced = start_engine(tiny, dtype="float32", device="cuda", gpu_memory_utilization=0.2)
    from vllm.v1.engine.core_client import InprocClient

    checks["weight_engine_forced_in_process"] = isinstance(forced.llm_engine.engine_core, InprocClient)
    del forced
    os.environ.pop(MULTIPROCESSING_ENV)

    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.benchmarks.sources import source_instructions
    from rlvr.trainers.populations.perturb import Component
    from rlvr.trainers.populations.vllm_weights import VLLMPerturbedGenerator

    problems = load_problems("arith_train")[:16]
    population = VLLMPerturbedGenerator(
        tiny, "chat", source_instructions(["arith_train"]), 12, "bfloat16", dtype="bfloat16", device="cuda"
    )
    before = greedy_logprobs(population, problems)
    population.generate([Component(7, 0.01)], problems)
    after = greedy_logprobs(population, problems)
    checks["population_restore_bit_identical"] = before == after

    report["checks"] = checks
    report["all_passed"] = all(checks.values())
    print(json.dumps(report, indent=1))
    return 0 if report["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
