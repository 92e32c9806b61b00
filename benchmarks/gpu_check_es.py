"""GPU check for RandOpt / CoRP populations in vLLM (run on a CUDA machine with vLLM installed).

A tiny random-initialised Llama with SmolLM2's tokenizer (nothing downloaded) inside a vLLM
engine: perturb its weights in place for 8 specs, evaluate each greedily on a few ``arith``
problems, verify after each that restoring gives back the exact base (checksum over every
parameter), that re-applying a spec reproduces the same outputs, and print perturbations/s of
the vLLM path against the CPU path (``trainers.population``) on the same model and problems.

    python benchmarks/gpu_check_es.py [--out /tmp/rlvr-gpu-es] [--problems 16]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/rlvr-gpu-es")
    parser.add_argument("--problems", type=int, default=16)
    args = parser.parse_args()

    from gpu_check_eval import tiny_llama

    from trainers.corp_ops import draw_population
    from trainers.loop import source_instruction, source_problems
    from trainers.perturb import Component
    from trainers.population import PopulationScorer
    from trainers.vllm_population import VLLMPerturbedGenerator

    model_dir = str(tiny_llama(Path(args.out) / "tiny-llama"))
    problems = source_problems("arith_train")[: args.problems]
    instructions = dict([source_instruction("arith_train")])
    seeds, sigmas = draw_population(8, [0.01, 0.02], seed=42)
    specs = [[Component(s, sigma)] for s, sigma in zip(seeds, sigmas)]
    engine = VLLMPerturbedGenerator(model_dir, "chat", instructions, 16, "bfloat16")
    base_out = engine.generate([], problems)
    exact, t0 = True, time.perf_counter()
    outputs = []
    for spec in specs:
        outputs.append(engine.generate(spec, problems))
        exact &= engine.is_base()
    gpu_rate = len(specs) / (time.perf_counter() - t0)
    again = engine.generate(specs[0], problems)
    changed = sum(o != base_out for o in outputs)
    cpu = PopulationScorer(model_dir, "chat", instructions, 16, 32, "float32", 0.0, device="cpu")
    t0 = time.perf_counter()
    cpu.score_many(specs[:2], problems)
    cpu_rate = 2 / (time.perf_counter() - t0)
    cpu.close()
    report = {
        "restore_exact_after_every_perturbation": exact,
        "respec_reproduces_outputs": again == outputs[0],
        "perturbations_changing_outputs": changed,
        "gpu_perturbations_per_s": round(gpu_rate, 3),
        "cpu_perturbations_per_s": round(cpu_rate, 3),
        "gpu_over_cpu": round(gpu_rate / cpu_rate, 2),
    }
    print(json.dumps(report, indent=1))
    return 0 if exact and again == outputs[0] else 1


if __name__ == "__main__":
    sys.exit(main())
