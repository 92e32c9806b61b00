"""``rlvr leaderboard``: tables and plots from every run directory under --results."""

from __future__ import annotations

import argparse

EPILOG = """\
writes OUT/README.md and OUT/leaderboard.csv (one table per protocol fingerprint: rows models,
columns benchmarks, mean@n with 95% CI, pass@n where n > 1, each model linked to its run),
OUT/leaderboard.parquet (every summary field, one row per run x benchmark) and OUT/index.html
(one self-contained page: sortable tables with a permalink each, download links, pass@k curves,
accuracy by template, response-length histograms for correct vs incorrect answers, truncation and
no-answer rates). Each score on the page links to OUT/samples/<run>.html: that run's samples
(prompt, completion, extracted answer, gold, verdict), for runs that kept samples.jsonl. A column
over part of a benchmark (--limit) is labelled with its share, e.g. gsm8k (4/1319).

Runs under different protocols (template, sampling, max tokens, engine, dtype, verifier version)
are never ranked together unless --mix is given; then the settings that differ become columns.

examples:
  rlvr leaderboard                                  results/ -> leaderboards/
  rlvr leaderboard --results results/ --out site/ --mix
  rlvr leaderboard --out site/ --diff old-site/     and what changed since old-site/ was built
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
    p.add_argument(
        "--no-sample-pages",
        dest="sample_pages",
        action="store_false",
        help="skip OUT/samples/<run>.html (each run's samples, linked from its cells)",
    )
    p.add_argument(
        "--diff",
        default=None,
        metavar="OLD_DIR",
        help="compare with an earlier build (its leaderboard.parquet): new and removed runs, scores moved beyond "
        "their CI; "
        "writes OUT/diff.md and OUT/diff.json",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlvr.harness.leaderboard.build import build_leaderboard

    if args.diff and Path(args.diff).resolve() == Path(args.out).resolve():
        from rlvr.harness.errors import UserError

        raise UserError("--diff needs the earlier build in another directory than --out (copy it first)")
    if args.diff:
        from rlvr.harness.leaderboard.diff import _frame

        _frame(Path(args.diff))  # a missing or old-format build is one clear error before anything is rebuilt
    info = build_leaderboard(args.results, args.out, args.mix, args.plots, args.sample_pages)
    pages = f", samples/ ({info['sample_pages']} run pages)" if info["sample_pages"] else ""
    print(
        f"{info['runs']} runs -> {info['tables']} table(s), plots: {', '.join(info['plots']) or 'none'} -> "
        f"{info['out']}/index.html, README.md, leaderboard.csv, leaderboard.parquet{pages}"
    )
    if args.diff:
        from rlvr.harness.leaderboard.diff import format_diff, write_diff

        print("\n" + format_diff(write_diff(Path(args.diff), Path(args.out))))
    return 0
