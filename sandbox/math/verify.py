"""Public math verifier: ``verify_math`` and ``verify_math_batch``.

Flow for one item: extract the final answer (caller's process, linear time), normalise it and
try the exact fast path (integers, fractions, decimals, text). Only answers that need sympy go
to an isolated worker process, which is killed if it overruns the deadline. The same function
and settings serve training rewards and evaluation grades.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sandbox.math.extract import extract_answer
from sandbox.math.judge import NeedsSymbolic, judge, parse_gold
from sandbox.math.policy import GoldSpec, MathPolicy, resolve_policy
from sandbox.pool import WorkerCrashed, WorkerPool, WorkerTimeout
from sandbox.process_wide import ProcessWide
from sandbox.verdict import Verdict
from sandbox.version import MATH_VERIFIER

DEFAULT_TIMEOUT = 1.0
SOFT_FRACTION = 0.7
_GOLD_KEYS = ("answer_type", "tolerance", "multiple")
_POLICY_FIELDS = tuple(MathPolicy.__dataclass_fields__)


MAX_EXTRACTED_CHARS = 2000


def _verdict(
    correct: bool, reason: str, extracted: str | None, start: float, detail: str = "", extra_ms: float = 0.0
) -> Verdict:
    """``start`` is when this item's own work began; ``extra_ms`` adds time spent in a worker.

    Queueing for a free worker and worker start-up are not the item's grading time.
    """
    if extracted is not None and len(extracted) > MAX_EXTRACTED_CHARS:
        extracted = extracted[:MAX_EXTRACTED_CHARS] + f"...[{len(extracted) - MAX_EXTRACTED_CHARS} more chars]"
    return Verdict(
        correct=correct,
        reward=1.0 if correct else 0.0,
        reason=reason,
        extracted=extracted,
        elapsed_ms=round((time.perf_counter() - start) * 1000 + extra_ms, 3),
        verifier=MATH_VERIFIER,
        detail=detail,
    )


_LITERAL_RE = re.compile(
    r"[+\-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+\-\u2212]?\d+\s*/\s*\d+|[+\-\u2212]?\\d?frac\{\d+\}\{\d+\}"
)


def is_literal_number(answer: str) -> bool:
    """Is the answer (or the last side of a worked "a + b = c") a number written out?"""
    text = answer.replace("$", "").replace("\\!", "").replace("\\,", "").strip().rstrip(".")
    text = re.sub(r"^\\text\{(.*)\}$", r"\1", text).strip()
    last = text.rsplit("=", 1)[-1].strip()
    return bool(_LITERAL_RE.fullmatch(last))


def gold_spec(answer: "str | GoldSpec | Mapping[str, Any]", **fields: Any) -> GoldSpec:
    """Build a GoldSpec from a string, a mapping with ``answer`` and optional declarations."""
    if isinstance(answer, GoldSpec):
        return answer
    if isinstance(answer, Mapping):
        fields = {**{k: answer[k] for k in _GOLD_KEYS if k in answer}, **fields}
        answer = answer["answer"]
    if not isinstance(answer, str):
        answer = str(answer)
    tolerance = fields.get("tolerance")
    return GoldSpec(
        answer=answer,
        answer_type=fields.get("answer_type"),
        tolerance=float(tolerance) if tolerance not in (None, "") else None,
        multiple=bool(fields.get("multiple") or False),
    )


class MathGrader:
    """Grades math answers with a warm pool of ``workers`` isolated processes.

    Use one grader per process (``default_grader()`` is shared); it is thread-safe.
    """

    def __init__(self, workers: int | None = None, timeout: float = DEFAULT_TIMEOUT):
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.workers = workers or min(4, os.cpu_count() or 1)
        self.timeout = timeout
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is not None and self._pool.inherited:
                self._pool = None  # forked: the parent's workers are not ours to use
            if self._pool is None:
                self._pool = WorkerPool("sandbox.math.worker", self.workers, replacement_args=("--no-warm",))
            return self._pool

    def warm_up(self) -> None:
        """Start every worker and let it finish warming its parser caches (optional)."""
        self.pool.warm_up()
        self.pool.map([{"warm": True}] * self.workers, 120.0)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    # ---- one item ------------------------------------------------------------------------
    def _prepare(
        self, completion: Any, gold: GoldSpec, policy: MathPolicy, start: float
    ) -> tuple[Verdict | None, dict[str, Any] | None, str | None]:
        if not isinstance(completion, str):
            return _verdict(False, "no_answer", None, start, "completion is not a string"), None, None
        parsed = parse_gold(gold.answer, gold.multiple, gold.answer_type)
        extraction = extract_answer(completion, policy, parsed.items)
        extracted = extraction.answer
        if extracted is None:
            return _verdict(False, "no_answer", None, start, extraction.detail), None, None
        extracted = extracted.strip()
        if extraction.hedging:
            return _verdict(False, "wrong_answer", extracted, start, extraction.detail), None, extracted
        if policy.literal_answer and not is_literal_number(extracted):
            return (
                _verdict(
                    False,
                    "wrong_answer",
                    extracted,
                    start,
                    f"{extraction.rule}: the answer must be a number, not an expression",
                ),
                None,
                extracted,
            )
        try:
            result = judge(extracted, gold, policy, symbolic=False)
        except NeedsSymbolic:
            request = {
                "answer": extracted,
                "gold": {
                    "answer": gold.answer,
                    "answer_type": gold.answer_type,
                    "tolerance": gold.tolerance,
                    "multiple": gold.multiple,
                },
                "policy": policy.to_dict(),
            }
            return None, request, extracted
        except RecursionError:
            return _verdict(False, "unparseable", extracted, start, "nesting too deep"), None, extracted
        detail = f"{extraction.rule}: {result.detail}"
        return _verdict(result.correct, result.reason, extracted, start, detail), None, extracted

    def _finish(
        self, response: dict[str, Any] | Exception, extracted: str | None, prepared_ms: float, timeout: float
    ) -> Verdict:
        now = time.perf_counter()
        if isinstance(response, WorkerTimeout):
            return _verdict(
                False,
                "timeout",
                extracted,
                now,
                f"no verdict within {timeout:g}s; worker killed",
                prepared_ms + timeout * 1000,
            )
        if isinstance(response, Exception):
            return _verdict(False, "grader_error", extracted, now, f"worker crashed: {response}", prepared_ms)
        detail = response.get("detail", "")
        worker_ms = float(response.get("_elapsed_ms", 0.0))
        return _verdict(
            bool(response["correct"]),
            response["reason"],
            extracted,
            now,
            f"symbolic: {detail}",
            prepared_ms + worker_ms,
        )

    def verify(
        self,
        completion: str,
        answer: "str | GoldSpec | Mapping[str, Any]",
        *,
        policy: "str | MathPolicy | None" = None,
        timeout: float | None = None,
        answer_type: str | None = None,
        tolerance: float | None = None,
        multiple: bool = False,
        **options: Any,
    ) -> Verdict:
        start = time.perf_counter()
        resolved = resolve_policy(policy, **options)
        gold = gold_spec(answer, answer_type=answer_type, tolerance=tolerance, multiple=multiple)
        deadline = timeout or self.timeout
        done, request, extracted = self._prepare(completion, gold, resolved, start)
        if done is not None:
            return done
        assert request is not None
        request["soft_timeout"] = deadline * SOFT_FRACTION
        prepared_ms = (time.perf_counter() - start) * 1000
        try:
            response: dict[str, Any] | Exception = self.pool.call(request, deadline)
        except (WorkerTimeout, WorkerCrashed) as exc:
            response = exc
        return self._finish(response, extracted, prepared_ms, deadline)

    def _call(self, request: dict[str, Any], deadline: float) -> dict[str, Any] | Exception:
        try:
            return self.pool.call(request, deadline)
        except (WorkerTimeout, WorkerCrashed) as exc:
            return exc

    # ---- many items ----------------------------------------------------------------------
    def verify_batch(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        policy: "str | MathPolicy | None" = None,
        timeout: float | None = None,
        **options: Any,
    ) -> list[Verdict]:
        """Grade many ``{"completion", "answer", ...}`` items; verdicts come back in order.

        An item may carry its own ``policy``, ``answer_type``, ``tolerance`` and ``multiple``.
        """
        deadline = timeout or self.timeout
        base = resolve_policy(policy, **options)
        results: list[Verdict | None] = []
        pending: list[tuple[int, Future, str | None, float]] = []
        # Items that need sympy go to the pool as soon as they are found, so workers grade
        # while this thread is still extracting and fast-pathing the rest.
        with ThreadPoolExecutor(max_workers=self.workers) as dispatch:
            for item in items:
                start = time.perf_counter()
                try:
                    overrides = {k: item[k] for k in _POLICY_FIELDS if k in item and k != "name"}
                    item_policy = resolve_policy(item.get("policy") or base, **overrides)
                    gold = gold_spec(item)
                except (KeyError, ValueError, TypeError) as exc:
                    results.append(Verdict.bad_input(f"bad item: {exc}", MATH_VERIFIER))
                    continue
                done, request, extracted = self._prepare(item.get("completion"), gold, item_policy, start)
                results.append(done)
                if done is None:
                    assert request is not None
                    request["soft_timeout"] = deadline * SOFT_FRACTION
                    future = dispatch.submit(self._call, request, deadline)
                    pending.append((len(results) - 1, future, extracted, (time.perf_counter() - start) * 1000))
            for index, future, extracted, prepared_ms in pending:
                results[index] = self._finish(future.result(), extracted, prepared_ms, deadline)
        return [r for r in results if r is not None]


_default = ProcessWide(lambda: MathGrader())


def default_grader() -> MathGrader:
    """The process-wide grader used by ``verify_math`` (created on first use)."""
    return _default.get()


def verify_math(completion: str, answer: "str | GoldSpec | Mapping[str, Any]", **options: Any) -> Verdict:
    """Grade one completion against a gold answer.

    Options: ``policy`` (preset name or ``MathPolicy``), ``timeout`` (hard deadline in
    seconds, default 1), ``answer_type``, ``tolerance``, ``multiple`` (gold declarations), and
    any ``MathPolicy`` field as an override (e.g. ``extract=("boxed",)``).
    """
    return default_grader().verify(completion, answer, **options)


def verify_math_batch(items: Iterable[Mapping[str, Any]], **options: Any) -> list[Verdict]:
    """Grade many items across the worker pool; see ``MathGrader.verify_batch``."""
    return default_grader().verify_batch(items, **options)
