"""The ``rlvr`` command line: one entry point, one subcommand per job.

Errors the user can cause print one line that says what to do (exit code 2); anything else is
a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys

from harness.commands import (
    ablate,
    benchmarks,
    compare,
    contamination,
    demo,
    eval,
    export,
    grade,
    leaderboard,
    regrade,
    serve,
)
from harness.errors import UserError

DESCRIPTION = """\
rlvr: reinforcement learning with verifiable rewards.
One sandboxed verifier grades math and code; the same function is the RL reward during
training and the grader of every evaluation.
"""

EPILOG = """\
start here:
  rlvr demo                                   grade the shipped sample and print verdicts
  rlvr eval --benchmarks gsm8k --limit 20     evaluate (embedded model by default)
  rlvr benchmarks                             what can be evaluated
  rlvr regrade results/RUN --grader math-verify   grading vs generation: re-grade stored samples
  rlvr compare results/A results/B            paired difference with a 95% CI
  rlvr ablate templates --benchmarks arith    Dr. GRPO's template table (also: rlvr ablate prior)
  rlvr leaderboard                            results/ -> leaderboards/ (Markdown, CSV, parquet, HTML)
  rlvr contamination --train T.jsonl --out C/   which benchmark problems a training set holds
  rlvr export results/RUN --out DIR           a run's samples as a datasets/parquet/jsonl dataset
  rlvr train drgrpo --config cpu-demo         reference trainers (grpo, drgrpo, dapo, srpo, randopt, corp)
  rlvr grade --kind math --input IN.jsonl --output OUT.jsonl
  rlvr serve --port 8000                      reward server for TRL, verl, OpenRLHF
  rlvr <command> --help                       every command explains its flags
"""

COMMANDS = (eval, regrade, compare, ablate, leaderboard, export, contamination, benchmarks, grade, serve, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    from sandbox.version import PACKAGE_VERSION

    parser.add_argument("--version", action="version", version=f"rlvr {PACKAGE_VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for module in COMMANDS:
        module.register(sub)
    for module in plugin_commands():
        module.register(sub)
    return parser


def plugin_commands() -> list:
    """Command modules other packages register in the ``rlvr.commands`` entry-point group
    (the trainers add ``rlvr train``); the harness never imports them by name."""
    from importlib.metadata import entry_points

    modules = []
    for entry in entry_points(group="rlvr.commands"):
        try:
            modules.append(entry.load())
        except ImportError as exc:
            print(f"rlvr: command {entry.name!r} unavailable ({exc})", file=sys.stderr)
    return modules


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"rlvr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlvr {args.command}: interrupted; results written so far are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
