"""``rlvr regrade``: grade stored completions again (ours or Math-Verify) without generating."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
examples:
  rlvr regrade results/RUN                        stored verdicts reproduce? (agree should be 100%)
  rlvr regrade results/RUN --grader math-verify   same completions, Hugging Face Math-Verify's grades
  rlvr regrade results/RUN --update               after a verifier upgrade: rewrite verdicts + summary

writes RUN/regrade-<grader>.jsonl (per sample: stored vs new verdict) and RUN/regrade-<grader>.json.
A gap between two tools' scores that survives regrading is due to generation, not grading.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "regrade",
        help="re-grade a run's stored generations (ours or math-verify)",
        description="Re-grade stored completions without regenerating, to separate grading from generation.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="a run directory written by `rlvr eval`")
    p.add_argument("--grader", choices=["ours", "math-verify"], default="ours", help="which grader (default ours)")
    p.add_argument(
        "--update", action="store_true", help="ours only: write the new verdicts into samples.jsonl and summary.json"
    )
    p.add_argument("--workers", type=int, default=None, help="grading worker processes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.regrade import format_report, regrade

    report = regrade(Path(args.run), args.grader, args.update, args.workers)
    print(format_report(report))
    return 0
