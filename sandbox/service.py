"""Grading requests of either kind through one code path.

Every adapter (TRL, verl, OpenRLHF), the HTTP server and the remote client funnel items
``{"id", "kind": "math"|"code", "completion", "answer" | "tests", ...}`` through
``GradingService.grade``, which calls exactly ``MathGrader.verify_batch`` and
``CodeGrader.verify_batch``: a reward seen in training and a grade reported in evaluation come
from the same functions with the same settings.

What is cached: math verdicts only. A math verdict is a pure function of the completion, the
gold and the options, so a repeat is answered from an LRU. A code verdict is what running the
program gave this time; a program whose behaviour varies (it guesses, reads the clock) must be
run again on every request, or one lucky pass would be paid out forever.

What is shown: on reward paths ``detail`` is ``rlvr.sandbox.verdict.redact``-ed (reason, first
failing test and counts only), so no hidden expected value reaches a policy; evaluation logs
ask for the judge's own text with ``test_details=True``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.rules.testcases import PreparedTests
from rlvr.sandbox.code.verify import CodeGrader
from rlvr.sandbox.item_options import BadOption, check_code_options, check_math_options
from rlvr.sandbox.math.verify import MathGrader
from rlvr.sandbox.verdict import NOT_RUN, OVERRUN, Verdict, redact
from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER

KINDS = ("math", "code")
#: How long past its own budget a code item may hold a judge before the service stops waiting.
HOLD_GRACE_S = 5.0
MATH_OPTIONS = (
    "policy",
    "answer_type",
    "tolerance",
    "multiple",
    "extract",
    "max_distinct_boxes",
    "decimal_rel_tol",
    "rel_tol",
    "abs_tol",
    "sig_figs",
    "allow_complex",
    "strict_domain",
)
CODE_OPTIONS = (
    "fn_name",
    "starter_code",
    "language",
    "limits",
    "partial",
    "oracle",
    "compare",
    "prelude",
    "postlude",
    "test_setup",
    "stdin_process",
)


class BadItem(ValueError):
    """An item that cannot be graded as sent; the message names the field. ``field`` and
    ``need`` say the same in parts, so a front end that reads rows rather than request items
    (``rlvr grade``) can word where the problem is its own way."""

    def __init__(self, message: str, field: str | None = None, need: str = ""):
        super().__init__(message)
        self.field = field
        self.need = need


@dataclass(frozen=True)
class Item:
    id: Any
    kind: str
    completion: str
    payload: dict[str, Any]

    def cache_key(self) -> str:
        return json.dumps([self.kind, self.completion, self.payload], sort_keys=True, default=str)


def parse_item(raw: Any, index: int = 0) -> Item:
    """Validate one request item; raises ``BadItem`` naming the offending field."""
    where = f"items[{index}]"

    def bad(field: str, need: str) -> BadItem:
        return BadItem(f"{where}.{field}: {need}", field, need)

    if not isinstance(raw, Mapping):
        raise BadItem(f"{where}: expected an object", None, "expected an object")
    kind = raw.get("kind") or ("code" if "tests" in raw else "math")
    if kind not in KINDS:
        raise bad("kind", f"must be one of {KINDS}, got {kind!r}")
    completion = raw.get("completion")
    if not isinstance(completion, str):
        raise bad("completion", "required string")
    options = raw.get("options") or {}
    if not isinstance(options, Mapping):
        raise bad("options", "expected an object")
    payload: dict[str, Any] = {}
    if kind == "math":
        answer = raw.get("answer")
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            raise bad("answer", "required string for math items")
        payload["answer"] = answer
        allowed = MATH_OPTIONS
    else:
        tests = raw.get("tests")
        if not isinstance(tests, (list, str, Mapping, PreparedTests)) or not (
            tests.tests if isinstance(tests, PreparedTests) else tests
        ):
            raise bad("tests", "required non-empty list for code items")
        payload["tests"] = tests
        allowed = CODE_OPTIONS
    for key in allowed:
        if key in raw and raw[key] is not None:
            payload[key] = raw[key]
        if key in options and options[key] is not None:
            payload[key] = options[key]
    unknown = set(options) - set(allowed)
    if unknown:
        raise bad("options", f"unknown option(s) {sorted(unknown)} for {kind} items; allowed: {', '.join(allowed)}")
    try:
        (check_math_options if kind == "math" else check_code_options)(payload)
    except BadOption as exc:
        raise bad(f"options.{exc.field}" if exc.field.split(".")[0] in options else exc.field, exc.need) from None
    return Item(raw.get("id", index), kind, completion, payload)


def verdict_row(item_id: Any, verdict: Verdict) -> dict[str, Any]:
    """The wire form of a verdict (the shape of ``rlvr grade`` output rows)."""
    return {"id": item_id, **verdict.to_dict()}


class GradingService:
    """Math and code graders behind one ``grade`` call, with an LRU of settled math verdicts.

    Identical math items get identical verdicts; a math verdict that says nothing about the model
    (timeout, grader error) is never cached, so a retry grades again. Code items are run on every
    call (see the module docstring). ``test_details=False`` (the default, for reward paths)
    redacts every verdict's detail; evaluation logs pass True to keep the judge's text.
    """

    def __init__(
        self,
        workers: int | None = None,
        math_timeout: float = 1.0,
        code_limits: Any = None,
        unsafe: bool = False,
        cache_size: int = 65536,
        shards: int | None = None,
        test_details: bool = False,
        code_stdin_process: str = "test",
    ):
        self.math = MathGrader(workers=workers, timeout=math_timeout, shards=shards)
        self.code = CodeGrader(workers=workers, limits=code_limits, unsafe=unsafe, stdin_process=code_stdin_process)
        self.test_details = test_details
        self._cache: OrderedDict[str, Verdict] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Start every worker and let it warm its caches, so the first requests are not slow."""
        self.math.warm_up()
        self.code.warm_up()

    def close(self) -> None:
        self.math.close()
        self.code.close()

    def restarts(self) -> dict[str, int]:
        out = {}
        for kind, grader in (("math", self.math), ("code", self.code)):
            pool = grader._pool
            out[kind] = pool.restarts if pool is not None else 0
        return out

    def hold_s(self, item: Item) -> float:
        """The longest a code item may hold a judge: its whole-submission budget (``total_s``,
        compile included; for a compiled language at least its compile limit) plus
        ``HOLD_GRACE_S``. A request deadline never cuts a running item shorter than this: that
        would score the program on time it was not given."""
        limits = item.payload.get("limits")
        try:
            resolved = Limits.from_any(limits) if limits is not None else self.code.limits
        except (ValueError, TypeError):
            resolved = self.code.limits  # graded as bad_input at once; the bound does not matter
        compiled = item.payload.get("language", "python") not in ("python", "python3")
        budget = max(resolved.total_s, resolved.compile_time_s) if compiled else resolved.total_s
        return budget + HOLD_GRACE_S

    def _cached(self, item: Item) -> Verdict | None:
        if item.kind != "math":
            return None
        with self._lock:
            key = item.cache_key()
            verdict = self._cache.get(key)
            if verdict is not None:
                self._cache.move_to_end(key)
            return verdict

    def _remember(self, item: Item, verdict: Verdict) -> None:
        if item.kind != "math" or not verdict.verifiable:
            return
        with self._lock:
            self._cache[item.cache_key()] = verdict
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def grade(self, items: Iterable[Item]) -> list[Verdict]:
        """Grade parsed items, verdicts in their order. Code items reach a judge as they are
        read from ``items`` (a caller may still be preparing the later ones), math items are
        graded in one batch after them."""
        results: list[Verdict | None] = []
        math: list[int] = []
        code: list[int] = []
        kept: list[Item] = []

        # Reading the code rows also files the math and cached items (``verify_batch`` reads
        # every row before it returns, so ``math`` and ``kept`` are complete after it).
        def code_rows() -> Iterator[dict[str, Any]]:
            for index, item in enumerate(items):
                kept.append(item)
                results.append(self._cached(item))
                if results[index] is not None:
                    continue
                if item.kind == "math":
                    math.append(index)
                else:
                    code.append(index)
                    yield {"completion": item.completion, **item.payload}

        code_verdicts = self.code.verify_batch(code_rows())
        for index, verdict in zip(code, code_verdicts):
            results[index] = verdict
        if math:
            batch = [{"completion": kept[i].completion, **kept[i].payload} for i in math]
            for index, verdict in zip(math, self.math.verify_batch(batch)):
                results[index] = verdict
                self._remember(kept[index], verdict)
        shown = (lambda v: v) if self.test_details else redact
        return [shown(r) for r in results if r is not None]


def timeout_verdict(detail: str) -> Verdict:
    """A math item the request deadline cut off: ``timeout``, maskable (math comparisons have
    their own per-item deadline, so this only happens when a request ran out of time)."""
    return Verdict(False, 0.0, "timeout", None, 0.0, MATH_VERIFIER, detail)


def not_run_verdict() -> Verdict:
    """A code item that never ran: it waited for a judge until its request's deadline. Queue
    time is never the program's time, so the verdict is maskable and says so."""
    return Verdict(False, 0.0, "sandbox_error", None, 0.0, CODE_VERIFIER, NOT_RUN, 0, 0, None)


def overrun_verdict() -> Verdict:
    """A code item that held its judge past ``hold_s``: the program had its whole budget and
    did not finish, so it is scored (``time_limit``), not masked."""
    return Verdict(False, 0.0, "time_limit", None, 0.0, CODE_VERIFIER, OVERRUN, 0, 0, None)


def failure_verdict(kind: str, detail: str) -> Verdict:
    """The verdict when the grading machinery itself failed (never blamed on the model)."""
    if kind == "math":
        return Verdict(False, 0.0, "grader_error", None, 0.0, MATH_VERIFIER, detail)
    return Verdict(False, 0.0, "sandbox_error", None, 0.0, CODE_VERIFIER, detail, 0, 0, None)
