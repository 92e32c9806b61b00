"""Expected outputs from a reference solution (EvalPlus rows ship inputs only).

The reference runs once, in the same sandbox as submissions, and its results are cached on
disk keyed by the reference, the inputs, the entry point and the verifier version.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.code.compare import encode_args
from sandbox.code.verify import CodeGrader, default_code_grader
from sandbox.version import CODE_VERIFIER


def cache_dir() -> Path:
    root = os.environ.get("RLVR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rlvr")
    return Path(root) / "expected_outputs"


class ReferenceFailed(RuntimeError):
    """The reference solution itself failed on an input (the row cannot be graded)."""


@dataclass(frozen=True)
class Expected:
    """A reference result as JSON text (integers may exceed Python's 4300-digit conversion
    limit; only the judge, which lifts it, decodes them) and the reference's CPU time."""

    json: str
    cpu_ms: float


def expected_outputs(reference: str, inputs: list[list[Any]], fn_name: str, grader: CodeGrader | None = None, limits: dict[str, Any] | None = None) -> list[Expected]:
    """Run ``reference`` on every argument list in ``inputs``; results in input order."""
    key = hashlib.sha256(json.dumps([CODE_VERIFIER, reference, fn_name, encode_args(inputs)], sort_keys=True).encode()).hexdigest()
    path = cache_dir() / key[:2] / f"{key}.json"
    if path.exists():
        try:
            return [Expected(*pair) for pair in json.loads(path.read_text())]
        except (ValueError, TypeError):
            path.unlink(missing_ok=True)
    grader = grader or default_code_grader()
    budget = {"time_s": 20.0, "total_s": 600.0, "memory_mb": 2048, "output_kb": 65536, **(limits or {})}
    try:
        outcomes = grader.run_collect(reference, [{"args": args, "expected": None} for args in inputs], fn_name, limits=budget)
    except (RuntimeError, ValueError) as exc:
        raise ReferenceFailed(str(exc)) from exc
    results = []
    for index, outcome in enumerate(outcomes):
        if outcome["status"] != "ok" or outcome.get("result") is None:
            raise ReferenceFailed(f"reference failed on input {index}: {outcome['status']} {outcome.get('stderr', '')[-200:]}")
        results.append(Expected(outcome["result"], float(outcome.get("cpu_ms") or 0.0)))
    if len(results) != len(inputs):
        raise ReferenceFailed(f"reference answered {len(results)} of {len(inputs)} inputs")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([[r.json, r.cpu_ms] for r in results]))
    tmp.replace(path)
    return results


def differential_tests(inputs: list[list[Any]], expected: list[Expected], factor: float = 4.0, floor_s: float = 4.0) -> list[dict[str, Any]]:
    """Functional tests from reference results, with EvalPlus's time rule: each input may take
    ``max(floor_s, factor * reference time)``."""
    return [
        {"args": args, "expected_json": e.json, "testtype": "functional", "time_s": max(floor_s, factor * e.cpu_ms / 1000)}
        for args, e in zip(inputs, expected)
    ]
