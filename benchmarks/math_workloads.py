"""Labelled math grading workloads built from the shipped benchmark rows (no model needed).

``reasoning``: a completion is ~1 KB or more of real worked solutions (the row's own solution,
padded with other rows' solutions, their boxes unboxed) ending in a boxed answer: the row's gold
(label: correct) or the next row's gold (label: correct only if the two golds are the same
string). ``short``: the same answers as one sentence, ``The final answer is $\\boxed{X}$.``.
GSM8K rows end ``#### X`` instead of a box, as GSM8K-style completions do.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ["aime2024", "aime2025", "amc2023", "gsm8k", "math500", "minerva_math", "olympiadbench"]
REASONING_CHARS = 1024


def _rows() -> list[dict]:
    rows = []
    for name in BENCHMARKS:
        with gzip.open(ROOT / "harness" / "data" / "math" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh)
    return rows


def _unboxed(text: str) -> str:
    return (text or "").replace("\\boxed", "").replace("\\fbox", "").replace("####", "")


def pairs(n: int, kind: str = "reasoning", seed: int = 0) -> list[dict]:
    """``n`` labelled ``{"id", "completion", "answer", "label", ...}`` rows (half with the wrong gold)."""
    rows = _rows()
    rng = random.Random(seed)
    solutions = [_unboxed(r.get("solution")) for r in rows if r.get("solution")]
    out = []
    for i in range(n):
        row = rows[i % len(rows)]
        other = rows[(i + 1) % len(rows)]
        wrong = i % 2 == 1
        answer = other["answer"] if wrong else row["answer"]
        final = f"#### {answer}" if row["benchmark"] == "gsm8k" else f"The final answer is $\\boxed{{{answer}}}$."
        if kind == "reasoning":
            body = _unboxed(row.get("solution"))
            while len(body) < REASONING_CHARS:
                body += "\n\n" + rng.choice(solutions)
            completion = f"{body}\n\n{final}"
        else:
            completion = final
        item = {"id": f"{kind}-{i}", "completion": completion, "answer": row["answer"]}
        if row["benchmark"] == "olympiadbench":
            item.update(answer_type=row.get("answer_type"), tolerance=row.get("error"))
            item["multiple"] = bool(row.get("is_multiple_answer"))
        item["label"] = (not wrong) or other["answer"].strip() == row["answer"].strip()
        out.append(item)
    return out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
