"""``rlvr eval``: evaluate a checkpoint on benchmarks under one protocol."""

from __future__ import annotations

import argparse
import json

from harness.backends.registry import BACKENDS
from harness.commands.options import add_ray_option
from harness.config import resolve_config
from harness.errors import UserError
from harness.eval_config import EvalConfig

S = argparse.SUPPRESS

EPILOG = """\
examples:
  rlvr eval --benchmarks gsm8k --limit 20                         embedded SmolLM2 on CPU, greedy
  rlvr eval --benchmarks arith --backend vllm                     the same with vLLM (CPU build; ~7x faster)
  rlvr eval --model Qwen/Qwen2.5-Math-1.5B --benchmarks aime2024,amc2023,math500,minerva_math,olympiadbench \\
            --template qwen_math --max-tokens 3000 --backend vllm      Dr. GRPO's evaluation protocol
  rlvr eval --model ckpt/ --benchmarks math500 --n 8 --temperature 0.6 --pass-k 1,8 --out results/ckpt-m500
  rlvr eval --backend openai --base-url http://localhost:8000/v1 --model my-model --benchmarks gsm8k
  rlvr eval --benchmarks data/my_set.jsonl --fields question=problem,answer=gold --kind math
  rlvr eval --config run.yaml --limit 50                          YAML keys = flag names; flags win
  rlvr eval --benchmarks arith --n 4 --temperature 0.7 --ray               engines on Ray (RAY_ADDRESS or local)

templates: qwen_math, r1, no_template (Dr. GRPO's exact strings), fewshot (--shots k), chat (the
model's chat template + the benchmark instruction), or a .yaml/.json/.txt template file.

writes OUT/config.yaml (resolved settings), OUT/samples.jsonl (one line per sample, appended as
it goes) and OUT/summary.json (fingerprint, model, versions, hardware, timings and per benchmark
mean@n with 95% CI, pass@k, maj@k, truncation / no-answer / timeout rates, lengths).
Run the same command again to resume: samples already written are never regenerated.
"""


def add_protocol_flags(
    p: argparse.ArgumentParser, backend_default: str = "hf", n_default: str = "1", temperature_default: str = "0"
) -> None:
    """Flags shared by ``eval`` and the ablations (all default to SUPPRESS: only typed flags
    override the YAML config); the ``*_default`` texts are what the help says each defaults to."""
    g = p.add_argument_group("protocol")
    g.add_argument(
        "--model",
        default=S,
        help="HF checkpoint dir or hub id (default: embedded SmolLM2-135M-Instruct); the served model id with "
        "--backend openai",
    )
    g.add_argument(
        "--benchmarks",
        default=S,
        help="comma-separated names (rlvr benchmarks), .jsonl/.parquet paths or hf:NAME[@split]",
    )
    g.add_argument("--shots", type=int, default=S, help="examples in the fewshot template (default 4)")
    g.add_argument("--n", type=int, default=S, help=f"samples per problem (default {n_default})")
    g.add_argument("--temperature", type=float, default=S, help=f"0 = greedy (default {temperature_default})")
    g.add_argument("--top-p", dest="top_p", type=float, default=S, help="nucleus sampling mass (default 1)")
    g.add_argument(
        "--max-tokens", dest="max_tokens", type=int, default=S, help="generation budget per sample (default 1024)"
    )
    g.add_argument(
        "--seed",
        type=int,
        default=S,
        help="run seed; each sample's seed is derived from it, the problem and the sample index (default 0)",
    )
    g.add_argument("--limit", type=int, default=S, help="evaluate the first N problems of each benchmark")
    g.add_argument("--pass-k", dest="pass_k", default=S, help="k values to report pass@k for (default: every k <= n)")
    b = p.add_argument_group("backend")
    b.add_argument(
        "--backend", choices=list(BACKENDS), default=S, help=f"generation backend (default {backend_default})"
    )
    b.add_argument("--dtype", default=S, help="auto (float32 on CPU, bfloat16 on GPU), float32, bfloat16, float16")
    b.add_argument("--device", default=S, help="hf and vllm backends: auto (CUDA if visible), cpu, cuda, cuda:1")
    b.add_argument(
        "--batch-size",
        dest="batch_size",
        type=int,
        default=S,
        help="hf backend: sequences per forward batch (default 16)",
    )
    b.add_argument(
        "--max-model-len", dest="max_model_len", type=int, default=S, help="context length cap (prompt + completion)"
    )
    b.add_argument("--base-url", dest="base_url", default=S, help="openai backend: e.g. http://localhost:8000/v1")
    b.add_argument(
        "--api-key-env",
        dest="api_key_env",
        default=S,
        help="openai backend: environment variable holding the key (default OPENAI_API_KEY)",
    )
    b.add_argument("--concurrency", type=int, default=S, help="openai backend: requests in flight (default 8)")
    b.add_argument(
        "--gpu-memory-utilization",
        dest="gpu_memory_utilization",
        type=float,
        default=S,
        help="vllm backend on a GPU (default 0.85)",
    )
    b.add_argument(
        "--kv-cache-gb",
        dest="kv_cache_gb",
        type=float,
        default=S,
        help="vllm backend on a CPU: RAM for the KV cache in GiB (default 1)",
    )
    add_ray_option(
        b,
        "generate on a Ray cluster, one engine per actor (ADDRESS, or none for RAY_ADDRESS / a local one)",
        default=S,
    )
    b.add_argument(
        "--ray-actors", dest="ray_actors", type=int, default=S, help="with --ray: engines (default: one per GPU/CPU)"
    )
    b.add_argument(
        "--ray-cpus-per-actor",
        dest="ray_cpus_per_actor",
        type=float,
        default=S,
        help="with --ray: CPUs per engine actor (default 1; its torch threads)",
    )
    v = p.add_argument_group("grading and data")
    v.add_argument(
        "--workers", type=int, default=S, help="grading worker processes per verifier (default min(4, CPUs))"
    )
    v.add_argument(
        "--math-timeout",
        dest="math_timeout",
        type=float,
        default=S,
        help="CPU seconds per math grade (default 1; a wall-clock backstop of 10x + 5 s)",
    )
    v.add_argument(
        "--code-limits",
        dest="code_limits",
        type=json.loads,
        default=S,
        help='JSON sandbox limits, e.g. \'{"time_s": 6, "memory_mb": 2048}\'',
    )
    v.add_argument(
        "--test-details",
        dest="test_details",
        action="store_true",
        default=S,
        help="keep the verifiers' own failure details (they quote hidden expected values) in samples.jsonl",
    )
    v.add_argument(
        "--fields", default=S, help="local/hub data: field mapping OURS=THEIRS, e.g. question=problem,answer=gold"
    )
    v.add_argument(
        "--kind",
        choices=["math", "code"],
        default=S,
        help="local/hub data: verifier kind (default: code if rows have tests)",
    )
    v.add_argument(
        "--policy",
        default=S,
        help="math verifier policy for every math problem, replacing each benchmark's own (local/hub data: math): "
        "math, gsm8k, minerva, olympiadbench, aime, arith, boxed_only, r1_format (Dr. GRPO's rewards)",
    )
    p.add_argument(
        "--config", default=S, help="YAML file of settings (keys = flag names with underscores); flags override it"
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", default=S, help="hide the progress bar")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a model on benchmarks (resumable, with CIs and a fingerprint)",
        description="Generate, grade with the sandbox verifiers, and summarise with 95% bootstrap CIs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_protocol_flags(p)
    p.add_argument(
        "--template", default=S, help="qwen_math (default), r1, no_template, fewshot, chat, or a template file"
    )
    p.add_argument("--out", default=S, help="run directory (default: results/<model>-<template>-<benchmarks>-...)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.evaluate import print_summary, run_eval

    try:
        cfg = resolve_config(EvalConfig, args)
    except json.JSONDecodeError as exc:
        raise UserError(f"--code-limits is not JSON: {exc.msg}") from exc
    summary = run_eval(cfg)
    print_summary(summary, cfg.run_dir())
    return 0
