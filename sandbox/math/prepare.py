"""The per-item half of math grading that needs no sympy: read the item, extract, fast-path.

Pure functions, so the grader's own thread and the shard processes (``rlvr.sandbox.math.front``)
run exactly the same code: an item either ends here with a verdict, or leaves a request for
the symbolic workers. Extraction and the exact fast path are linear in the completion length.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr.sandbox.math.extract import extract_answer
from rlvr.sandbox.math.judge import NeedsSymbolic, judge, parse_gold
from rlvr.sandbox.math.policy import GoldSpec, MathPolicy, resolve_policy
from rlvr.sandbox.verdict import Verdict
from rlvr.sandbox.version import MATH_VERIFIER

MAX_EXTRACTED_CHARS = 2000
_GOLD_KEYS = ("answer_type", "tolerance", "multiple")
POLICY_FIELDS = tuple(MathPolicy.__dataclass_fields__)


@dataclass(frozen=True)
class Pending:
    """An item whose answer needs the symbolic judge: the worker request and what we know."""

    request: dict[str, Any]
    extracted: str | None
    prepared_ms: float


def make_verdict(
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


def prepare(
    completion: Any, gold: GoldSpec, policy: MathPolicy, start: float
) -> tuple[Verdict | None, dict[str, Any] | None, str | None]:
    """``(verdict, None, extracted)`` when settled here, else ``(None, symbolic request, extracted)``."""
    if not isinstance(completion, str):
        return make_verdict(False, "no_answer", None, start, "completion is not a string"), None, None
    parsed = parse_gold(gold.answer, gold.multiple, gold.answer_type)
    extraction = extract_answer(completion, policy, parsed.items)
    extracted = extraction.answer
    if extracted is None:
        return make_verdict(False, "no_answer", None, start, extraction.detail), None, None
    extracted = extracted.strip()
    if extraction.hedging:
        return make_verdict(False, "wrong_answer", extracted, start, extraction.detail), None, extracted
    if policy.literal_answer and not is_literal_number(extracted):
        detail = f"{extraction.rule}: the answer must be a number, not an expression"
        return make_verdict(False, "wrong_answer", extracted, start, detail), None, extracted
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
        return make_verdict(False, "unparseable", extracted, start, "nesting too deep"), None, extracted
    detail = f"{extraction.rule}: {result.detail}"
    return make_verdict(result.correct, result.reason, extracted, start, detail), None, extracted


def prepare_item(item: Mapping[str, Any], base: MathPolicy, soft_timeout: float) -> Verdict | Pending:
    """One batch item (``completion``, ``answer``, optional ``policy`` and gold declarations)."""
    start = time.perf_counter()
    try:
        overrides = {k: item[k] for k in POLICY_FIELDS if k in item and k != "name"}
        item_policy = resolve_policy(item.get("policy") or base, **overrides)
        gold = gold_spec(item)
    except (KeyError, ValueError, TypeError) as exc:
        return Verdict.bad_input(f"bad item: {exc}", MATH_VERIFIER)
    done, request, extracted = prepare(item.get("completion"), gold, item_policy, start)
    if done is not None:
        return done
    assert request is not None
    request["soft_timeout"] = soft_timeout
    return Pending(request, extracted, (time.perf_counter() - start) * 1000)
