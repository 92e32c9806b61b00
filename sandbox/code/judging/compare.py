"""Trusted comparison of program outputs with the benchmark's own rules, done outside the sandbox.

stdin tests (``stdout_matches``) follow LiveCodeBench's ``grade_stdio``: the whole output and
each line stripped, the same number of lines, each line equal as text or, token by token, as
exact ``Decimal`` values (so ``2.0`` matches ``2`` and ``0.333333`` does not match
``0.3333333333``). A float tolerance is opt-in (a benchmark or a test that states one) and then
applies only to tokens whose *expected* form is a non-integer number, never to integers.

Functional results arrive as typed encodings (``rlvr.sandbox.code.running.values``) and are decoded into plain
built-in values, so the comparison is Python's own ``==`` without any method the program defined.
Rules (``Comparison.rule``):

* ``python``: ``out == exp`` (tuple != list, ``True == 1``, ``1.0 == 1``), the default for
  ``{"args", "expected"}`` tests;
* ``livecodebench``: LiveCodeBench's ``grade_call_based``: a tuple result becomes a list, then
  ``==``; the default for LiveCodeBench-format functional tests (JSON ``input``/``output``);
* ``evalplus``: EvalPlus 0.3.1's ``unsafe_execute``: ``==``, its special oracles, and where that
  fails and a tolerance applies (the task's ``atol``, or 1e-6 once an expected value of the group
  was a float or a flat all-float list), same type, same length and
  ``numpy.allclose(rtol=1e-7, atol)``;
* ``close``: structural equality with floats within ``atol``/``rtol`` (an opt-in of ours).

Deliberate differences from EvalPlus, each tested: ``find_zero`` (HumanEval/32) passes when
``|poly(xs, x)| <= atol`` (EvalPlus 0.3.1 counts every sample as failed, canonical included,
because its oracle never records a pass); an object of a class the program defined equals
nothing (EvalPlus accepts one whose ``__eq__`` always returns True); subclasses of built-in
types compare by their built-in value.
"""

from __future__ import annotations

import base64
import math
import sys
from dataclasses import dataclass, field
from decimal import Decimal, DecimalException, InvalidOperation
from typing import Any

from rlvr.sandbox.code.judging import blobs
from rlvr.sandbox.code.judging.decoding import MAX_ITEMS, Decoder, decode, safe_set
from rlvr.sandbox.code.judging.encoded_facts import plain_encoded, shallow_is_floats
from rlvr.sandbox.code.running.values import MalformedValue, Opaque

RULES = ("python", "livecodebench", "evalplus", "close")
ORACLES = ("exact", "set", "not_none", "find_zero", "sum_div", "surface_area", "digit_distance", "any_value")
#: Oracles that exist only inside EvalPlus's rule (Mbpp/295, 581, 558 and 164).
EVALPLUS_ONLY_ORACLES = ("sum_div", "surface_area", "digit_distance", "any_value")
EVALPLUS_RTOL = 1e-07
EVALPLUS_FLOAT_ATOL = 1e-6


@dataclass(frozen=True)
class Comparison:
    """How functional results are compared. ``rule`` None: the test format's own rule.
    ``atol``/``rtol``: the ``evalplus`` task tolerance, the ``close`` tolerances, and the opt-in
    tolerance of stdin tests (non-integer expected tokens only)."""

    rule: str | None = None
    oracle: str = "exact"
    atol: float = 0.0
    rtol: float = 0.0

    def __post_init__(self) -> None:
        if self.rule is not None and self.rule not in RULES:
            raise ValueError(f"unknown comparison rule {self.rule!r}; choose from {RULES}")
        if self.oracle not in ORACLES:
            raise ValueError(f"unknown oracle {self.oracle!r}; choose from {ORACLES}")
        if self.oracle in EVALPLUS_ONLY_ORACLES and self.rule != "evalplus":
            raise ValueError(f"oracle {self.oracle!r} belongs to the evalplus rule")
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e300:
                raise ValueError(f"comparison {name} must be a non-negative number, got {value!r}")

    @classmethod
    def from_any(cls, value: Any, oracle: str | None = None) -> "Comparison":
        if isinstance(value, Comparison):
            base = value
        elif value is None:
            base = cls()
        elif isinstance(value, str):
            base = cls(rule=value)
        elif isinstance(value, dict):
            unknown = set(value) - {"rule", "oracle", "atol", "rtol"}
            if unknown:
                raise ValueError(f"unknown comparison field(s) {sorted(unknown)}; known: rule, oracle, atol, rtol")
            base = cls(**value)
        else:
            raise ValueError(f"compare must be a rule name or an object, got {type(value).__name__}")
        if oracle and oracle != "exact":
            base = cls(base.rule, oracle, base.atol, base.rtol)
        return base


# ---------------------------------------------------------------------------------------------
# stdin
# ---------------------------------------------------------------------------------------------
def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _non_integer_number(token: str) -> bool:
    """The expected token is written as a number that is not an integer (``0.5``, ``1e-3``)."""
    if not any(c in token for c in ".eE"):
        return False
    try:
        value = Decimal(token)
    except (InvalidOperation, ValueError):
        return False
    return value.is_finite()


def _lines_close(
    got: list[Decimal] | None, want: list[Decimal] | None, want_tokens: list[str], atol: float, rtol: float
) -> bool:
    if got is None or want is None or len(got) != len(want):
        return False
    for g, w, text in zip(got, want, want_tokens):
        try:
            if g == w:
                continue
            if not (_non_integer_number(text) and g.is_finite()):
                return False
            diff = abs(g - w)
            if not (diff <= Decimal(repr(atol)) or diff <= Decimal(repr(rtol)) * abs(w)):
                return False
        except DecimalException:  # overflow or invalid: an enormous token is simply not close
            return False
    return True


def stdout_matches(got: str, want: str, atol: float = 0.0, rtol: float = 0.0) -> tuple[bool, str]:
    """Program output against the expected output: LiveCodeBench's rule, plus the opt-in
    tolerance. Returns (match, why not)."""
    got_lines, want_lines = _stripped_lines(got), _stripped_lines(want)
    if len(got_lines) != len(want_lines):
        return False, f"expected {len(want_lines)} lines, got {len(got_lines)}"
    for number, (g, w) in enumerate(zip(got_lines, want_lines), start=1):
        if g == w:
            continue
        dg, dw = _decimals(g), _decimals(w)
        try:
            equal = dg is not None and dw is not None and dg == dw
        except DecimalException:
            equal = False
        if equal or ((atol or rtol) and _lines_close(dg, dw, w.split(), atol, rtol)):
            continue
        return False, f"line {number}: expected {w[:80]!r}, got {g[:80]!r}"
    return True, ""


# ---------------------------------------------------------------------------------------------
# Functional results
# ---------------------------------------------------------------------------------------------
def is_floats(x: Any) -> bool:
    """EvalPlus's ``is_floats``: a float, a non-empty list/tuple of floats, a float array."""
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    np = _numpy_if_loaded(x)
    if np is not None and isinstance(x, np.ndarray):
        return x.dtype == np.float64 or x.dtype == np.float32
    return False


def _numpy_if_loaded(x: Any) -> Any:
    if type(x).__module__.startswith("numpy"):
        import numpy

        return numpy
    return None


def broadcast_blowup(got: Any, want: Any, depth: int = 0) -> bool:
    """Would comparing these (``==``, ``allclose``) make numpy broadcast a pair of operands into
    an array larger than both? A (N, 1) array against a list of M builds N x M booleans in the
    judge. Such a comparison can only fail (the truth value of an array of several elements
    raises), so it is answered without being built. Walks the pairs Python's ``==`` would
    compare: equal-length sequences item by item, dicts by shared key."""
    if depth > 100:
        return False
    np = sys.modules.get("numpy")
    if np is None:
        return False
    if isinstance(got, np.ndarray) or isinstance(want, np.ndarray):
        try:
            shapes = np.shape(got), np.shape(want)
            joint = np.broadcast_shapes(*shapes)
        except Exception:  # ragged or incompatible: numpy refuses without building anything
            return False
        return math.prod(joint) > max(math.prod(shapes[0]), math.prod(shapes[1]))
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)) and len(got) == len(want):
        return any(broadcast_blowup(g, w, depth + 1) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return any(broadcast_blowup(got[k], want[k], depth + 1) for k in want if _has_key(got, k))
    return False


def _has_key(mapping: dict, key: Any) -> bool:
    try:
        return key in mapping
    except TypeError:
        return False


def _poly(xs: list, x: float) -> float:
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def _surface_area(base_edge: float, height: float) -> int:
    """EvalPlus's oracle for Mbpp/581 (the height is the pyramid's perpendicular height)."""
    slant_height = math.sqrt((base_edge / 2) ** 2 + height**2)
    return round(base_edge**2 + 4 * (base_edge * slant_height) / 2)


def _digit_distance(num1: int, num2: int) -> int:
    """EvalPlus's oracle for Mbpp/558 (the shorter number is padded with zeros)."""
    a, b = str(num1), str(num2)
    width = max(len(a), len(b))
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(width), b.zfill(width)))


def _close(got: Any, want: Any, atol: float, rtol: float, depth: int = 0) -> bool:
    if depth > 200:
        return False
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return got == want or abs(got - want) <= atol or abs(got - want) <= rtol * abs(want)
    if type(got) is not type(want):
        return bool(got == want)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(_close(g, w, atol, rtol, depth + 1) for g, w in zip(got, want))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(_close(got[k], want[k], atol, rtol, depth + 1) for k in want)
    return bool(got == want)


@dataclass
class ResultJudge:
    """Compares functional results for one submission. Stateful only where EvalPlus is: the
    tolerance a float expectation switches on holds for the rest of its input group."""

    comparison: Comparison = field(default_factory=Comparison)
    group_atol: dict[Any, float] = field(default_factory=dict)

    def check(self, test: dict[str, Any], got_blob: bytes) -> tuple[bool, str]:
        """(passed, detail). Anything the program's value makes go wrong is a failure. The
        expectation is ``test["expected"]`` (bytes) or, for large values, a blob-store digest."""
        rule = self.comparison.rule or test.get("rule") or "python"
        oracle = self.comparison.oracle
        want_blob = test.get("expected")
        if oracle == "exact" and test.get("plain"):
            if want_blob is not None:
                same = got_blob == want_blob
            else:
                same = len(got_blob) == test["expected_size"] and blobs.digest(got_blob) == test["expected_digest"]
            if same:
                if rule == "evalplus":
                    self._sticky_atol(test, want_blob, None)
                return True, ""
        if want_blob is None:
            want_blob = test["expected"] = blobs.load(test["expected_digest"])
        reader = Decoder(sys.maxsize)
        want = reader.decode(want_blob)
        try:
            # As many elements as twice the expected value's, at least MAX_ITEMS: a correct
            # answer of another encoding (floats for ints) is read, a flood is not.
            got_reader = Decoder(max(MAX_ITEMS, 2 * reader.items))
            got = got_reader.decode(got_blob)
        except MalformedValue as exc:
            return False, f"unreadable return value ({exc})"
        if (got_reader.arrays or reader.arrays) and broadcast_blowup(got, want):
            return False, "the returned array's shape does not match the expected value"
        try:
            if rule == "evalplus":
                ok = self._evalplus(test, got, want)
            elif oracle != "exact":
                ok = self._oracle(test, got, want, self.comparison.atol or EVALPLUS_FLOAT_ATOL)
            elif rule == "livecodebench":
                ok = bool((list(got) if isinstance(got, tuple) else got) == want)
            elif rule == "close":
                ok = _close(got, want, self.comparison.atol, self.comparison.rtol)
            else:
                ok = bool(got == want)
        except BaseException as exc:  # the program's value broke the comparison: its failure
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return False, f"comparison failed on the returned value ({type(exc).__name__})"
        return (True, "") if ok else (False, f"expected {_short(want)}, got {_short(got)}")

    def _sticky_atol(self, test: dict[str, Any], want_blob: bytes | None, want: Any) -> float:
        group = test.get("group")
        atol = self.group_atol.get(group, self.comparison.atol)
        if atol == 0:
            floats = (
                test["floats"]
                if "floats" in test
                else shallow_is_floats(want_blob if want_blob is not None else blobs.load(test["expected_digest"]))
            )
            if floats is None:
                floats = is_floats(decode(want_blob, None) if want is None else want)
            if floats:
                atol = EVALPLUS_FLOAT_ATOL
        self.group_atol[group] = atol
        return atol

    def _oracle(self, test: dict[str, Any], got: Any, want: Any, atol: float) -> bool:
        """The oracles that stand alone: ``find_zero`` (a root of the polynomial given as the
        first argument), ``set`` (equal as sets), ``not_none`` (the reference returned a value
        exactly when the program does; a bool answer is compared as a bool)."""
        oracle = self.comparison.oracle
        if oracle == "find_zero":
            return abs(_poly(*self._args(test), got)) <= atol
        if oracle == "set":
            return safe_set(got) == safe_set(want)
        return got == want if isinstance(got, bool) else want == (got is not None)

    def _evalplus(self, test: dict[str, Any], out: Any, exp: Any) -> bool:
        oracle = self.comparison.oracle
        if oracle == "find_zero":  # deliberate: EvalPlus 0.3.1 never records this pass
            return bool(self._oracle(test, out, exp, self.comparison.atol))
        exact_match = out == exp
        if oracle == "any_value":
            exact_match = True
        elif oracle == "sum_div":
            exact_match = exact_match or out == 0
        elif oracle == "surface_area":
            exact_match = exact_match or abs(out - _surface_area(*self._args(test))) <= self.group_atol.get(
                test.get("group"), self.comparison.atol
            )
        elif oracle == "digit_distance":
            exact_match = exact_match or out == _digit_distance(*self._args(test))
        elif oracle in ("set", "not_none"):
            exact_match = self._oracle(test, out, exp, 0.0)
        atol = self._sticky_atol(test, test["expected"], exp)
        if not exact_match and atol != 0:
            import numpy as np

            if type(out) is not type(exp):
                return False
            if isinstance(exp, (list, tuple)) and len(out) != len(exp):
                return False
            return bool(np.allclose(out, exp, rtol=EVALPLUS_RTOL, atol=atol))
        return bool(exact_match)

    @staticmethod
    def _args(test: dict[str, Any]) -> list[Any]:
        args, _ = decode(test["args"], None)
        return list(args)


def _short(value: Any) -> str:
    if isinstance(value, Opaque):
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<int of {value.bit_length()} bits>"
    try:
        text = (
            repr(value)
            if not isinstance(value, (list, tuple, dict, set)) or len(value) < 64
            else f"<{type(value).__name__} of {len(value)}>"
        )
    except Exception:
        text = f"<{type(value).__name__}>"
    return text[:80]


def describe_value(blob: bytes) -> dict[str, Any]:
    """An expected value as tests carry it: ``result`` (base64) inline when small, else the bytes
    go to the blob store; with ``digest``, ``size``, ``plain`` (equal to itself by its bytes) and
    ``floats`` (EvalPlus's ``is_floats``), so comparisons need not decode it to know these."""
    floats = shallow_is_floats(blob)
    if floats is None:
        floats = is_floats(decode(blob, None))
    out = {
        "digest": blobs.digest(blob),
        "size": len(blob),
        "plain": plain_encoded(blob),
        "floats": bool(floats),
        "result": None,
    }
    if len(blob) > blobs.INLINE_MAX:
        blobs.store(blob)
    else:
        out["result"] = base64.b64encode(blob).decode()
    return out
