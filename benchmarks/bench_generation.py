"""Generation speed of the ``hf`` backend against ``vllm`` (vLLM's CPU build here), measured in one run.

Both backends get the same prompts (GSM8K questions in the embedded model's chat template; each
sample its own seed, so both draw the same kind of sample) and the same sampling settings, on
the same cores. Start-up (model load; for vLLM also engine start) is timed apart from
generation. Reported per backend: start-up seconds, generation wall seconds, tokens generated,
tokens/s; then each vLLM run's ratio to ``hf`` on tokens/s and on wall time with start-up
included, the number that decides which engine a job of this size should use.

    python benchmarks/bench_generation.py [--prompts 64] [--max-tokens 64] [--temperature 1.0]
        [--dtypes float32,bfloat16] [--hf-batch 16] [--model PATH] [--json out.json]

``--prompts 192 --max-tokens 12 --temperature 0`` is the shape of a population member's scoring
(short answers: prefill-bound, where the engines are closest).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlvr.harness.backends.base import GenerationRequest, SamplingParams, sample_seed  # noqa: E402


def requests(count: int) -> list[GenerationRequest]:
    from rlvr.harness.benchmarks.registry import load_problems

    problems = load_problems("gsm8k")[:count]
    return [GenerationRequest([{"role": "user", "content": p.question}], sample_seed(0, p.id, 0)) for p in problems]


def measure(make, batch: list[GenerationRequest], params: SamplingParams) -> dict:
    t0 = time.perf_counter()
    backend = make()
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = backend.generate(batch, params)
    wall = time.perf_counter() - t0
    backend.close()
    tokens = sum(g.n_tokens or 0 for g in out)
    return {
        "startup_s": round(startup, 1),
        "generate_s": round(wall, 1),
        "tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="vLLM dtypes to run (hf runs float32)")
    parser.add_argument("--hf-batch", type=int, default=16)
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the embedded model)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from rlvr.harness.backends.hf import HFBackend
    from rlvr.harness.backends.vllm_engine import VLLMBackend
    from rlvr.harness.models import resolve_model

    path = resolve_model(args.model)[0]
    batch = requests(args.prompts)
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
    runs = {"hf float32": measure(lambda: HFBackend(path, "float32", "cpu", args.hf_batch), batch, params)}
    for dtype in [d for d in args.dtypes.split(",") if d]:
        runs[f"vllm {dtype}"] = measure(lambda: VLLMBackend(path, dtype, device="cpu"), batch, params)
    hf = runs["hf float32"]
    print(f"{args.prompts} prompts x up to {args.max_tokens} tokens, temperature {args.temperature}, same cores\n")
    header = ("engine", "start-up s", "generate s", "tokens", "tokens/s", "x hf tok/s", "x hf wall")
    print(f"{header[0]:<16}" + "".join(f"{h:>12}" for h in header[1:]))
    for name, r in runs.items():
        speed = r["tokens_per_s"] / hf["tokens_per_s"]
        wall = (hf["startup_s"] + hf["generate_s"]) / (r["startup_s"] + r["generate_s"])
        r.update(tokens_per_s_ratio=round(speed, 2), wall_ratio_with_startup=round(wall, 2))
        print(
            f"{name:<16}{r['startup_s']:>12}{r['generate_s']:>12}{r['tokens']:>12}{r['tokens_per_s']:>12}"
            f"{speed:>11.2f}x{wall:>11.2f}x"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
