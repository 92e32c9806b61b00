"""What every benchmark loader produces: problems the harness can prompt, grade and fingerprint.

A ``Problem`` carries the text shown to the model and a ``gold`` dict that is exactly the
grading payload of a ``sandbox`` item (``answer`` + math options, or ``tests`` + code options),
so evaluation and training build their verifier calls from the same data.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CODE_INSTRUCTION = "Think about the problem first, then give your final solution in one ```python code block."


@dataclass(frozen=True)
class Problem:
    """One benchmark item.

    ``question`` is the problem as the templates insert it (for code it already names the
    function or the stdin/stdout contract, as the benchmark's own prompt does). ``gold`` is the
    verifier payload; EvalPlus problems carry ``differential`` instead of ``tests`` until the
    reference outputs are computed (``rlvr.harness.grading.resolve_gold``). ``solution`` is a worked
    solution for few-shot prompts (None when the source has none).
    """

    id: str
    benchmark: str
    kind: str
    question: str
    gold: dict[str, Any]
    solution: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchmarkSpec:
    """A named benchmark. ``load`` returns every problem in file order (``--limit`` takes a
    prefix); ``shots_from`` names the benchmark whose solutions few-shot prompts use."""

    name: str
    kind: str
    description: str
    source: str
    load: Callable[[], list[Problem]]
    instruction: str
    policy: str | None = None
    shots_from: str | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def with_math_policy(problems: list[Problem], policy: str | None) -> list[Problem]:
    """The problems with every math gold graded under ``policy`` (None: each keeps its own).

    The one place a run-wide policy replaces the benchmarks' own, used by ``rlvr eval
    --policy`` and by the trainer's ``math_policy`` for its rewards and its evaluations alike,
    so the reward and the grade of one completion come from the same policy.
    """
    if policy is None:
        return problems
    return [replace(p, gold={**p.gold, "policy": policy}) if p.kind == "math" else p for p in problems]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def data_revision(problems: list[Problem]) -> str:
    """A hash of exactly what is evaluated (ids, text and gold), so a changed file or a
    different ``--limit`` changes the fingerprint."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(json.dumps([p.id, p.question, p.gold], sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:16]
