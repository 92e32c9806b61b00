"""How long `rlvr contamination` takes on a realistic training set, against every shipped benchmark.

A synthetic training file of ``--rows`` rows (default 100,000) of reasoning-problem length (word
salad drawn from the plain words of the shipped benchmark texts, 40-160 words, so the n-grams look
like real ones but are not copies) with ``--planted`` real benchmark problems hidden inside, written to a temporary
jsonl file; then the same command a user runs, timed end to end (reading the file, loading every
benchmark, indexing, matching, writing the report and the filtered file). Prints rows/s, the
wall time and whether exactly the planted problems were found.

    python benchmarks/bench_contamination.py [--rows 100000] [--planted 50]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--planted", type=int, default=50)
    args = parser.parse_args()

    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.commands.contamination import held_out_benchmarks

    names = held_out_benchmarks()
    problems = [p for name in names for p in load_problems(name)]
    words = [w for p in problems for w in p.question.split() if w.isalpha()]  # no formulas: they would copy n-grams
    rng = random.Random(0)
    rows = []
    for i in range(args.rows):
        rows.append({"question": " ".join(rng.choice(words) for _ in range(rng.randint(40, 160))), "answer": str(i)})
    planted = rng.sample([p for p in problems if p.kind == "math"], args.planted)
    slots = rng.sample(range(args.rows), args.planted)
    for slot, problem in zip(slots, planted):
        rows[slot] = {"question": f"Exercise {slot}. {problem.question} Explain.", "answer": problem.gold.get("answer")}
    with tempfile.TemporaryDirectory() as tmp:
        train = Path(tmp) / "train.jsonl"
        train.write_text("".join(json.dumps(r) + "\n" for r in rows))
        size_mb = train.stat().st_size / 2**20
        start = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlvr.cli",
                "contamination",
                "--train",
                str(train),
                "--out",
                str(Path(tmp) / "out"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr)
            return 1
        report = json.loads((Path(tmp) / "out" / "report.json").read_text())
    found = {pid for entry in report["benchmarks"].values() for pid in entry["contaminated_problem_ids"]}
    others = [
        e
        for entry in report["benchmarks"].values()
        for e in entry["examples"]
        if e["problem_id"] not in {p.id for p in planted}
    ]
    truth = {p.id for p in planted}
    print(
        f"{args.rows:,} training rows ({size_mb:.0f} MB, 40-160 words each) against {len(names)} benchmarks "
        f"({len(problems):,} problems)"
    )
    print(
        f"wall time {wall:.1f} s end to end (command start-up included; {report['seconds']} s inside), "
        f"{args.rows / wall:,.0f} rows/s"
    )
    print(
        f"planted {len(truth)}: found {len(found & truth)}, missed {len(truth - found)}, other problems flagged "
        f"{len(found - truth)}"
    )
    for e in others:  # e.g. Minerva problems that share a long preamble with a planted one
        print(f"  also flagged {e['problem_id']} ({e['kind']}: {e['evidence']!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
