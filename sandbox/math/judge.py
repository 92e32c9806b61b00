"""Judge an extracted answer against a gold answer: the core of the math verifier.

``judge`` is pure and deterministic. Run with ``symbolic=False`` (the caller's process) it
decides everything that needs no sympy and raises ``NeedsSymbolic`` otherwise; run with
``symbolic=True`` (inside a grading worker) it decides everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rlvr.sandbox.math.compare import Comparator, GoldUnparseable, NeedsSymbolic, pred_has_decimal
from rlvr.sandbox.math.normalize import Normalized, normalize_answer
from rlvr.sandbox.math.numeric import TooLarge
from rlvr.sandbox.math.policy import GoldSpec, MathPolicy
from rlvr.sandbox.math.structure import Node, Unparseable, count_items, parse_structure

__all__ = ["Judgement", "NeedsSymbolic", "judge", "parse_gold"]


@dataclass(frozen=True)
class Judgement:
    correct: bool
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class ParsedGold:
    normalized: Normalized
    node: Node | None
    items: int
    error: str = ""


MAX_NESTING = 200


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting, in one pass; deeper answers are refused before any parsing."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return deepest


@lru_cache(maxsize=16384)
def parse_gold(answer: str, multiple: bool = False, answer_type: str | None = None) -> ParsedGold:
    """Normalise and parse a gold answer once; cached because every sample of a problem shares it."""
    normalized = normalize_answer(answer)
    if nesting_depth(normalized.text) > MAX_NESTING:
        return ParsedGold(normalized, None, 1, "nesting too deep")
    try:
        node = parse_structure(normalized.text, multiple, answer_type)
    except (Unparseable, TooLarge, RecursionError) as exc:
        return ParsedGold(normalized, None, 1, str(exc))
    return ParsedGold(normalized, node, count_items(node))


def judge(pred_answer: str, gold: GoldSpec, policy: MathPolicy, symbolic: bool = False) -> Judgement:
    """Compare an extracted answer with the gold under ``policy``."""
    parsed = parse_gold(gold.answer, gold.multiple, gold.answer_type)
    pred = normalize_answer(pred_answer)
    if not pred.text:
        return Judgement(False, "no_answer", "empty answer")
    if nesting_depth(pred.text) > MAX_NESTING:
        return Judgement(False, "unparseable", f"nesting deeper than {MAX_NESTING} levels")
    if pred.text == parsed.normalized.text and pred.percent == parsed.normalized.percent:
        return Judgement(True, "ok", "identical after normalisation")
    if parsed.node is None:
        return Judgement(False, "grader_error", f"gold answer unparseable: {parsed.error}")
    try:
        pred_node = parse_structure(pred.text)
    except (Unparseable, TooLarge, RecursionError) as exc:
        return Judgement(False, "unparseable", str(exc))
    backend = None
    if symbolic:
        from rlvr.sandbox.math.symbolic import SymbolicBackend

        backend = SymbolicBackend(policy, pred_has_decimal(pred.text), gold.tolerance)
    comparator = Comparator(policy, pred, parsed.normalized, gold.tolerance, backend)
    try:
        correct = comparator.equal(pred_node, parsed.node)
    except NeedsSymbolic:
        raise
    except GoldUnparseable as exc:
        return Judgement(False, "grader_error", f"gold answer unparseable: {exc}")
    except (Unparseable, TooLarge) as exc:
        return Judgement(False, "unparseable", str(exc))
    except RecursionError:
        return Judgement(False, "unparseable", "nesting too deep")
    except (TypeError, ValueError, AttributeError, ArithmeticError, NotImplementedError, IndexError, KeyError) as exc:
        # The gold parsed on its own, so a crash here comes from the prediction. Reporting it as
        # a grader error would let a policy escape its penalty by crashing the comparison.
        return Judgement(False, "unparseable", f"comparison failed: {type(exc).__name__}: {exc}"[:300])
    return Judgement(correct, "ok" if correct else "wrong_answer", "equivalent" if correct else "not equivalent")
