"""``rlvr compare``: paired difference of two runs on the problems they share."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="paired comparison of two runs (difference with 95%% CI)",
        description="Difference B - A of mean@n on the problems both runs evaluated, with a paired bootstrap "
        "95% CI, and the protocol settings in which the runs differ.",
    )
    p.add_argument("run_a", help="baseline run directory")
    p.add_argument("run_b", help="run directory to compare against it")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.comparison import compare_runs, format_comparison

    result = compare_runs(Path(args.run_a), Path(args.run_b))
    print(json.dumps(result, indent=2) if args.json else format_comparison(result))
    return 0
