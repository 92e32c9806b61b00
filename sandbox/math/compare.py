"""Equivalence of two answers: structure first, then leaves.

One comparison engine serves both paths. In the caller's process it runs with no symbolic
backend: text answers, infinities and exact numbers are decided here, and anything that needs
sympy raises ``NeedsSymbolic`` so the item is sent to an isolated worker, which runs the same
engine with a ``SymbolicBackend``. Both paths therefore apply identical rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from rlvr.sandbox.math.approx import REJECT_REL, clearly_different
from rlvr.sandbox.math.labels import clock_like, proportional, tuple_label_names
from rlvr.sandbox.math.normalize import Normalized
from rlvr.sandbox.math.numeric import NotNumeric, Num, TooLarge, parse_number, round_sig, significant_figures
from rlvr.sandbox.math.policy import MathPolicy
from rlvr.sandbox.math.structure import (
    Assign,
    Interval,
    Leaf,
    Matrix,
    Node,
    PlusMinus,
    Seq,
    Union,
    Unparseable,
    plus_minus_values,
)


class NeedsSymbolic(Exception):
    """The comparison needs sympy; run it in a grading worker."""


class GoldUnparseable(Unparseable):
    """The gold answer itself could not be read (a dataset problem, not the model's)."""


_CHOICE_GOLD_RE = re.compile(r"^\(?([A-E])\)?$")
_CHOICE_PRED_RE = re.compile(r"^\(?([A-Ea-e])\)?$")
_BASE_RE = re.compile(r"^([0-9A-Z]+)_\{?(\d{1,2})\}?$")
_WORD_RE = re.compile(r"^[A-Za-z][A-Za-z '\-]*[A-Za-z]$")
_SHORT_WORDS = frozenset({"yes", "no", "odd", "all", "none", "true", "false"})
_MATH_WORDS = frozenset(
    """sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp sqrt frac pi infty
    min max gcd lcm det mod lim sum int""".split()
)
_INFINITY_RE = re.compile(r"^([+-]?)\s*\\infty$|^([+-]?)\s*\\inf$|^([+-]?)\s*oo$")
_DECIMAL_LITERAL_RE = re.compile(r"\d\.\d|\d[eE][-+]?\d|(?<!\d)\.\d")
_SET_WORDS = {r"\emptyset", r"\mathbb{R}", r"\mathbb R", r"\R"}


def _base_number(text: str) -> tuple[str, int] | None:
    """``1011_2`` -> ("1011", 2): digits written in an explicit base (every digit below it)."""
    m = _BASE_RE.match(text)
    if not m:
        return None
    digits, base = m.group(1), int(m.group(2))
    if not 2 <= base <= 36 or any(int(d, 36) >= base for d in digits):
        return None
    return digits, base


def _is_word(text: str) -> bool:
    if not _WORD_RE.match(text):
        return False
    letters = text.replace(" ", "").replace("-", "").replace("'", "").lower()
    if letters in _MATH_WORDS:
        return False
    return len(letters) >= 4 or letters in _SHORT_WORDS


def _infinity_sign(text: str) -> int | None:
    m = _INFINITY_RE.match(text.replace(" ", ""))
    if not m:
        return None
    sign = next((g for g in m.groups() if g is not None), "")
    return -1 if sign == "-" else 1


def text_equal(p: str, g: str) -> bool | None:
    """Decide answers that are words, letters, bases or infinities; None if neither is."""
    gi, pi = _infinity_sign(g), _infinity_sign(p)
    if gi is not None or pi is not None:
        return gi == pi
    m = _CHOICE_GOLD_RE.match(g)
    if m:
        pm = _CHOICE_PRED_RE.match(p)
        if pm:
            return pm.group(1).upper() == m.group(1)
    base = _base_number(g)
    if base is None and _base_number(p) is not None:
        return False
    if base is not None:
        pb = _base_number(p)
        if pb is not None:
            return pb == base
        return bool(re.fullmatch(r"[0-9A-Z]+", p)) and p == base[0]
    if _is_word(g):
        return _is_word(p) and " ".join(p.lower().split()) == " ".join(g.lower().split())
    if _is_word(p):
        return False
    return None


@dataclass
class Comparator:
    """Compares a predicted node tree with a gold node tree under one policy.

    ``symbolic`` is a ``SymbolicBackend`` inside a worker, or None in the caller's process.
    ``tolerance`` is the gold's own declared absolute tolerance (OlympiadBench ``error``).
    """

    policy: MathPolicy
    pred_flags: Normalized
    gold_flags: Normalized
    tolerance: float | None = None
    symbolic: Any = None

    # ---- structure -------------------------------------------------------------------------
    def equal(self, p: Node, g: Node) -> bool:
        named_p, named_g = _named_values(p), _named_values(g)
        if named_p is not None and named_g is not None and max(len(named_p), len(named_g)) > 1:
            # (p,q)=(3,2) against p=3, q=2: labelled values match label by label
            if set(named_p) != set(named_g):
                return False
            return all(self.equal(named_p[name], value) for name, value in named_g.items())
        if isinstance(g, Assign):
            if isinstance(p, Assign):
                return p.name == g.name and self.equal(p.value, g.value)
            if isinstance(p, Leaf) and _is_relation(p.text):
                return self._sym(lambda s: s.relation_equal(p, g))
            return self.equal(p, g.value)
        if isinstance(p, Assign):
            if isinstance(g, Leaf) and _is_relation(g.text):
                return self._sym(lambda s: s.relation_equal(p, g))
            return self.equal(p.value, g)
        if isinstance(g, PlusMinus):
            g = _plus_minus_set(g)
        if isinstance(p, PlusMinus):
            p = _plus_minus_set(p)
        if _is_ratio(g) or _is_ratio(p):
            return self._ratio_equal(p, g)
        if isinstance(g, Matrix) or isinstance(p, Matrix):
            return self._matrix_equal(p, g)
        if _set_like(g) or _set_like(p):
            return self._set_equal(p, g)
        if isinstance(g, Seq):
            if isinstance(p, Seq):
                return self._seq_equal(p, g)
            return len(g.items) == 1 and self.equal(p, g.items[0])
        if isinstance(p, Seq):
            return len(p.items) == 1 and self.equal(p.items[0], g)
        if isinstance(p, Leaf) and isinstance(g, Leaf):
            return self.leaf_equal(p.text, g.text)
        return False

    def _seq_equal(self, p: Seq, g: Seq) -> bool:
        ordered_g = g.kind in ("tuple", "pair")
        ordered_p = p.kind in ("tuple", "pair")
        if len(p.items) != len(g.items):
            return False
        if ordered_g and ordered_p:
            return all(self.equal(a, b) for a, b in zip(p.items, g.items))
        if ordered_g != ordered_p and len(g.items) > 1:
            return False
        return self._match_unordered(list(p.items), list(g.items))

    def _match_unordered(self, preds: list[Node], golds: list[Node]) -> bool:
        remaining = list(preds)
        for g in golds:
            for k, p in enumerate(remaining):
                if self.equal(p, g):
                    del remaining[k]
                    break
            else:
                return False
        return not remaining

    def _ratio_equal(self, p: Node, g: Node) -> bool:
        """Ratios: the same parts; proportional parts or the quotient only for a ratio that
        cannot be a clock time (``12:00``, ``10:30``), see ``rlvr.sandbox.math.labels``."""
        if _is_ratio(p) and _is_ratio(g):
            assert isinstance(p, Seq) and isinstance(g, Seq)
            if len(p.items) == len(g.items) and all(self.equal(a, b) for a, b in zip(p.items, g.items)):
                return True
            pv, gv = _ratio_values(p), _ratio_values(g)
            if pv is not None and gv is not None:
                return proportional(pv, gv)
            pq, gq = _ratio_quotient(p), _ratio_quotient(g)
            return pq is not None and gq is not None and self.equal(pq, gq)
        ratio, other = (p, g) if _is_ratio(p) else (g, p)
        quotient = _ratio_quotient(ratio)
        if quotient is None or not isinstance(other, Leaf):
            return False
        return self.equal(quotient, g) if ratio is p else self.equal(p, quotient)

    def _matrix_equal(self, p: Node, g: Node) -> bool:
        if isinstance(p, Matrix) and isinstance(g, Matrix):
            if p.shape != g.shape:
                return False
            return all(self.equal(a, b) for ra, rb in zip(p.rows, g.rows) for a, b in zip(ra, rb))
        matrix, other = (p, g) if isinstance(p, Matrix) else (g, p)
        if isinstance(other, Seq) and other.kind in ("tuple", "pair") and 1 in matrix.shape:
            flat = [c for row in matrix.rows for c in row]
            if len(flat) != len(other.items):
                return False
            pairs = zip(flat, other.items) if matrix is p else zip(other.items, flat)
            return all(self.equal(a, b) for a, b in pairs)
        return False

    def _set_equal(self, p: Node, g: Node) -> bool:
        if _is_number_leaf(p) or _is_number_leaf(g):
            # A number is never an interval, a union, a relation or a named set.
            return False
        if isinstance(p, Seq) and p.kind == "pair" and isinstance(g, Seq) and g.kind == "pair":
            return self._seq_equal(p, g)
        if isinstance(p, Seq) and p.kind in ("list", "set") and len(p.items) > 1 and isinstance(g, Leaf):
            if not _is_set_word(g.text) and not _is_relation(g.text):
                return False
        if isinstance(g, Seq) and g.kind in ("list", "set") and isinstance(p, Seq) and p.kind in ("list", "set"):
            return self._seq_equal(p, g)
        intervals = self._intervals_equal(p, g)
        if intervals is not None:
            return intervals
        if isinstance(p, Union) and isinstance(g, Union) and len(p.parts) == len(g.parts):
            if self._match_unordered(list(p.parts), list(g.parts)):
                return True
        empty_p, empty_g = _is_empty(p), _is_empty(g)
        if empty_p is not None and empty_g is not None and (empty_p or empty_g):
            return empty_p == empty_g
        return self._sym(lambda s: s.sets_equal(p, g))

    def _intervals_equal(self, p: Node, g: Node) -> bool | None:
        pi = _as_interval(p)
        gi = _as_interval(g)
        if pi is None or gi is None:
            return None
        for a, b, ca, cb in (
            (pi.lo, gi.lo, pi.left_closed, gi.left_closed),
            (pi.hi, gi.hi, pi.right_closed, gi.right_closed),
        ):
            infinite = isinstance(b, Leaf) and _infinity_sign(b.text) is not None
            if not infinite and ca != cb:
                return False
            if not self.equal(a, b):
                return False
        return True

    # ---- leaves ----------------------------------------------------------------------------
    def leaf_equal(self, p: str, g: str) -> bool:
        if p == g:
            return True
        decided = text_equal(p, g)
        if decided is not None:
            return decided
        if _is_relation(p) != _is_relation(g):
            return False
        try:
            gn = parse_number(g)
        except TooLarge as exc:
            raise GoldUnparseable(str(exc)) from exc
        except NotNumeric:
            gn = None
        try:
            pn = parse_number(p)
        except TooLarge as exc:
            raise Unparseable(f"answer too large: {exc}") from exc
        except NotNumeric:
            pn = None
        if gn is not None and pn is not None:
            return self.numbers_equal(pn, gn)
        if self._clearly_different(p, g):
            return False
        return self._sym(lambda s: s.leaf_equal(p, g))

    def _clearly_different(self, p: str, g: str) -> bool:
        """Cheap numeric rejection before any sympy work (never used to accept)."""
        if self.tolerance is not None or self.policy.rel_tol is not None or self.policy.abs_tol is not None:
            return False
        rel = 0.2 if self.policy.sig_figs else REJECT_REL
        scales = (1.0, 0.01) if self.pred_flags.percent and not self.gold_flags.percent else (1.0,)
        if self.gold_flags.percent and not self.pred_flags.percent:
            scales = (1.0, 100.0)
        return clearly_different(p, g, self.policy.allow_complex, scales, rel)

    def numbers_equal(self, p: Num, g: Num) -> bool:
        preds = [p.value]
        golds = [g.value]
        if self.pred_flags.percent and not self.gold_flags.percent:
            preds.append(p.value / 100)
        if self.gold_flags.percent and not self.pred_flags.percent:
            golds.append(g.value / 100)
        if any(a == b for a in preds for b in golds):
            return True
        return any(self._within_tolerance(a, b, p, g) for a in preds for b in golds)

    def _within_tolerance(self, a: Fraction, b: Fraction, p: Num, g: Num) -> bool:
        diff = abs(a - b)
        if self.tolerance is not None and diff <= Fraction(self.tolerance):
            return True
        if self.policy.rel_tol is not None and diff <= Fraction(self.policy.rel_tol) * max(abs(a), abs(b)):
            return True
        if self.policy.abs_tol is not None and diff <= Fraction(self.policy.abs_tol):
            return True
        if self.policy.sig_figs and g.decimal and g.literal is not None:
            figures = significant_figures(g.literal)
            if round_sig(a, figures) == b and _sig_digits(p) >= figures:
                return True
        if p.decimal and not g.decimal and not _terminates(b) and b != 0:
            return diff <= Fraction(self.policy.decimal_rel_tol) * abs(b)
        return False

    def _sym(self, fn: Callable[[Any], bool]) -> bool:
        if self.symbolic is None:
            raise NeedsSymbolic()
        return fn(self.symbolic)


def _sig_digits(num: Num) -> int:
    if num.literal is None:
        return 10**6
    return significant_figures(num.literal) if num.decimal else len(num.literal.lstrip("-0") or "0")


def _terminates(value: Fraction) -> bool:
    q = value.denominator
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
    return q == 1


def _is_ratio(node: Node) -> bool:
    return isinstance(node, Seq) and node.kind == "ratio"


def _ratio_values(node: Node) -> list[Fraction] | None:
    """The parts of a ratio that is not clock-like, as exact numbers (None otherwise)."""
    assert isinstance(node, Seq)
    texts = [i.text for i in node.items if isinstance(i, Leaf)]
    if len(texts) != len(node.items) or clock_like(texts):
        return None
    try:
        return [parse_number(t).value for t in texts]
    except (NotNumeric, TooLarge):
        return None


def _ratio_quotient(node: Node) -> Leaf | None:
    """``a:b`` as the value ``a/b`` (``1:\\sqrt3`` -> ``\\frac{1}{\\sqrt3}``); None for a clock-like
    ratio, more than two parts, or a part that is the number zero."""
    assert isinstance(node, Seq)
    if len(node.items) != 2 or not all(isinstance(i, Leaf) for i in node.items):
        return None
    a, b = (i.text for i in node.items if isinstance(i, Leaf))
    if clock_like([a, b]):
        return None
    values = []
    for text in (a, b):
        try:
            values.append(parse_number(text).value)
        except (NotNumeric, TooLarge):
            values.append(None)
    if any(v == 0 for v in values if v is not None):
        return None
    if values[0] is not None and values[1] is not None:
        q = values[0] / values[1]
        return Leaf(f"\\frac{{{q.numerator}}}{{{q.denominator}}}")
    return Leaf(f"\\frac{{{a}}}{{{b}}}")


def _named_values(node: Node) -> dict[str, Node] | None:
    """``(p,q)=(3,2)`` and ``p=3, q=2`` -> ``{"p": 3, "q": 2}``; ``x=5`` -> ``{"x": 5}``."""
    if isinstance(node, Assign):
        names = tuple_label_names(node.name)
        if names is None:
            return {node.name: node.value}
        value = node.value
        if isinstance(value, Seq) and value.kind in ("pair", "tuple") and len(value.items) == len(names):
            return dict(zip(names, value.items)) if len(set(names)) == len(names) else None
        return None
    if isinstance(node, Seq) and node.kind == "list" and all(isinstance(i, Assign) for i in node.items):
        named = {i.name: i.value for i in node.items if isinstance(i, Assign)}
        return named if len(named) == len(node.items) else None
    return None


def _is_number_leaf(node: Node) -> bool:
    if not isinstance(node, Leaf):
        return False
    try:
        parse_number(node.text)
    except (NotNumeric, TooLarge):
        return False
    return True


def _is_relation(text: str) -> bool:
    return bool(re.search(r"<|>|\\le\b|\\ge\b|\\ne\b|=", text))


def _is_set_word(text: str) -> bool:
    return text.replace(" ", "") in _SET_WORDS


def _is_empty(node: Node) -> bool | None:
    """True for the empty set, False for another literal set/interval, None if unknown."""
    if isinstance(node, Seq) and node.kind == "set":
        return len(node.items) == 0
    if isinstance(node, Leaf) and node.text.replace(" ", "") == r"\emptyset":
        return True
    if isinstance(node, (Interval, Union)) or (isinstance(node, Seq) and node.kind in ("pair", "list")):
        return False
    return None


def _set_like(node: Node) -> bool:
    if isinstance(node, (Interval, Union)):
        return True
    if isinstance(node, Seq) and node.kind == "set":
        return True
    if isinstance(node, Leaf):
        return _is_set_word(node.text) or bool(re.search(r"<|>|\\le\b|\\ge\b|\\ne\b", node.text))
    return False


def _as_interval(node: Node) -> Interval | None:
    if isinstance(node, Interval):
        return node
    if isinstance(node, Seq) and node.kind == "pair":
        return Interval(node.items[0], node.items[1], False, False)
    return None


def _plus_minus_set(node: PlusMinus) -> Seq:
    return Seq("set", plus_minus_values(node))


def pred_has_decimal(text: str) -> bool:
    return bool(_DECIMAL_LITERAL_RE.search(text))
