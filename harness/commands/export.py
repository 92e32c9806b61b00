"""``rlvr export``: a run directory as a dataset (hf / parquet / jsonl) with a dataset card."""

from __future__ import annotations

import argparse

EPILOG = """\
one row per sample (every samples.jsonl field plus run, model, fingerprint); README.md is a
Hugging Face dataset card with the run's scores, fingerprints and verifier versions, and
summary.json / config.yaml are copied beside it. Loads offline:
  datasets.load_from_disk("DIR")                                        (--format hf)
  datasets.load_dataset("parquet", data_files="DIR/samples.parquet")    (--format parquet)
  datasets.load_dataset("json", data_files="DIR/samples.jsonl")         (--format jsonl)

examples:
  rlvr export results/my-run --format hf --out exports/my-run
  rlvr export results/my-run --format parquet --out exports/my-run-parquet
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a run's samples as a datasets / parquet / jsonl dataset with a dataset card",
        description="Export a run directory as a dataset.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="a run directory (rlvr eval's --out)")
    p.add_argument(
        "--format",
        choices=["hf", "parquet", "jsonl"],
        default="hf",
        help="hf (datasets.save_to_disk, default), parquet or jsonl",
    )
    p.add_argument("--out", required=True, help="output directory: new or empty (see --overwrite)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a non-empty --out (built beside it, then swapped in; never the run or a folder holding it)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.export import export_run

    out = export_run(args.run, args.format, args.out, args.overwrite)
    print(f"exported {args.run} as {args.format} -> {out} (dataset card: {out}/README.md)")
    return 0
