"""``rlvr contamination``: which benchmark problems a training set contains."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr.harness.errors import UserError

EPILOG = """\
Normalised text (NFKC, lower case, punctuation runs -> space); a training row is flagged when its
problem statement equals a benchmark problem's or shares a 13-gram of words with it (13-grams
shared by more than 5 benchmark problems are instruction boilerplate and ignored). Each match
records whether the answers are equal too.

writes OUT/report.json (per benchmark: problems, contaminated problems and their ids, flagged
training rows, examples with the shared text) and OUT/train.filtered.jsonl (the training rows
that matched nothing, as they were read).

examples:
  rlvr contamination --train train.jsonl --out contamination/
  rlvr contamination --train data.parquet --fields question=problem,answer=solution \\
      --benchmarks aime2024,math500 --out c/
  rlvr contamination --train my_hf_dataset_dir/ --out c/        # a datasets.save_to_disk directory
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "contamination",
        help="find benchmark problems inside a training set (13-gram and exact-match overlap)",
        description="Check a training set against the shipped benchmarks; write a report and a filtered copy.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--train",
        required=True,
        help="training data: .jsonl, .json, .parquet, .jsonl.gz or a datasets.save_to_disk directory",
    )
    p.add_argument(
        "--benchmarks", default=None, help="comma-separated benchmarks (default: every shipped held-out benchmark)"
    )
    p.add_argument(
        "--fields",
        default=None,
        help="field mapping OURS=THEIRS for the training file, e.g. question=problem,answer=gold",
    )
    p.add_argument("--out", required=True, help="directory for report.json and train.filtered.jsonl")
    p.add_argument("--examples", type=int, default=20, help="matches listed per benchmark in the report (default 20)")
    p.set_defaults(func=run)


def held_out_benchmarks() -> list[str]:
    """Every registered benchmark except the procedural training pools."""
    from rlvr.harness.benchmarks.registry import all_benchmarks

    return [name for name in all_benchmarks() if not name.endswith("_train")]


def run(args: argparse.Namespace) -> int:
    import time

    from rlvr.harness.benchmarks.custom import parse_fields, training_rows
    from rlvr.harness.benchmarks.registry import get_benchmark, load_problems
    from rlvr.harness.config import split_list
    from rlvr.harness.contamination import contamination_report
    from rlvr.harness.paths import output_dir, same_file

    names = split_list(args.benchmarks) or held_out_benchmarks()
    for name in names:
        get_benchmark(name)  # an unknown name is one clear error before any work
    if args.examples < 0:
        raise UserError("--examples must be 0 or more")
    out = output_dir(args.out)
    for name in ("report.json", "train.filtered.jsonl"):
        if (out / name).is_dir():
            raise UserError(f"--out {out}: {name} there is a directory; choose another --out")
        if Path(args.train).exists() and same_file(args.train, out / name):
            raise UserError(f"--out {out} would write {name} over the training file; choose another --out")
    start = time.perf_counter()
    raw, rows = training_rows(args.train, parse_fields(args.fields))
    problems = [p for name in names for p in load_problems(name)]
    report, flagged = contamination_report(rows, problems, names, args.examples)
    report["train"] = args.train
    unchecked = sum(1 for r in rows if not (isinstance(r["question"], str) and r["question"].strip()))
    report["train_rows_without_question"] = unchecked
    report["seconds"] = round(time.perf_counter() - start, 2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    drop = set(flagged)
    with (out / "train.filtered.jsonl").open("w", encoding="utf-8") as fh:
        for index, row in enumerate(raw):
            if index not in drop:
                fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    print(f"{'benchmark':<18} {'problems':>8} {'contaminated':>12} {'exact':>6} {'+answer':>8} {'train rows':>10}")
    for name, entry in report["benchmarks"].items():
        print(
            f"{name:<18} {entry['problems']:>8} {entry['contaminated_problems']:>12} {entry['exact']:>6} "
            f"{entry['with_answer']:>8} {entry['contaminated_train_rows']:>10}"
        )
    if unchecked:
        print(
            f"\nnote: {unchecked} training rows have no question text and were not checked (kept in the filtered copy)"
        )
    print(
        f"\n{report['flagged_train_rows']} of {report['train_rows']} training rows flagged ({report['seconds']} s); "
        f"{out}/report.json, {out}/train.filtered.jsonl ({report['train_rows'] - report['flagged_train_rows']} rows)"
    )
    return 0
