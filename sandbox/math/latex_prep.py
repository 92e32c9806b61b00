"""Rewrite an answer's LaTeX where the grammar would misread it, before sympy parses it.

Pure string work on one leaf: exact decimals, ``_{\\max}`` subscripts, ``E_1`` (E is a token),
primes (dropped by the grammar).
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.sandbox.math.structure import Unparseable

_DECIMAL_RE = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?:[eE]([-+]?\d+))?|(?<![\d.])(\d+)[eE]([-+]?\d+)(?![\d.])")


def _exact_decimals(text: str) -> str:
    """Rewrite decimal and e-notation literals as exact fractions before parsing."""

    def repl(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            whole, frac, exp = m.group(1) or "0", m.group(2), m.group(3)
            value = Fraction(f"{whole}.{frac}" + (f"e{exp}" if exp else ""))
        else:
            value = Fraction(f"{m.group(4)}e{m.group(5)}")
        if value.denominator == 1:
            return f"({value.numerator})"
        return f"(\\frac{{{value.numerator}}}{{{value.denominator}}})"

    return _DECIMAL_RE.sub(repl, text)


_PRIMED_RE = re.compile(r"(\\[a-zA-Z]+|[A-Za-z])(?:_\{([^{}]*)\}|_([A-Za-z0-9]))?('+)")


def _primed(m: re.Match[str]) -> str:
    sub = m.group(2) if m.group(2) is not None else (m.group(3) or "")
    return m.group(1) + "_{" + sub + "\\prime" * len(m.group(4)) + "}"


def prepare_latex(text: str) -> str:
    """Work around grammar gaps: exact decimals, ``_{\\max}`` subscripts, ``E_1`` (E is a token),
    primes (the grammar drops them, so ``x'`` would be ``x``: a primed name becomes a symbol of
    its own, and a prime anywhere else cannot be read)."""
    if "'" in text:
        text = _PRIMED_RE.sub(_primed, text)
        if "'" in text:
            raise Unparseable("a prime on something other than a name")
    text = _exact_decimals(text)
    text = re.sub(r"_\{\s*\\([a-zA-Z]+)\s*\}", r"_{\1}", text)
    text = re.sub(r"\\(gamma|Gamma)(?![a-zA-Z(])", r"\\Xi_{\1}", text)
    return re.sub(r"(?<![\\A-Za-z])E_", r"\\mho_", text)
