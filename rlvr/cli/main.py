"""The ``rlvr`` command line: one entry point, one subcommand per job. The harness's commands
and the trainers' ``rlvr train`` are imported here directly; packages that build on rlvr add
their own through the ``rlvr.commands`` entry-point group (``rlvr.harness.plugins``).

Errors the user can cause print one line that says what to do (exit code 2), file-system errors
included (``RLVR_DEBUG=1`` shows their traceback); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from rlvr.harness.commands import (
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
    show,
)
from rlvr.harness.errors import UserError, describe_os_error
from rlvr.harness.plugins import plugin_commands
from rlvr.trainers import cli as train

DESCRIPTION = """\
rlvr: reinforcement learning with verifiable rewards.
One sandboxed verifier grades math and code; the same function is the RL reward during
training and the grader of every evaluation.
"""

EPILOG = """\
start here:
  rlvr demo                                   the verifier, an eval, an ablation and RL on the embedded model
  rlvr eval --benchmarks gsm8k --limit 20     evaluate (embedded model by default)
  rlvr show results/RUN --wrong               look at a run's samples: prompt, completion, verdict
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

#: our own commands, in the order ``rlvr --help`` lists them (``demo`` is given the trainer)
COMMANDS = (eval, show, regrade, compare, ablate, leaderboard, export, contamination, benchmarks, grade, serve)


class Parser(argparse.ArgumentParser):
    """``rlvr``'s parser and every subcommand's (argparse gives subparsers their parent's class):
    exact flag names only (no prefix matching: ``--benchmark`` is not ``--benchmarks``), and an
    unknown flag is answered by the subcommand it was given to, with the closest flag it has."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        """A flag this parser does not know explains a missing required one (``--inpt``): say so."""
        if message.startswith("the following arguments are required"):
            known = {s for a in self._actions for s in a.option_strings}
            unknown = [x for x in getattr(self, "_seen", []) if x.startswith("--") and x.split("=", 1)[0] not in known]
            if unknown:
                message = unknown_flag_message(self, unknown)
        if message.startswith("argument <command>: invalid choice"):
            message = unknown_command_message(self, message)
        elif "--help" not in message:
            message += f" (`{self.prog} --help` explains every flag)"
        # one line, never under the usage block: the suggestion is what a reader needs first
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = self._innermost(parsed)
            owner.error(unknown_flag_message(owner, extras))
        return parsed

    def _innermost(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)command parser the user's arguments ended up in."""
        parser: argparse.ArgumentParser = self
        while True:
            action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(parsed, action.dest, None) if action is not None and action.dest else None
            if action is None or chosen not in action.choices:
                return parser
            parser = action.choices[chosen]


def unknown_command_message(parser: argparse.ArgumentParser, message: str) -> str:
    """``unknown command 'evl'; did you mean eval?``: argparse's invalid choice, with a guess."""
    import difflib

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    given = message.split("invalid choice: ", 1)[1].split(" (choose from", 1)[0].strip("'\"")
    guess = difflib.get_close_matches(given, list(action.choices), n=1, cutoff=0.5)
    hint = f"; did you mean {guess[0]}?" if guess else ""
    return f"unknown command {given!r}{hint} (`{parser.prog} --help` lists the commands)"


def unknown_flag_message(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """``unknown flag --benchmark; did you mean --benchmarks?`` (difflib over the parser's flags)."""
    import difflib

    flags = sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})
    unknown = [x for x in extras if x.startswith("-")]
    if not unknown:
        return f"unexpected argument(s) {' '.join(extras)}; see `{parser.prog} --help`"
    first = unknown[0].split("=", 1)[0]
    guesses = [f for f in flags if f.startswith(first)] or difflib.get_close_matches(first, flags, n=1, cutoff=0.6)
    hint = f"; did you mean {' or '.join(guesses[:2])}?" if guesses else ""
    more = f" (and {' '.join(unknown[1:])})" if len(unknown) > 1 else ""
    return f"unknown flag {first}{more}{hint} (`{parser.prog} --help` lists every flag)"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser. Given the ``argv`` it will parse, the per-algorithm parsers of
    ``rlvr train`` are built only when ``train`` is among its words: their flags' help is read
    from the rule tables, which import torch (1.5 s on a command that never trains)."""
    parser = Parser(
        prog="rlvr", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    from rlvr.sandbox.version import PACKAGE_VERSION

    parser.add_argument("--version", action="version", version=f"rlvr {PACKAGE_VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for module in COMMANDS:
        module.register(sub)
    demo.register(sub, train.train_run)
    train.register(sub, algorithms=argv is None or "train" in argv)
    for module in plugin_commands(exclude=set(sub.choices)):
        module.register(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: finished work is kept and what is half-made is cleaned up."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    import signal
    import threading

    handled = (
        threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    )
    if handled:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _run(args)
    finally:
        if handled:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"rlvr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # the file system's and the network's errors are the user's to fix (a path, a permission,
        # a full disk): one line naming the path; RLVR_DEBUG=1 keeps the traceback
        if os.environ.get("RLVR_DEBUG"):
            raise
        print(f"rlvr {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        kept = getattr(exc, "rlvr_kept", None)
        print(f"rlvr {args.command}: interrupted" + (f"; {kept}" if kept else ""), file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
