"""``rlvr benchmarks``: the benchmarks this install can evaluate, with sizes and provenance."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmarks",
        help="list the shipped benchmarks (size, verifier, provenance)",
        description="List every named benchmark: problems, verifier kind and policy, source, caveats. "
        "Full provenance (commits, licences, transformations) is in harness/data/SOURCES.md.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def rows() -> list[dict]:
    from rlvr.harness.benchmarks.registry import all_benchmarks, load_problems

    out = []
    for spec in all_benchmarks().values():
        out.append(
            {
                "name": spec.name,
                "kind": spec.kind,
                "problems": len(load_problems(spec.name)),
                "policy": spec.policy or "-",
                "description": spec.description,
                "source": spec.source,
                "notes": spec.notes,
            }
        )
    return out


def run(args: argparse.Namespace) -> int:
    table = rows()
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    cols = ["name", "kind", "problems", "policy", "description", "source"]
    cells = [[str(r[c]) for c in cols] for r in table]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("  ".join("-" * w for w in widths))
    for r, row in zip(table, cells):
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        if r["notes"]:
            print(" " * (widths[0] + 2) + "note: " + r["notes"])
    print("\nAlso: any .jsonl/.json/.parquet file or hf:NAME[@split] with --fields; see `rlvr eval --help`.")
    return 0
