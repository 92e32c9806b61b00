"""GPU check for the evaluation backends (run on a CUDA machine with vLLM installed).

Builds a tiny random-initialised Llama with SmolLM2's tokenizer (a few MB; nothing is
downloaded), then on the same prompts and seeds runs the ``hf`` backend on the GPU and the
``vllm`` backend, checks every sample is well formed and recorded with the same fields and
types by both, reports greedy token agreement, and prints tokens/s of each and their ratio.
Finally runs ``rlvr eval --backend vllm`` end to end on the tiny model.

    python benchmarks/gpu_check_eval.py [--out /tmp/gpu-check] [--prompts 64] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def tiny_llama(out: Path) -> Path:
    """A 2-layer Llama with SmolLM2's tokenizer and random weights (seeded)."""
    import torch
    from rlvr.harness.models import embedded_model_dir
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/rlvr-gpu-check")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    from rlvr.harness.backends.base import GenerationRequest, SamplingParams, sample_seed
    from rlvr.harness.backends.hf import HFBackend
    from rlvr.harness.backends.vllm_engine import VLLMBackend
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.sample_sink import sample_record
    from rlvr.harness.templates import BUILTIN, render
    from rlvr.sandbox.verdict import Verdict

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = tiny_llama(out / "tiny-llama")
    problems = load_problems("gsm8k", args.prompts)
    template = BUILTIN["qwen_math"]
    results = {}
    for temperature in (0.0, 0.8):
        params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=args.max_tokens)
        requests = [GenerationRequest(render(template, p.question), sample_seed(0, p.id, 0)) for p in problems]
        runs = {}
        for name, make in (
            ("hf", lambda: HFBackend(str(model_dir), "bfloat16", "cuda", batch_size=64)),
            ("vllm", lambda: VLLMBackend(str(model_dir), "bfloat16", 0, 2048, 0.3)),
        ):
            backend = make()
            backend.generate(requests[:2], params)  # warm-up
            t0 = time.time()
            gens = backend.generate(requests, params)
            seconds = time.time() - t0
            backend.close()
            dummy = Verdict(False, 0.0, "no_answer", None, 0.0, "check", "")
            records = [
                sample_record("gsm8k", p, 0, r.seed, template, g, dummy) for p, r, g in zip(problems, requests, gens)
            ]
            for g in gens:
                assert isinstance(g.text, str) and g.finish_reason in ("stop", "length"), g
                assert 0 < g.n_tokens <= args.max_tokens and g.n_prompt_tokens > 0
            runs[name] = {
                "records": records,
                "tokens": sum(g.n_tokens for g in gens),
                "seconds": seconds,
                "ids": [g.token_ids for g in gens],
            }
        hf, vl = runs["hf"], runs["vllm"]
        assert [sorted(r) for r in hf["records"]] == [sorted(r) for r in vl["records"]], "record fields differ"
        assert [{k: type(v).__name__ for k, v in r.items()} for r in hf["records"]] == [
            {k: type(v).__name__ for k, v in r.items()} for r in vl["records"]
        ]
        assert [r["prompt"] for r in hf["records"]] == [r["prompt"] for r in vl["records"]], "prompts as sent differ"
        first = sum(a[:1] == b[:1] for a, b in zip(hf["ids"], vl["ids"])) / len(problems)
        results[f"temperature_{temperature}"] = {
            "hf_tokens_per_s": round(hf["tokens"] / hf["seconds"], 1),
            "vllm_tokens_per_s": round(vl["tokens"] / vl["seconds"], 1),
            "vllm_over_hf": round((vl["tokens"] / vl["seconds"]) / (hf["tokens"] / hf["seconds"]), 2),
            "first_token_agreement": round(first, 3),
            "identical_completions": sum(a == b for a, b in zip(hf["ids"], vl["ids"])),
            "prompts": len(problems),
        }
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr.cli",
            "eval",
            "--backend",
            "vllm",
            "--model",
            str(model_dir),
            "--benchmarks",
            "gsm8k,humanevalplus",
            "--limit",
            "8",
            "--n",
            "2",
            "--temperature",
            "0.8",
            "--max-tokens",
            "64",
            "--no-progress",
            "--max-model-len",
            "2048",
            "--gpu-memory-utilization",
            "0.3",
            "--out",
            str(out / "eval-vllm"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    results["rlvr_eval_vllm_rc"] = cli.returncode
    if cli.returncode != 0:
        print(cli.stderr[-3000:])
    print(json.dumps(results, indent=2))
    (out / "gpu_check_eval.json").write_text(json.dumps(results, indent=2))
    return 0 if cli.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
