"""``rlvr eval``: evaluate a checkpoint on benchmarks under one protocol."""

from __future__ import annotations

import argparse
import json

from rlvr.harness.commands.options import add_eval_flags
from rlvr.harness.config import resolve_config
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig

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
Run the same command again to resume: samples already written are never regenerated. A resume
may change the settings marked [not scored]; it refuses any other change.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a model on benchmarks (resumable, with CIs and a fingerprint)",
        description="Generate, grade with the sandbox verifiers, and summarise with 95% bootstrap CIs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_eval_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.evaluate import print_summary, run_eval

    try:
        cfg = resolve_config(EvalConfig, args)
    except json.JSONDecodeError as exc:
        raise UserError(f"--code-limits is not JSON: {exc.msg}") from exc
    summary = run_eval(cfg)
    print_summary(summary, cfg.run_dir())
    return 0
