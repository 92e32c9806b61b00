"""Read the shape of an answer: lists, sets, tuples, intervals, unions, matrices, assignments.

The shape is decided here, on strings, with our own rules (a bare comma list is an unordered
list of answers; ``(a, b)`` is an ordered pair that also reads as an open interval; ``[a, b)`` is
an interval; ``\\{...\\}`` is a set; ``\\pm`` makes two values). Leaves stay strings and are
compared later by a numeric or a symbolic backend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.sandbox.math.labels import (
    canonical_label,
    has_free_letter,
    is_label,
    is_named_value,
    ratio_parts,
    split_bracket_alternatives,
    written_number,
)
from rlvr.sandbox.math.latex_scan import enclosing_pair, split_top_level, strip_outer_braces


class Unparseable(ValueError):
    """The answer has no readable mathematical shape (or is too large to read)."""


@dataclass(frozen=True)
class Leaf:
    text: str


@dataclass(frozen=True)
class Seq:
    """Several values. ``kind``: ``list`` and ``set`` are unordered; ``tuple`` is ordered;
    ``pair`` is ``(a, b)``, ordered, and also an open interval when compared with intervals."""

    kind: str
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Interval:
    lo: "Node"
    hi: "Node"
    left_closed: bool
    right_closed: bool


@dataclass(frozen=True)
class Union:
    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Matrix:
    rows: tuple[tuple["Node", ...], ...]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0]) if self.rows else 0


@dataclass(frozen=True)
class PlusMinus:
    """``c \\pm d``: the two values c + d and c - d (c may be absent)."""

    center: "Node | None"
    offset: "Node"


@dataclass(frozen=True)
class Assign:
    """``x = 5``: a named value."""

    name: str
    value: "Node"


Node = Leaf | Seq | Interval | Union | Matrix | PlusMinus | Assign

MAX_ITEMS = 2000
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_MATRIX_RE = re.compile(
    r"^\\begin\{(pmatrix|bmatrix|Bmatrix|vmatrix|Vmatrix|matrix|smallmatrix|array)\}(.*)\\end\{\1\}$", re.S
)
#: A side of an equation that is plain arithmetic on numbers (no variables): "2 + 4", "3 \\times 4".
_ARITHMETIC_RE = re.compile(r"(?:[\d\s+\-*/^().,×÷·]|\\times|\\cdot|\\div|\\,|\\!)+")
_LIST_SEPARATORS = (",", ";", " and ", " or ", r"\text{and}", r"\text{or}")
_MEMBERSHIP_RE = re.compile(r"^(?:[A-Za-z](?:_\{?\w+\}?)?|\\[a-zA-Z]+)\s*\\in\s*")


def parse_structure(text: str, multiple: bool = False, answer_type: str | None = None) -> Node:
    """Parse a normalised answer string into a node tree (leaves are strings).

    A declared ``answer_type`` sharpens the reading of the gold: ``interval`` makes ``(a, b)``
    an open interval, ``tuple`` makes a bare ``a, b`` ordered, ``set`` makes it unordered.
    """
    node = _parse(text, multiple)
    kind = (answer_type or "").strip().lower()
    if kind == "interval" and isinstance(node, Seq) and node.kind == "pair":
        return Interval(node.items[0], node.items[1], False, False)
    if kind == "tuple" and not multiple and isinstance(node, Seq) and node.kind == "list":
        return Seq("tuple", node.items)
    if kind == "set" and isinstance(node, Seq) and node.kind == "list":
        return Seq("set", node.items)
    return node


def _parse(text: str, multiple: bool) -> Node:
    s = text.strip()
    if not s:
        raise Unparseable("empty answer")
    if _THOUSANDS_RE.match(s) and not multiple:
        return Leaf(s.replace(",", ""))
    number = written_number(s)
    if number is not None:
        return Leaf(number)
    s = _MEMBERSHIP_RE.sub("", s, count=1)
    s = split_bracket_alternatives(s)
    groups = _labelled_groups(s)
    if groups is not None:
        return groups
    parts = [p for p in split_top_level(s, _LIST_SEPARATORS) if p]
    if len(parts) > MAX_ITEMS:
        raise Unparseable("too many items")
    if not parts:
        raise Unparseable("empty answer")
    if len(parts) == 1:
        return _single(parts[0])
    items = [_single(p) for p in parts]
    if isinstance(items[0], Assign) and not any(isinstance(i, Assign) for i in items[1:]):
        items[0] = items[0].value
    return Seq("list", _flatten_plus_minus(items))


def _labelled_groups(s: str) -> Seq | None:
    """``p=5,q=2; p=7,q=2``: solutions given as groups of labelled values, one group per
    solution, read as the tuples ``(p,q)=(5,2)`` and ``(p,q)=(7,2)``."""
    if "=" not in s:
        return None
    groups = split_top_level(s, (";", " or ", r"\text{or}"))
    if not 2 <= len(groups) <= MAX_ITEMS:
        return None
    tuples: list[Node] = []
    names: list[str] | None = None
    for group in groups:
        parts = [p for p in split_top_level(group, (",", " and ")) if p]
        if not 2 <= len(parts) <= MAX_ITEMS or any("=" not in p for p in parts):
            return None
        items = [_single(p) for p in parts]
        if not all(isinstance(i, Assign) for i in items):
            return None
        these = [i.name for i in items]  # type: ignore[union-attr]
        if len(set(these)) != len(these) or (names is not None and these != names):
            return None
        names = these
        values = tuple(i.value for i in items)  # type: ignore[union-attr]
        tuples.append(Assign(f"({','.join(these)})", Seq("pair" if len(values) == 2 else "tuple", values)))
    return Seq("list", tuple(tuples))


def _flatten_plus_minus(items: list[Node]) -> tuple[Node, ...]:
    """Inside a list or set, ``a \\pm b`` stands for its two values."""
    out: list[Node] = []
    for item in items:
        out.extend(plus_minus_values(item) if isinstance(item, PlusMinus) else (item,))
    return tuple(out)


def plus_minus_values(node: PlusMinus) -> tuple[Leaf, Leaf]:
    """The two leaves ``c + d`` and ``c - d`` (or ``d`` and ``-d``)."""
    if not isinstance(node.offset, Leaf) or (node.center is not None and not isinstance(node.center, Leaf)):
        raise Unparseable("nested \\pm")
    d = node.offset.text
    if node.center is None:
        return Leaf(d), Leaf(f"-{d}" if _simple(d) else f"-({d})")
    c = node.center.text
    return Leaf(f"{c}+{d}"), Leaf(f"{c}-{d}" if _simple(d) else f"{c}-({d})")


def _simple(text: str) -> bool:
    return bool(re.fullmatch(r"[\w.]+|\\frac\{[^{}]*\}\{[^{}]*\}|\\sqrt\{[^{}]*\}", text))


def _single(s: str) -> Node:
    s = strip_outer_braces(s.strip())
    if not s:
        raise Unparseable("empty item")
    m = _MATRIX_RE.match(s)
    if m:
        return _matrix(m.group(1), m.group(2))
    unions = split_top_level(s, (r"\cup",))
    if len(unions) > 1:
        return Union(tuple(_single(u) for u in unions))
    pair = enclosing_pair(s)
    if pair is not None:
        opener, closer = pair
        inner = s[len(opener) : len(s) - len(closer)].strip()
        if opener == "\\{":
            if not inner:
                return Seq("set", ())
            return Seq("set", _flatten_plus_minus([_single(p) for p in split_top_level(inner, (",", ";")) if p]))
        items = [p for p in split_top_level(inner, (",",))]
        if len(items) == 1 and opener != "\\{":
            items = split_top_level(inner, (";",))  # (0;-2;6): semicolons between coordinates
        mixed = (opener, closer) in (("[", ")"), ("(", "]"))
        if len(items) == 1:
            if mixed:
                raise Unparseable("mismatched brackets")
            return _single(inner)
        if any(not p for p in items):
            raise Unparseable("empty tuple item")
        nodes = tuple(_single(p) for p in items)
        if len(nodes) == 2:
            if opener == "(" and closer == ")":
                return Seq("pair", nodes)
            return Interval(nodes[0], nodes[1], opener == "[", closer == "]")
        if mixed:
            raise Unparseable("mismatched brackets around a tuple")
        return Seq("tuple", nodes)
    pm = split_top_level(s, (r"\pm", r"\mp"))
    if len(pm) == 2:
        center = _single(pm[0]) if pm[0] else None
        return PlusMinus(center, _single(pm[1]))
    eq = split_top_level(s, ("=",))
    if len(eq) == 2 and is_label(eq[0]) and eq[1] and not re.search(r"\\(?:le|ge|ne)\b|[<>]", eq[1]):
        return Assign(canonical_label(eq[0]), _single(eq[1]))
    if len(eq) > 2 and eq[-1] and is_label(eq[0]):
        if all(is_label(e) for e in eq[1:-1]):
            return Assign(canonical_label(eq[-2]), _single(eq[-1]))
        if all(_worked_arithmetic(e) for e in eq[1:-1]):
            return Assign(canonical_label(eq[0]), _single(eq[-1]))  # "z = 1 + 1 = 2"
    if len(eq) >= 2 and eq[-1].strip() and not has_free_letter(eq[-1]) and all(map(_worked_arithmetic, eq[:-1])):
        return _single(eq[-1])  # "2+4=6": the worked arithmetic ends in the answer, its last side
    interval = _double_inequality(s)
    if interval is not None:
        return interval
    parts = ratio_parts(s)
    if parts is not None:
        return Seq("ratio", tuple(Leaf(p) for p in parts))
    return Leaf(s)


def _worked_arithmetic(side: str) -> bool:
    """Plain arithmetic on numbers: digits, operators, and no free variable."""
    side = side.strip()
    return bool(side and _ARITHMETIC_RE.fullmatch(side) and re.search(r"\d", side) and not has_free_letter(side))


_INEQUALITY_RE = re.compile(r"(<|>|\\le(?![a-zA-Z])|\\ge(?![a-zA-Z]))")


def _double_inequality(s: str) -> Interval | None:
    """``0 < f(x) < 1`` / ``7 \\ge x \\ge -2``: a name or function value between two constant
    bounds is an interval (``1 \\le |z| \\le 2`` is not: it is solved for ``z``)."""
    parts = _INEQUALITY_RE.split(s)
    if len(parts) != 5:
        return None
    lo, op1, mid, op2, hi = (p.strip() for p in parts)
    up = {"<": True, "\\le": True, ">": False, "\\ge": False}
    if up[op1] != up[op2] or not is_named_value(mid) or not lo or not hi or has_free_letter(lo + hi):
        return None
    if "(" in lo + hi or "[" in lo + hi or "=" in lo + hi:
        return None
    if not up[op1]:
        lo, hi, op1, op2 = hi, lo, op2, op1
    return Interval(_single(lo), _single(hi), op1 == "\\le", op2 == "\\le")


def _matrix(env: str, body: str) -> Matrix:
    if env == "array":
        body = re.sub(r"^\s*\{[^{}]*\}", "", body)
    rows = [r for r in re.split(r"\\\\", body) if r.strip() and not re.fullmatch(r"\s*\\hline\s*", r)]
    cells = tuple(tuple(_single(c) for c in split_top_level(r.replace(r"\hline", ""), ("&",))) for r in rows)
    if not cells or any(len(r) != len(cells[0]) for r in cells):
        raise Unparseable("ragged matrix")
    return Matrix(cells)


def count_items(node: Node) -> int:
    """How many answers a gold asks for (a list of 3 roots asks for 3)."""
    if isinstance(node, Seq) and node.kind in ("list", "set"):
        return max(len(node.items), 1)
    if isinstance(node, PlusMinus):
        return 2
    return 1
