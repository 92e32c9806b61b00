"""The peer graders' own math test suites (``../shared/data/peer-suites/math/``), graded as
``rlvr grade --kind math`` grades a file with default settings.

Used by ``tests/test_math_peer_suites.py``; run it directly for the per-class table::

    python tests/math_peer_suite.py [--show]     # --show lists every disagreement
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT.parent / "shared" / "data" / "peer-suites" / "math" / "cases.jsonl.gz"


def load_cases(path: Path = SUITE) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def grade_cases(cases: list[dict]) -> list[dict]:
    """Each case as an ``rlvr grade --kind math`` row (answer = gold, completion = response),
    graded by the real command line with its default policy; the output rows, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text(
            "".join(json.dumps({"id": c["id"], "completion": c["response"], "answer": c["gold"]}) + "\n" for c in cases)
        )
        cmd = [sys.executable, "-m", "rlvr.cli", "grade", "--kind", "math", "--input", str(src)]
        proc = subprocess.run(
            [*cmd, "--output", str(out), "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            raise RuntimeError(f"rlvr grade failed: {proc.stderr[-2000:]}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def table(cases: list[dict], graded: list[dict]) -> dict[str, Counter]:
    """Per class (``gated``/``ungated`` totals too): rows, agreements, false positives,
    false negatives, grader errors, and Math-Verify 0.9.0's agreements and false positives."""
    counts: dict[str, Counter] = {}
    for case, row in zip(cases, graded):
        keys = [case.get("class") or "agreed", "gated" if case["gate"] else "ungated", "all"]
        for key in keys:
            c = counts.setdefault(key, Counter())
            c["rows"] += 1
            c["agree"] += row["correct"] is case["expected"]
            c["fp"] += row["correct"] and not case["expected"]
            c["fn"] += not row["correct"] and case["expected"]
            c["grader_error"] += row["reason"] == "grader_error"
            mv = case.get("mv_verdict_0_9_0")
            c["mv_agree"] += mv is case["expected"]
            c["mv_fp"] += bool(mv) and not case["expected"]
    return counts


def disagreements(cases: list[dict], graded: list[dict]) -> list[tuple[dict, dict]]:
    return [(c, r) for c, r in zip(cases, graded) if r["correct"] is not c["expected"] or r["reason"] == "grader_error"]


def main(argv: list[str]) -> int:
    cases = load_cases()
    graded = grade_cases(cases)
    counts = table(cases, graded)
    print(f"{'class':16} {'rows':>5} {'agree':>6} {'FP':>4} {'FN':>4} {'gerr':>5} | {'MV agree':>8} {'MV FP':>6}")
    for key in sorted(counts, key=lambda k: (k in ("gated", "ungated", "all"), k)):
        c = counts[key]
        print(
            f"{key:16} {c['rows']:5} {c['agree']:6} {c['fp']:4} {c['fn']:4} {c['grader_error']:5} |"
            f" {c['mv_agree']:8} {c['mv_fp']:6}"
        )
    if "--show" in argv:
        for case, row in disagreements(cases, graded):
            print(
                f"{case['id']} {case.get('class') or 'agreed'} gate={case['gate']} expected={case['expected']}"
                f" got={row['reason']} extracted={row['extracted']!r} gold={case['gold'][:80]!r}"
                f" detail={row['detail'][:100]!r}"
            )
    print("verifier:", graded[0]["verifier"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
