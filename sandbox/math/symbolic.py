"""Symbolic equivalence with sympy, run only inside an isolated grading worker.

LaTeX is parsed by ``latex2sympy2_extended``'s ANTLR grammar into an *unevaluated* tree (model
text never reaches ``eval``, ``sympify`` or ``parse_expr``). The tree is then evaluated bottom-up
by ``safe_evaluate``, which refuses values too large to compute (power towers, huge factorials)
before sympy tries. Equality is decided with exact arithmetic first, then simplification, then
high-precision numerics with *relative* tolerances (never ``chop``), and for expressions with
free symbols a deterministic multi-point numeric test.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sympy
from antlr4.atn.PredictionMode import PredictionMode
from latex2sympy2_extended.latex2sympy2 import ConversionConfig, _Latex2Sympy
from rlvr.sandbox.math.compare import GoldUnparseable
from rlvr.sandbox.math.latex_prep import prepare_latex
from rlvr.sandbox.math.latex_scan import split_top_level
from rlvr.sandbox.math.numeric import TooLarge
from rlvr.sandbox.math.structure import Assign, Interval, Leaf, Node, PlusMinus, Seq, Unparseable
from rlvr.sandbox.math.structure import Union as UnionNode

_CONVERSION = ConversionConfig(lowercase_symbols=False, interpret_simple_eq_as_assignment=False)
MAX_EXPONENT = 10_000
MAX_BITS = 200_000
MAX_FACTORIAL = 2_000
EQUAL_DIGITS = 50
_I = sympy.Symbol("i")
_PROBE_POINTS = (
    sympy.Rational(7, 5),
    sympy.Rational(-13, 7),
    sympy.Rational(31, 10) + sympy.I * sympy.Rational(2, 3),
    sympy.Rational(-1, 3) - sympy.I * sympy.Rational(5, 4),
    sympy.Rational(23, 11),
)


def _estimate_bits(value: sympy.Basic) -> float:
    if value.is_Integer:
        return float(abs(int(value)).bit_length())
    if value.is_Rational:
        return float(abs(value.p).bit_length() + value.q.bit_length())
    return 64.0


def safe_evaluate(expr: sympy.Basic) -> sympy.Basic:
    """Evaluate an unevaluated parse tree bottom-up, refusing oversized numeric results."""
    if not isinstance(expr, sympy.Basic) or not expr.args or expr.is_Atom:
        return expr
    if isinstance(expr, (sympy.Tuple,)) or isinstance(expr, sympy.MatrixBase):
        return expr
    args = [safe_evaluate(a) for a in expr.args]
    if isinstance(expr, sympy.Pow):
        base, exponent = args
        if exponent.is_number and exponent.is_real and base.is_number:
            e = abs(exponent)
            if e.is_Rational:
                if base not in (sympy.S.Zero, sympy.S.One, sympy.S.NegativeOne):
                    if e.p > MAX_EXPONENT * max(e.q, 1) or _estimate_bits(base) * float(e) > MAX_BITS:
                        raise TooLarge("power too large")
            elif e.is_number and not e.is_Rational:
                approx = sympy.N(e, 15)
                if approx.is_real and approx > MAX_EXPONENT:
                    raise TooLarge("power too large")
        elif exponent.is_Integer and abs(int(exponent)) > MAX_EXPONENT:
            raise TooLarge("symbolic power too large")
    if isinstance(expr, (sympy.factorial, sympy.factorial2, sympy.gamma, sympy.subfactorial)):
        n = args[0]
        if n.is_number and n.is_real and sympy.N(n, 15) > MAX_FACTORIAL:
            raise TooLarge("factorial too large")
    if isinstance(expr, sympy.binomial):
        n = args[0]
        if n.is_number and n.is_real and sympy.N(n, 15) > 10 * MAX_FACTORIAL:
            raise TooLarge("binomial too large")
    if isinstance(expr, sympy.UnevaluatedExpr):
        return args[0]
    if isinstance(expr, sympy.And):
        # latex2sympy's And subclass cannot be rebuilt when its parts evaluate to True/False
        return sympy.And(*args)
    try:
        return expr.func(*args)
    except (TypeError, ValueError, AttributeError):
        return expr.func(*args, evaluate=False)


def _postprocess(expr: sympy.Basic, allow_complex: bool) -> sympy.Basic:
    if allow_complex and isinstance(expr, sympy.Basic) and _I in expr.free_symbols:
        expr = expr.subs(_I, sympy.I)
    if isinstance(expr, sympy.Basic) and expr.has(sympy.Float):
        expr = expr.xreplace({f: sympy.Rational(str(f)) for f in expr.atoms(sympy.Float)})
    return expr


class _SLLConverter(_Latex2Sympy):
    """latex2sympy's converter with ANTLR's fast SLL prediction (two-stage parsing, stage one)."""

    def create_parser(self, latex_str):  # noqa: ANN001 - signature of the base class
        parser = super().create_parser(latex_str)
        parser._interp.predictionMode = PredictionMode.SLL
        return parser


def _parse_latex(text: str) -> sympy.Basic:
    """Parse with SLL prediction first (several times faster); fall back to full LL on failure.

    A successful SLL parse is the same parse LL would produce; only rejections are retried.
    """
    try:
        return _SLLConverter(config=_CONVERSION).parse(text)
    except RecursionError:
        raise
    except Exception:  # the ANTLR front end raises plain Exception on syntax errors
        return _Latex2Sympy(config=_CONVERSION).parse(text)


@lru_cache(maxsize=8192)
def to_sympy(text: str, allow_complex: bool = True) -> sympy.Basic:
    """Parse one leaf (a scalar, relation or simple set) into an evaluated sympy object."""
    if len(text) > 10_000:
        raise Unparseable("answer too long to parse")
    if text.count("=") >= 2:
        chain = _chain(text, allow_complex)
        if chain is not None:
            return chain
    try:
        parsed = _parse_latex(prepare_latex(text))
    except RecursionError as exc:
        raise Unparseable("nesting too deep") from exc
    except TooLarge:
        raise
    except Exception as exc:  # the ANTLR front end raises plain Exception on syntax errors
        chain = _chain(text, allow_complex)
        if chain is not None:
            return chain
        raise Unparseable(f"cannot parse {text[:60]!r}") from exc
    if isinstance(parsed, (list, tuple)):
        raise Unparseable("unexpected sequence")
    try:
        value = _postprocess(safe_evaluate(parsed), allow_complex)
        if isinstance(value, sympy.Basic) and value.has(sympy.zoo, sympy.nan):
            raise Unparseable(f"{text[:60]!r} is undefined (division by zero)")
        return value
    except RecursionError as exc:
        raise Unparseable("nesting too deep") from exc
    except (TypeError, ValueError, AttributeError, ArithmeticError, NotImplementedError, IndexError) as exc:
        chain = _chain(text, allow_complex)
        if chain is not None:
            return chain
        raise Unparseable(f"cannot evaluate {text[:60]!r}: {type(exc).__name__}") from exc


_RELATIONS = {"=": sympy.Eq, "<": sympy.Lt, ">": sympy.Gt, "\\le": sympy.Le, "\\ge": sympy.Ge}
_RELATION_RE = re.compile(r"(\\le(?![a-zA-Z])|\\ge(?![a-zA-Z])|<|>|=)")


def _chain(text: str, allow_complex: bool) -> sympy.Basic | None:
    """``a = b = c``, ``0 < 0 < 0``: a chain of two or more relations as the conjunction of its
    links, each side read on its own (the grammar fails on chains whose links evaluate to
    True/False, and on every chain of equations). None when ``text`` is not such a chain."""
    pieces = _RELATION_RE.split(text)
    sides, ops = [p.strip() for p in pieces[::2]], pieces[1::2]
    tops = split_top_level(text, tuple(_RELATIONS))
    if len(ops) < 2 or len(tops) != len(sides) or not all(sides):
        return None
    values = [to_sympy(side, allow_complex) for side in sides]
    try:
        links = [_RELATIONS[op](a, b, evaluate=False) for op, a, b in zip(ops, values, values[1:])]
        return sympy.And(*links, evaluate=False)
    except (TypeError, ValueError, AttributeError) as exc:
        raise Unparseable(f"cannot read the chain {text[:60]!r}") from exc


def _close(a: sympy.Basic, b: sympy.Basic, rel: float, digits: int = EQUAL_DIGITS) -> bool | None:
    """Relative closeness of two numeric expressions at high precision; None if undecidable."""
    va = sympy.N(a, digits)
    vb = sympy.N(b, digits)
    if not (va.is_number and vb.is_number) or va.has(sympy.nan, sympy.zoo) or vb.has(sympy.nan, sympy.zoo):
        return None
    if va.has(sympy.oo, -sympy.oo) or vb.has(sympy.oo, -sympy.oo):
        return va == vb
    diff = sympy.Abs(sympy.N(va - vb, digits))
    scale = sympy.Max(sympy.Abs(va), sympy.Abs(vb))
    if diff == 0:
        return True
    if scale == 0:
        return False
    return bool(diff <= rel * scale)


class SymbolicBackend:
    """Leaf, relation and set equality for one comparison, under one policy."""

    def __init__(self, policy, pred_decimal: bool, gold_tolerance: float | None):
        self.policy = policy
        self.pred_decimal = pred_decimal
        self.rel_tol = policy.rel_tol
        self.abs_tol = policy.abs_tol
        self.gold_tolerance = gold_tolerance

    def parse(self, text: str) -> sympy.Basic:
        return to_sympy(text, self.policy.allow_complex)

    def parse_gold(self, text: str) -> sympy.Basic:
        try:
            return self.parse(text)
        except (Unparseable, TooLarge) as exc:
            raise GoldUnparseable(str(exc)) from exc

    def leaf_equal(self, p: str, g: str) -> bool:
        b = self.parse_gold(g)
        a = self.parse(p)
        if isinstance(a, sympy.Set) or isinstance(b, sympy.Set):
            return self._sets_equal(self._as_set_value(a), self._as_set_value(b))
        if isinstance(a, (sympy.core.relational.Relational, sympy.And)) or isinstance(
            b, (sympy.core.relational.Relational, sympy.And)
        ):
            return self._relations_equal(a, b)
        return self.expr_equal(a, b)

    def expr_equal(self, a: sympy.Basic, b: sympy.Basic) -> bool:
        if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr):
            return a == b
        if a == b:
            return True
        free = a.free_symbols | b.free_symbols
        if not free:
            return self._numbers_equal(a, b)
        if not self._probe_identity(a, b, free):
            return False
        return self._same_domain(a, b)

    def _numbers_equal(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        if a.is_Rational and b.is_Rational:
            if a == b:
                return True
            return self._tolerated(a, b)
        exact = _close(a, b, 10.0 ** (-(EQUAL_DIGITS - 5)))
        if exact:
            return True
        if exact is None:
            try:
                return sympy.simplify(a - b) == 0
            except (TypeError, ValueError):
                return False
        return self._tolerated(a, b)

    def _tolerated(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        if self.rel_tol is not None and _close(a, b, self.rel_tol, 30):
            return True
        for tol in (self.abs_tol, self.gold_tolerance):
            if tol is not None:
                diff = sympy.N(sympy.Abs(a - b), 30)
                if diff.is_number and diff <= tol:
                    return True
        if self.pred_decimal and not (b.is_Rational and _terminates(b)):
            return bool(_close(a, b, self.policy.decimal_rel_tol, 30))
        return False

    def _probe_identity(self, a: sympy.Expr, b: sympy.Expr, free: set) -> bool:
        symbols = sorted(free, key=lambda s: s.name)
        checked = 0
        for k in range(len(_PROBE_POINTS)):
            point = {s: _PROBE_POINTS[(k + j) % len(_PROBE_POINTS)] + j for j, s in enumerate(symbols)}
            try:
                va = a.xreplace(point)
                vb = b.xreplace(point)
                close = _close(va, vb, 1e-25, 40)
            except (TypeError, ValueError, ZeroDivisionError):
                close = None
            if close is False:
                return False
            if close:
                checked += 1
        if checked >= 3:
            return True
        try:
            return sympy.simplify(a - b) == 0
        except (TypeError, ValueError):
            return False

    def _same_domain(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        """False when ``a`` has poles ``b`` lacks, e.g. (x^2-1)/(x-1) against x+1."""
        if not self.policy.strict_domain:
            return True
        try:
            den_a = sympy.fraction(sympy.together(a))[1]
            den_b = sympy.fraction(sympy.together(b))[1]
            extra = sympy.fraction(sympy.cancel(den_a / den_b))[0]
        except (TypeError, ValueError, sympy.PolynomialError):
            return True
        return not extra.free_symbols

    def _relations_equal(self, a: sympy.Basic, b: sympy.Basic) -> bool:
        from sympy.core.relational import Equality, Relational

        if isinstance(a, Equality) and isinstance(b, Equality):
            if a.lhs.is_Symbol and b.lhs.is_Symbol and a.lhs == b.lhs:
                return self.expr_equal(a.rhs, b.rhs)
            return self._proportional(a.lhs - a.rhs, b.lhs - b.rhs, positive=False)
        if isinstance(a, Equality) != isinstance(b, Equality):
            return False
        if not isinstance(a, (Relational, sympy.And)) or not isinstance(b, (Relational, sympy.And)):
            return False
        free = a.free_symbols | b.free_symbols
        if len(free) == 1:
            return self._sets_equal(_relation_set(a), _relation_set(b))
        if isinstance(a, sympy.And) or isinstance(b, sympy.And):
            return False
        fa, strict_a = _positive_form(a)
        fb, strict_b = _positive_form(b)
        if fa is None or fb is None or strict_a != strict_b:
            return False
        return self._proportional(fa, fb, positive=True)

    def _proportional(self, d1: sympy.Expr, d2: sympy.Expr, positive: bool) -> bool:
        if d2 == 0 or d1 == 0:
            return d1 == d2
        ratio = sympy.simplify(d1 / d2)
        if ratio.free_symbols or ratio == 0:
            return False
        return bool(ratio > 0) if positive else True

    def _as_set_value(self, value: sympy.Basic) -> sympy.Set:
        if isinstance(value, sympy.Set):
            return value
        if isinstance(value, (sympy.core.relational.Relational, sympy.And)):
            return _relation_set(value)
        return sympy.FiniteSet(value)

    def _sets_equal(self, a: sympy.Set | None, b: sympy.Set | None) -> bool:
        if a is None or b is None:
            return False
        if a == b:
            return True
        try:
            return a.symmetric_difference(b) == sympy.S.EmptySet
        except (TypeError, ValueError, NotImplementedError):
            return False

    def node_set(self, node: Node, gold: bool = False) -> sympy.Set | None:
        """A sympy set for an interval, union, set literal or relation node."""
        parse = self.parse_gold if gold else self.parse
        if isinstance(node, Interval):
            lo, hi = parse(_leaf_text(node.lo)), parse(_leaf_text(node.hi))
            return sympy.Interval(lo, hi, left_open=not node.left_closed, right_open=not node.right_closed)
        if isinstance(node, Seq) and node.kind == "pair":
            lo, hi = (parse(_leaf_text(i)) for i in node.items)
            return sympy.Interval.open(lo, hi)
        if isinstance(node, UnionNode):
            parts = [self.node_set(p, gold) for p in node.parts]
            if any(p is None for p in parts):
                return None
            return sympy.Union(*parts)
        if isinstance(node, Seq) and node.kind in ("set", "list"):
            return sympy.FiniteSet(*(self._value(i, parse) for i in node.items))
        if isinstance(node, PlusMinus):
            offset = parse(_leaf_text(node.offset))
            center = parse(_leaf_text(node.center)) if node.center is not None else sympy.S.Zero
            return sympy.FiniteSet(center + offset, center - offset)
        if isinstance(node, Assign):
            return None
        if isinstance(node, Leaf):
            return self._as_set_value(parse(node.text))
        return None

    def _value(self, node: Node, parse) -> sympy.Basic:
        """A set element: a scalar, a tuple of values, or a nested set."""
        if isinstance(node, Leaf):
            return parse(node.text)
        if isinstance(node, Seq) and node.kind in ("tuple", "pair"):
            return sympy.Tuple(*(self._value(i, parse) for i in node.items))
        nested = self.node_set(node, parse == self.parse_gold)
        if nested is None:
            raise Unparseable("unsupported set element")
        return nested

    def sets_equal(self, p: Node, g: Node) -> bool:
        gold_set = self.node_set(g, gold=True)
        return self._sets_equal(self.node_set(p), gold_set)

    def relation_equal(self, p: Node, g: Node) -> bool:
        gold_rel = self._relation(g, self.parse_gold)
        return self._relations_equal(self._relation(p, self.parse), gold_rel)

    def _relation(self, node: Node, parse) -> sympy.Basic:
        if isinstance(node, Assign):
            return sympy.Eq(sympy.Symbol(node.name.lstrip("\\")), parse(_leaf_text(node.value)), evaluate=False)
        return parse(_leaf_text(node))


def _leaf_text(node: Node | None) -> str:
    if isinstance(node, Leaf):
        return node.text
    raise Unparseable("nested structure where a value was expected")


def _terminates(value: sympy.Rational) -> bool:
    q = int(value.q)
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


def _positive_form(rel: sympy.Basic) -> tuple[sympy.Expr | None, bool]:
    """Rewrite ``a < b`` as ``b - a > 0``: returns (expression, strict)."""
    from sympy.core.relational import GreaterThan, LessThan, StrictGreaterThan, StrictLessThan

    if isinstance(rel, StrictGreaterThan):
        return rel.lhs - rel.rhs, True
    if isinstance(rel, GreaterThan):
        return rel.lhs - rel.rhs, False
    if isinstance(rel, StrictLessThan):
        return rel.rhs - rel.lhs, True
    if isinstance(rel, LessThan):
        return rel.rhs - rel.lhs, False
    return None, False


def _relation_set(rel: sympy.Basic) -> sympy.Set | None:
    """The real solution set of a univariate relation (or conjunction of relations)."""
    free = rel.free_symbols
    if len(free) != 1:
        return None
    (var,) = free
    real = sympy.Symbol(var.name, real=True)
    rel = rel.xreplace({var: real})
    try:
        if isinstance(rel, sympy.And):
            result = sympy.S.Reals
            for arg in rel.args:
                part = _relation_set(arg)
                if part is None:
                    return None
                result = result.intersect(part)
            return result
        if isinstance(rel, sympy.Eq):
            return sympy.solveset(rel.lhs - rel.rhs, real, sympy.S.Reals)
        return sympy.solveset(rel, real, sympy.S.Reals)
    except (NotImplementedError, TypeError, ValueError):
        return None
