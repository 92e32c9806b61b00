"""Grade a JSONL file of completions: the engine behind ``rlvr grade``.

Rows stream through in chunks and every input row yields exactly one output row, in input
order, flushed as it is written, so a large file never sits in memory and a killed run keeps
what it finished. Malformed rows become ``bad_input`` rows that say what was wrong.
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from rlvr.sandbox.service import BadItem, parse_item
from rlvr.sandbox.verdict import Verdict

OUTPUT_FIELDS = ("id", "correct", "reward", "reason", "extracted", "elapsed_ms")
#: written for every row a code verifier graded
CODE_FIELDS = ("passed", "total", "first_failure")
CHUNK_ROWS = 256
#: chunks graded concurrently by ``grade_stream``
WINDOW_CHUNKS = 4


@dataclass
class GradeSummary:
    count: int = 0
    correct: int = 0
    reasons: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, verdict: Verdict) -> None:
        self.count += 1
        self.correct += int(verdict.correct)
        self.reasons[verdict.reason] += 1

    @property
    def bad_rows(self) -> int:
        return self.reasons.get("bad_input", 0)

    @property
    def gradable(self) -> int:
        """Rows that reached a verifier: a row that could not be read is not a wrong answer."""
        return self.count - self.bad_rows

    @property
    def accuracy(self) -> float:
        return self.correct / self.gradable if self.gradable else 0.0

    def line(self) -> str:
        rate = self.count / self.seconds if self.seconds > 0 else float("inf")
        others = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()) if k not in ("ok", "wrong_answer"))
        return (
            f"graded {self.count} rows: accuracy {self.accuracy:.4f} ({self.correct}/{self.gradable}), "
            f"timeouts {self.reasons.get('timeout', 0)}, wrong {self.reasons.get('wrong_answer', 0)}"
            + (f", {others}" if others else "")
            + f"; {self.seconds:.2f}s, {rate:.1f} rows/s"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "correct": self.correct,
            "gradable": self.gradable,
            "bad_rows": self.bad_rows,
            "accuracy": self.accuracy,
            "timeouts": self.reasons.get("timeout", 0),
            "reasons": dict(self.reasons),
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.count / self.seconds, 2) if self.seconds > 0 else None,
        }


def read_rows(stream: TextIO) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """Yield ``(line_number, row or None, error)`` for every non-blank line."""
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, None, f"line {number}: invalid JSON ({exc.msg} at column {exc.colno})"
            continue
        if not isinstance(row, dict):
            yield number, None, f"line {number}: expected a JSON object, got {type(row).__name__}"
            continue
        yield number, row, ""


def row_kind(row: dict[str, Any], default: str | None) -> str:
    """The verifier a row goes to: its own ``kind`` first (as ``rlvr serve`` reads items), then
    ``--kind``, then its fields (``tests`` is code, anything else math)."""
    kind = row.get("kind")
    if isinstance(kind, str) and kind:
        return kind
    return default or ("code" if "tests" in row else "math")


def row_problem(row: dict[str, Any], kind: str) -> str:
    """Why ``row`` cannot be graded as a ``kind`` item ("" when it can), by the rules the reward
    server reads items with (``rlvr.sandbox.service.parse_item``), worded for a file's rows, with a
    hint where the row's fields fit the other kind."""
    try:
        parse_item({**row, "kind": kind})
    except BadItem as exc:
        value = row.get(exc.field) if exc.field is not None else None
        if value is None:
            fields = ", ".join(repr(k) for k in sorted(row)) or "none"
            return f"missing field {exc.field!r} (the row has {fields}){_other_kind_hint(row, kind)}"
        shown = json.dumps(value, ensure_ascii=False, default=str)
        return f"field {exc.field!r}: {exc.need} (got {shown if len(shown) <= 40 else shown[:39] + '…'})"
    return ""


def _other_kind_hint(row: dict[str, Any], kind: str) -> str:
    if kind == "math" and "tests" in row and "answer" not in row:
        return '; it looks like a code row: set its "kind" to "code" or use --kind code'
    if kind == "code" and "answer" in row and "tests" not in row:
        return '; it looks like a math row: set its "kind" to "math" or use --kind math'
    return ""


def output_row(
    row: dict[str, Any] | None, number: int, verdict: Verdict, extra_fields: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One output row: the verdict fields, then the input's own fields passed through."""
    out: dict[str, Any] = {"id": (row or {}).get("id", f"line-{number}")}
    code_fields = CODE_FIELDS if verdict.passed is not None else ()
    for key in OUTPUT_FIELDS[1:] + tuple(dict.fromkeys(extra_fields + code_fields)):
        out[key] = getattr(verdict, key)
    out["detail"] = verdict.detail
    out["verifier"] = verdict.verifier
    for key, value in (row or {}).items():
        if key not in out and key not in ("completion", "tests"):
            out[key] = value
    return out


def grade_stream(
    rows: Iterator[tuple[int, dict[str, Any] | None, str]],
    grade_chunk: Callable[[list[dict[str, Any]]], list[Verdict]],
    validate: Callable[[dict[str, Any]], str],
    write: Callable[[dict[str, Any]], None],
    verifier: str,
    extra_fields: tuple[str, ...] = (),
    progress: Any = None,
    window: int = WINDOW_CHUNKS,
) -> GradeSummary:
    """Grade rows chunk by chunk with ``grade_chunk`` and ``write`` one output per input row.

    Up to ``window`` chunks are graded at once (``grade_chunk`` must be thread-safe), so one
    chunk's slow symbolic item never idles the others; outputs are still written in input order.
    """
    summary = GradeSummary()
    start = time.perf_counter()
    in_flight: deque[tuple[list[tuple[int, dict[str, Any] | None, str]], Future]] = deque()

    def finish() -> None:
        chunk, job = in_flight.popleft()
        verdicts = iter(job.result())
        for number, row, error in chunk:
            verdict = Verdict.bad_input(error, verifier) if error or row is None else next(verdicts)
            summary.add(verdict)
            write(output_row(row, number, verdict, extra_fields))
        if progress is not None:
            progress.update(len(chunk))
            progress.set_postfix(acc=f"{summary.accuracy:.3f}")

    def submit(chunk: list[tuple[int, dict[str, Any] | None, str]], executor: ThreadPoolExecutor) -> None:
        valid = [r for _, r, err in chunk if r is not None and not err]
        job: Future = executor.submit(grade_chunk, valid) if valid else _done([])
        in_flight.append((chunk, job))
        while len(in_flight) > window or (in_flight and in_flight[0][1].done()):
            finish()

    chunk: list[tuple[int, dict[str, Any] | None, str]] = []
    with ThreadPoolExecutor(max_workers=max(1, window)) as executor:
        try:
            for number, row, error in rows:
                if row is not None and not error:
                    error = validate(row)
                chunk.append((number, row, error))
                if len(chunk) >= CHUNK_ROWS:
                    submit(chunk, executor)
                    chunk = []
            if chunk:
                submit(chunk, executor)
            while in_flight:
                finish()
        finally:
            for _, job in in_flight:
                job.cancel()
    summary.seconds = time.perf_counter() - start
    return summary


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())
