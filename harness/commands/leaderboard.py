"""``rlvr leaderboard``: tables and plots from every run directory under --results."""

from __future__ import annotations

import argparse

EPILOG = """\
writes OUT/README.md and OUT/leaderboard.csv (one table per protocol fingerprint: rows models,
columns benchmarks, mean@n with 95% CI, pass@n where n > 1, each model linked to its run) and
OUT/index.html (one self-contained page: sortable tables, pass@k curves, accuracy by template,
response-length histograms for correct vs incorrect answers, truncation and no-answer rates).

Runs under different protocols (template, sampling, max tokens, engine, dtype, verifier version)
are never ranked together unless --mix is given; then the settings that differ become columns.

examples:
  rlvr leaderboard                                  results/ -> leaderboards/
  rlvr leaderboard --results results/ --out site/ --mix
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="build Markdown/CSV/HTML leaderboards from run directories",
        description="Build leaderboards from every run summary under --results.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--results", default="results", help="directory searched (recursively) for run summaries (default results/)"
    )
    p.add_argument("--out", default="leaderboards", help="output directory (default leaderboards/)")
    p.add_argument(
        "--mix", action="store_true", help="one table for all protocols, differing settings shown as columns"
    )
    p.add_argument("--no-plots", dest="plots", action="store_false", help="skip the plots (faster)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.leaderboard.build import build_leaderboard

    info = build_leaderboard(args.results, args.out, args.mix, args.plots)
    print(
        f"{info['runs']} runs -> {info['tables']} table(s), plots: {', '.join(info['plots']) or 'none'} -> "
        f"{info['out']}/index.html, README.md, leaderboard.csv"
    )
    return 0
