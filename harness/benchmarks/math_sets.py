"""Math benchmarks: rows of ``harness/data/math/*.jsonl.gz`` as problems for the math verifier."""

from __future__ import annotations

import re
from typing import Any

from rlvr.harness.benchmarks.problems import Problem

#: The verifier policy preset each benchmark is graded with.
POLICIES = {
    "aime2024": "aime",
    "aime2025": "aime",
    "amc2023": "aime",
    "math500": "math",
    "minerva_math": "minerva",
    "olympiadbench": "olympiadbench",
    "gsm8k": "gsm8k",
}


def math_problem(row: dict[str, Any], benchmark: str) -> Problem:
    gold: dict[str, Any] = {"answer": str(row["answer"]), "policy": POLICIES.get(benchmark, "math")}
    if benchmark == "olympiadbench":
        if row.get("answer_type"):
            gold["answer_type"] = row["answer_type"]
        if row.get("error"):
            gold["tolerance"] = float(row["error"])
        if row.get("is_multiple_answer"):
            gold["multiple"] = True
    question = row["problem"]
    meta = {k: row[k] for k in ("level", "subject", "subfield", "contest", "year", "unit") if row.get(k) is not None}
    return Problem(
        id=row["id"],
        benchmark=benchmark,
        kind="math",
        question=question,
        gold=gold,
        solution=few_shot_solution(row.get("solution"), str(row["answer"])),
        meta=meta,
    )


def few_shot_solution(solution: str | None, answer: str) -> str | None:
    """A worked solution that ends in a boxed answer (GSM8K's end in ``#### n`` and carry
    calculator annotations; both are rewritten so shots teach the format graders read)."""
    if not solution:
        return None
    text = re.sub(r"<<[^<>]*>>", "", solution).strip()
    if "\\boxed" not in text:
        text = f"{text}\nThe final answer is $\\boxed{{{answer}}}$."
    return text
