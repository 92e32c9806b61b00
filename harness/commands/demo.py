"""``rlvr demo``: the main job on the embedded defaults, on the CPU, in a few minutes.

1. Grades a shipped sample of realistic completions (honest, wrong, hedging, hostile) and prints
   the verdicts: what the verifier decides and why.
2. Evaluates the embedded model (SmolLM2-135M-Instruct) on small slices of GSM8K, MATH500 and
   HumanEval+ with ``rlvr eval`` and prints the table with 95% CIs. The run directory resumes,
   so a second ``make demo`` is instant.
3. Builds the leaderboard of the demo runs (Markdown, CSV and a self-contained HTML page).
"""
from __future__ import annotations

import argparse
import json
from importlib import resources


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded defaults and print the results")
    p.add_argument("--timeout", type=float, default=1.0, help="grading deadline per item in seconds")
    p.add_argument("--results", default="results/demo", help="where the demo's evaluation run goes (default results/demo)")
    p.add_argument("--limit", type=int, default=16, help="problems per benchmark (default 16; HumanEval+ gets half)")
    p.add_argument("--grading-only", action="store_true", help="only step 1 (no model)")
    p.set_defaults(func=run)


def _cell(text: str | None, width: int) -> str:
    text = "" if text is None else " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def run(args: argparse.Namespace) -> int:
    show_grading(args.timeout)
    if not args.grading_only:
        evaluate_embedded(args)
    return 0


def evaluate_embedded(args: argparse.Namespace) -> None:
    from pathlib import Path

    from harness.eval_config import EvalConfig
    from harness.evaluate import print_summary, run_eval

    print("\n== the embedded model (SmolLM2-135M-Instruct) on small slices, CPU ==")
    for benchmarks, limit, max_tokens in (("gsm8k,math500", args.limit, 320), ("humanevalplus", max(1, args.limit // 2), 320)):
        out = Path(args.results) / f"smollm2-135m-instruct-chat-{benchmarks.replace(',', '+')}-limit{limit}"
        cfg = EvalConfig(benchmarks=benchmarks, template="chat", limit=limit, max_tokens=max_tokens, out=str(out))
        print_summary(run_eval(cfg), out)
    from harness.leaderboard.build import build_leaderboard

    board = Path(args.results) / "leaderboard"
    info = build_leaderboard(Path(args.results), board)
    print(f"\nleaderboard of {info['runs']} demo runs: {board}/README.md and {board}/index.html (open it in a browser)")


def show_grading(timeout: float) -> None:
    from sandbox.math.verify import MathGrader

    sample = resources.files("harness") / "data" / "demo" / "math_completions.jsonl"
    rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    grader = MathGrader(timeout=timeout)
    try:
        verdicts = grader.verify_batch(rows)
    finally:
        grader.close()
    header = f"{'id':<16} {'gold':<22} {'extracted':<22} {'correct':<7} {'reason':<12} {'ms':>7}  rule"
    print(header)
    print("-" * len(header))
    for row, v in zip(rows, verdicts):
        print(
            f"{_cell(row['id'], 16):<16} {_cell(row['answer'], 22):<22} {_cell(v.extracted, 22):<22} "
            f"{str(v.correct):<7} {v.reason:<12} {v.elapsed_ms:7.1f}  {_cell(v.detail, 40)}"
        )
    correct = sum(v.correct for v in verdicts)
    print(f"\n{len(verdicts)} completions graded by {verdicts[0].verifier}: {correct} correct")
