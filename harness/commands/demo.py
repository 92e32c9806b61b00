"""``rlvr demo``: the main job on the embedded defaults.

For now it grades a shipped sample of realistic completions (honest, wrong, hedging and
hostile) and prints the verdict table.
"""
from __future__ import annotations

import argparse
import json
from importlib import resources


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded defaults and print the results")
    p.add_argument("--timeout", type=float, default=1.0, help="grading deadline per item in seconds")
    p.set_defaults(func=run)


def _cell(text: str | None, width: int) -> str:
    text = "" if text is None else " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def run(args: argparse.Namespace) -> int:
    from sandbox.math.verify import MathGrader

    sample = resources.files("harness") / "data" / "demo" / "math_completions.jsonl"
    rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    grader = MathGrader(timeout=args.timeout)
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
    return 0
