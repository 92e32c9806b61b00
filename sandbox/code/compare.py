"""Trusted comparison of program outputs, done outside the sandbox.

stdin tests compare like LiveCodeBench (whole output stripped, lines stripped, same number of
lines, tokens equal) with one fix: numeric tokens may differ by a float tolerance, absolute or
relative (LiveCodeBench's exact ``Decimal`` check rejects ``0.333333`` for ``0.3333333333``).
Functional results arrive as JSON (with tags for sets, tuples-as-lists, dicts with non-string
keys, non-finite floats) and are compared structurally here; nothing the program defined takes
part in the comparison.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_INT_RE = re.compile(r"[-+]?\d+")


def _as_number(token: str) -> Decimal | None:
    if not _NUMBER_RE.fullmatch(token):
        return None
    try:
        return Decimal(token)
    except InvalidOperation:
        return None


def tokens_equal(got: str, want: str, abs_tol: float, rel_tol: float) -> bool:
    """Tokens match exactly, or both are numbers and (unless both are integers) close."""
    if got == want:
        return True
    a, b = _as_number(got), _as_number(want)
    if a is None or b is None:
        return False
    if _INT_RE.fullmatch(got) and _INT_RE.fullmatch(want):
        return a == b
    diff = abs(a - b)
    return diff <= Decimal(repr(abs_tol)) or diff <= Decimal(repr(rel_tol)) * max(abs(a), abs(b))


def stdout_matches(got: str, want: str, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> tuple[bool, str]:
    """Compare program output with the expected output; returns (match, why not)."""
    got_lines = [line.strip() for line in got.strip().split("\n")]
    want_lines = [line.strip() for line in want.strip().split("\n")]
    if len(got_lines) != len(want_lines):
        return False, f"expected {len(want_lines)} lines, got {len(got_lines)}"
    for number, (g, w) in enumerate(zip(got_lines, want_lines), start=1):
        if g == w:
            continue
        gt, wt = g.split(), w.split()
        if len(gt) != len(wt) or not all(tokens_equal(x, y, abs_tol, rel_tol) for x, y in zip(gt, wt)):
            return False, f"line {number}: expected {w[:80]!r}, got {g[:80]!r}"
    return True, ""


def values_equal(got: Any, want: Any, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> bool:
    """Structural equality of decoded JSON values (tuples are lists; floats within tolerance).

    Tagged forms produced by the test child (`sandbox.code.child`): ``{"__set__": [...]}`` (unordered), ``{"__dict__":
    [[k, v], ...]}`` (non-string keys), ``{"__float__": "nan"|"inf"|"-inf"}``,
    ``{"__complex__": [re, im]}``.
    """
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, int) and isinstance(got, int):
            return want == got
        return _floats_close(float(got), float(want), abs_tol, rel_tol)
    if isinstance(want, dict) and isinstance(got, dict):
        tag_w, tag_g = _tag(want), _tag(got)
        if tag_w == "__float__" or tag_g == "__float__":
            return _floats_close(_special_float(got), _special_float(want), abs_tol, rel_tol)
        if tag_w != tag_g or tag_w == "__object__":
            return False
        if tag_w == "__set__":
            return _unordered_equal(got["__set__"], want["__set__"], abs_tol, rel_tol)
        if tag_w == "__dict__":
            return _unordered_equal([list(p) for p in got["__dict__"]], [list(p) for p in want["__dict__"]], abs_tol, rel_tol)
        if tag_w == "__complex__":
            return values_equal(got["__complex__"], want["__complex__"], abs_tol, rel_tol)
        if set(want) != set(got):
            return False
        return all(values_equal(got[k], want[k], abs_tol, rel_tol) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(values_equal(g, w, abs_tol, rel_tol) for g, w in zip(got, want))
    if isinstance(want, dict) and _tag(want) == "__float__" and isinstance(got, (int, float)):
        return _floats_close(float(got), _special_float(want), abs_tol, rel_tol)
    if isinstance(got, dict) and _tag(got) == "__float__" and isinstance(want, (int, float)):
        return _floats_close(_special_float(got), float(want), abs_tol, rel_tol)
    return type(want) is type(got) and want == got


def _tag(value: dict) -> str | None:
    if len(value) == 1:
        (key,) = value
        if key in ("__set__", "__dict__", "__float__", "__complex__", "__object__"):
            return key
    return None


def _special_float(value: Any) -> float:
    if isinstance(value, dict):
        return float(value["__float__"])
    return float(value)


def _floats_close(a: float, b: float, abs_tol: float, rel_tol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == b or abs(a - b) <= abs_tol or abs(a - b) <= rel_tol * max(abs(a), abs(b))


def _unordered_equal(got: list, want: list, abs_tol: float, rel_tol: float) -> bool:
    if len(got) != len(want):
        return False
    remaining = list(got)
    for w in want:
        for k, g in enumerate(remaining):
            if values_equal(g, w, abs_tol, rel_tol):
                del remaining[k]
                break
        else:
            return False
    return True


ORACLES = ("exact", "set", "not_none", "poly_root")


def result_matches(got: Any, want: Any, oracle: str, args: list[Any], abs_tol: float, rel_tol: float) -> bool:
    """Apply a task's oracle (EvalPlus needs three besides plain equality).

    ``set``: compare as unordered collections; ``not_none``: the result is None exactly when the
    reference's is (the reference returns unserialisable match objects); ``poly_root``: the result is a root of the
    polynomial given as the first argument (HumanEval/32 accepts any root).
    """
    if oracle == "not_none":
        return (got is None) == (want is None)
    if oracle == "set":
        items = lambda v: v.get("__set__") if isinstance(v, dict) and _tag(v) == "__set__" else v  # noqa: E731
        g, w = items(got), items(want)
        return isinstance(g, list) and isinstance(w, list) and _unordered_equal(_dedupe(g), _dedupe(w), abs_tol, rel_tol)
    if oracle == "poly_root":
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not args or not isinstance(args[0], list):
            return False
        value = sum(c * math.pow(got, i) for i, c in enumerate(args[0]))
        return abs(value) <= max(abs_tol, 1e-6)
    return values_equal(got, want, abs_tol, rel_tol)


def _dedupe(values: list) -> list:
    out: list = []
    for v in values:
        if not any(values_equal(v, o) for o in out):
            out.append(v)
    return out


def encode_args(value: Any, depth: int = 0) -> Any:
    """JSON form of call arguments that keeps the Python types JSON lacks (tuples, sets, complex,
    non-finite floats, dicts with non-string keys); the test child decodes them."""
    if depth > 500:
        raise ValueError("arguments nested too deeply")
    if isinstance(value, tuple):
        return {"__tuple__": [encode_args(v, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode_args(v, depth + 1) for v in value]}
    if isinstance(value, complex):
        return {"__complex__": [value.real, value.imag]}
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return {"__float__": repr(value)}
    if isinstance(value, list):
        return [encode_args(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode_args(v, depth + 1) for k, v in value.items()}
        return {"__dict__": [[encode_args(k, depth + 1), encode_args(v, depth + 1)] for k, v in value.items()]}
    return value
