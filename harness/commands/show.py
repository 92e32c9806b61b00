"""``rlvr show``: look at a run's samples in the terminal (or as JSON lines for scripts)."""

from __future__ import annotations

import argparse
import json
import sys

EPILOG = """\
each sample: its id, sample index, benchmark and verdict (correct / wrong and the reason), the
prompt as sent (its end; --full for all), the completion, the extracted answer, the gold answer
(code: the number of hidden tests) and the verifier's detail.

examples:
  rlvr show results/RUN                              the run's first 10 samples and its counts
  rlvr show results/RUN --wrong --benchmark gsm8k    what the model got wrong on gsm8k
  rlvr show results/RUN --reason no_answer,timeout   only these verdict reasons
  rlvr show results/RUN --id 'math500/1*' --full     problems by id (globs allowed), nothing cut
  rlvr show results/RUN --grep "sqrt" --limit 0      every sample whose text contains sqrt
  rlvr show results/RUN --correct --json            JSON lines (every field), e.g. for jq
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "show",
        help="look at a run's samples: prompt, completion, extracted answer, gold, verdict",
        description="Show the samples of a run directory (rlvr eval's --out), filtered.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="a run directory (or its samples.jsonl)")
    p.add_argument("--benchmark", default=None, help="only these benchmarks (comma-separated)")
    p.add_argument("--reason", default=None, help="only these verdict reasons, e.g. wrong_answer,no_answer")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--correct", dest="correct", action="store_const", const=True, help="only correct samples")
    which.add_argument("--wrong", dest="correct", action="store_const", const=False, help="only wrong samples")
    p.add_argument("--id", dest="ids", default=None, help="only these problem ids (comma-separated; globs allowed)")
    p.add_argument("--grep", default=None, help="only samples whose text contains TEXT (any case)")
    p.add_argument("--limit", type=int, default=None, help="samples shown (default 10; with --json every one); 0 = all")
    p.add_argument("--full", action="store_true", help="print prompts and completions whole")
    p.add_argument("--json", action="store_true", help="JSON lines: every field of each matching sample")
    p.set_defaults(func=run, correct=None)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.errors import UserError
    from rlvr.harness.show import check_filters, filter_samples, format_sample, header, load_run

    if args.limit is not None and args.limit < 0:
        raise UserError("--limit must be 0 (all) or more")
    view = load_run(args.run)
    check_filters(view, args.benchmark, args.reason)
    matched = filter_samples(view.samples, args.benchmark, args.reason, args.correct, args.ids, args.grep)
    limit = args.limit if args.limit is not None else (0 if args.json else 10)
    shown = matched[:limit] if limit else matched
    if args.json:
        for sample in shown:
            sys.stdout.write(json.dumps(sample, ensure_ascii=False) + "\n")
        return 0
    color = sys.stdout.isatty()
    print(header(view, len(shown), len(matched)))
    for sample in shown:
        print()
        print(format_sample(sample, args.full, color))
    if not matched:
        print("no sample matches these filters")
    return 0
