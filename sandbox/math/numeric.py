"""Exact arithmetic on plain numeric answers: the fast path that never touches sympy.

Most benchmark answers are integers, fractions or decimals. This recursive-descent evaluator
reads them (``\\frac``, ``+ - * /``, ``^`` with integer exponents, parentheses, scientific
notation, mixed numbers) into exact ``Fraction`` values with hard size limits, so it is safe and
fast in the caller's process. Anything else raises ``NotNumeric`` and goes to the symbolic
path in a worker; values too large to compute raise ``TooLarge``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

MAX_DIGITS = 4000
MAX_RESULT_BITS = 40_000
MAX_TOKENS = 20_000

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<cmd>\\[a-zA-Z]+)|(?P<op>[-+*/^(){}\[\]]))"
)
_MUL_CMDS = {r"\cdot": "*", r"\times": "*", r"\div": "/"}


class NotNumeric(ValueError):
    """The string is not a plain arithmetic expression."""


class TooLarge(ValueError):
    """The value would exceed the size limits (power towers, giant literals)."""


@dataclass(frozen=True)
class Num:
    """An exact value; ``decimal`` when written with a decimal point or exponent."""

    value: Fraction
    decimal: bool = False
    literal: str | None = None


def _tokenize(s: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    n = len(s)
    while pos < n:
        m = _TOKEN_RE.match(s, pos)
        if m is None or m.end() == pos:
            if s[pos:].strip() == "":
                break
            raise NotNumeric(s)
        pos = m.end()
        if m.group("num") is not None:
            text = m.group("num")
            if len(text) > MAX_DIGITS:
                raise TooLarge("literal too long")
            tokens.append(("num", text))
        elif m.group("cmd") is not None:
            cmd = m.group("cmd")
            if cmd in _MUL_CMDS:
                tokens.append(("op", _MUL_CMDS[cmd]))
            elif cmd == r"\frac":
                tokens.append(("frac", cmd))
            else:
                raise NotNumeric(cmd)
        else:
            tokens.append(("op", m.group("op")))
        if len(tokens) > MAX_TOKENS:
            raise TooLarge("expression too long")
    return tokens


def _bits(value: Fraction) -> int:
    return value.numerator.bit_length() + value.denominator.bit_length()


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise NotNumeric("non-integer exponent")
    e = exponent.numerator
    if base in (0, 1) or (base == -1):
        if base == 0 and e < 0:
            raise NotNumeric("division by zero")
        return base**e if base != -1 else Fraction((-1) ** (e % 2))
    if abs(e) > MAX_RESULT_BITS or _bits(base) * abs(e) > MAX_RESULT_BITS:
        raise TooLarge("power too large")
    return base**e


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.i = 0
        self.decimal = False

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str, text: str | None = None) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind or (text is not None and tok[1] != text):
            raise NotNumeric(f"expected {text or kind}")
        self.i += 1
        return tok[1]

    def expr(self) -> Fraction:
        value = self.term()
        while (tok := self.peek()) in (("op", "+"), ("op", "-")):
            self.i += 1
            rhs = self.term()
            value = value + rhs if tok[1] == "+" else value - rhs
            if _bits(value) > MAX_RESULT_BITS:
                raise TooLarge("sum too large")
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in "*/":
            self.i += 1
            rhs = self.unary()
            if tok[1] == "*":
                value = value * rhs
            else:
                if rhs == 0:
                    raise NotNumeric("division by zero")
                value = value / rhs
            if _bits(value) > MAX_RESULT_BITS:
                raise TooLarge("product too large")
        return value

    def unary(self) -> Fraction:
        tok = self.peek()
        if tok == ("op", "-"):
            self.i += 1
            return -self.unary()
        if tok == ("op", "+"):
            self.i += 1
            return self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.i += 1
            exponent = self.unary_exponent()
            return _power(base, exponent)
        return base

    def unary_exponent(self) -> Fraction:
        tok = self.peek()
        if tok == ("op", "-"):
            self.i += 1
            return -self.unary_exponent()
        if tok is not None and tok[0] == "num" and "." not in tok[1] and "e" not in tok[1].lower():
            self.i += 1
            digits = tok[1]
            if len(digits) > 1:
                # LaTeX reads 2^10 as 2^1 followed by 0: refuse the ambiguity.
                raise NotNumeric("ambiguous unbraced exponent")
            return Fraction(int(digits))
        return self.power()

    def group(self) -> Fraction:
        self.take("op", "{")
        value = self.expr()
        self.take("op", "}")
        return value

    def atom(self) -> Fraction:
        tok = self.peek()
        if tok is None:
            raise NotNumeric("unexpected end")
        kind, text = tok
        if kind == "num":
            self.i += 1
            if "." in text or "e" in text or "E" in text:
                self.decimal = True
            value = Fraction(text)
            nxt = self.peek()
            if nxt is not None and nxt[0] == "frac" and "." not in text and "e" not in text.lower():
                return value + self.mixed_fraction(value)
            return value
        if kind == "frac":
            self.i += 1
            num = self.group()
            den = self.group()
            if den == 0:
                raise NotNumeric("division by zero")
            return num / den
        if tok == ("op", "("):
            self.i += 1
            value = self.expr()
            self.take("op", ")")
            return value
        if tok == ("op", "{"):
            return self.group()
        raise NotNumeric(f"unexpected {text}")

    def mixed_fraction(self, whole: Fraction) -> Fraction:
        """``2\\frac{1}{4}`` is 2 + 1/4 (a mixed number), never 2 * 1/4."""
        start = self.i
        self.i += 1
        num = self.group()
        den = self.group()
        if num.denominator != 1 or den.denominator != 1 or not 0 < num < den:
            self.i = start
            raise NotNumeric("juxtaposed fraction is not a mixed number")
        frac = num / den
        return frac if whole >= 0 else -frac


def parse_number(text: str) -> Num:
    """Evaluate a plain numeric answer exactly; raise NotNumeric or TooLarge otherwise."""
    tokens = _tokenize(text)
    if not tokens:
        raise NotNumeric("empty")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.i != len(tokens):
        raise NotNumeric("trailing tokens")
    literal = tokens[0][1] if len(tokens) == 1 and tokens[0][0] == "num" else None
    if literal is None and len(tokens) == 2 and tokens[0] == ("op", "-") and tokens[1][0] == "num":
        literal = tokens[1][1]
    return Num(value, parser.decimal, literal)


def significant_figures(literal: str) -> int:
    """Significant figures of a decimal literal such as ``4.50e3`` (3) or ``0.0030`` (2)."""
    mantissa = re.split(r"[eE]", literal)[0].lstrip("+-")
    digits = mantissa.replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0") or digits
    return max(len(digits), 1)


def round_sig(value: Fraction, figures: int) -> Fraction:
    """Round an exact value to ``figures`` significant figures (half away from zero)."""
    if value == 0:
        return value
    sign = -1 if value < 0 else 1
    v = abs(value)
    exponent = len(str(v.numerator // v.denominator)) if v >= 1 else 0
    if v < 1:
        exponent = 0
        probe = v
        while probe < Fraction(1, 10):
            probe *= 10
            exponent -= 1
    scale = Fraction(10) ** (figures - exponent)
    scaled = v * scale
    rounded = int(scaled) + (1 if scaled - int(scaled) >= Fraction(1, 2) else 0)
    return sign * Fraction(rounded) / scale
