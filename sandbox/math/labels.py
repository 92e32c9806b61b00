"""Labels, ratios and written-out numbers: how a gold names or relates its value.

Golds often say what the value is of: ``(p,q)=(3,2)``, ``|AB|=1``, ``f(x)=1``, ``A:B=1``,
``\\frac{NO}{BO}=\\frac{1}{\\sqrt6}``, ``AB=4, CD=5``. The left side of such an equation is a
*label*: a name or a thing built only from names (a tuple of names, ``|AB|``, ``f(x)``, a ratio
or quotient of names). A labelled value matches the bare value and the same label with an equal
value; an equation whose left side is not a label (``7 = 11a+c``, ``x^2 = 4``, ``2x = 6``) is a
relation, never equal to one of its sides.

A ratio of numbers (``7:32``) is an ordered list of parts. Clock times look the same
(``12:00``), so a ratio whose later parts are written as two digits below 60 matches only the
same parts; other ratios also match proportional ratios (``2:4`` = ``1:2``) and their quotient.

All checks are regular expressions on short strings (no nested quantifiers), so they run in
linear time in the caller's process.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.sandbox.math.latex_scan import split_top_level

_SUB = r"(?:_\{[A-Za-z0-9,\\]+\}|_[A-Za-z0-9])?'*"
_ATOM = r"(?:[A-Za-z]+|\\[a-zA-Z]+)" + _SUB
_DECORATED = (
    r"(?:(?:m\s*)?\\(?:angle|measuredangle|triangle|overline|overrightarrow|vec|hat|widehat|bar|tilde)\s*"
    r"(?:\{\s*" + _ATOM + r"\s*\}|" + _ATOM + r")|" + _ATOM + r")"
)
_ARG = r"(?:" + _DECORATED + r"|-?\d+(?:\.\d+)?)"
_FUNCTION = r"[A-Za-z]" + _SUB + r"(?:\^\{-1\})?\s*\(\s*" + _ARG + r"(?:\s*,\s*" + _ARG + r")*\s*\)"
_NAMED = r"(?:" + _FUNCTION + r"|" + _DECORATED + r")"
_LABEL_RE = re.compile(
    r"(?:" + _NAMED + r"|\(\s*" + _NAMED + r"(?:\s*,\s*" + _NAMED + r")+\s*\)"
    r"|\|\s*" + _NAMED + r"\s*\||\\\|\s*" + _NAMED + r"\s*\\\|"
    r"|" + _NAMED + r"(?:\s*:\s*" + _NAMED + r")+"
    r"|\\frac\{\s*" + _NAMED + r"\s*\}\{\s*" + _NAMED + r"\s*\}|" + _NAMED + r"\s*/\s*" + _NAMED + r")"
)
_NAMED_RE = re.compile(_NAMED)
#: function names that make ``\sin(x) = ...`` an equation to solve, not a label
_FUNCTION_WORDS = frozenset(
    r"\sin \cos \tan \cot \sec \csc \log \ln \exp \sqrt \arcsin \arccos \arctan \lim \sum \int".split()
)
_COMMAND_RE = re.compile(r"\\[a-zA-Z]+")
_LETTER_RE = re.compile(r"[A-Za-z]")
_TUPLE_LABEL_RE = re.compile(r"^\((.*)\)$")
_CLOCK_TAIL_RE = re.compile(r"^[0-5]\d$")
_SPACED_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
_MIXED_RE = re.compile(r"^(-?)(\d+) (\d+)/(\d+)$")
_BRACKET_OR_RE = re.compile(r"(?<=[)\]])\s*(?:or|and)\s*(?=[(\[])")


def is_label(text: str) -> bool:
    """Is ``text`` a label: built only from names (see the module docstring)?"""
    s = text.strip()
    if not s or len(s) > 200 or not _LABEL_RE.fullmatch(s):
        return False
    return not any(cmd in _FUNCTION_WORDS for cmd in _COMMAND_RE.findall(s))


def is_named_value(text: str) -> bool:
    """A name or a function value (``x``, ``f(x)``), not an expression of one (``|z|``):
    bounds on it describe its own range, ``0 < f(x) < 1`` is ``f(x)`` in ``(0, 1)``."""
    s = text.strip()
    return bool(len(s) <= 200 and _NAMED_RE.fullmatch(s)) and is_label(s)


def canonical_label(text: str) -> str:
    """The label as compared: spaces and grouping braces removed (``V_{1}`` = ``V_1``)."""
    return re.sub(r"\s+|[{}]", "", text)


def tuple_label_names(label: str) -> list[str] | None:
    """``(p,q)`` -> ``["p", "q"]``; None for a label that is not a tuple of names."""
    m = _TUPLE_LABEL_RE.match(canonical_label(label))
    if not m:
        return None
    names = split_top_level(m.group(1), (",",))
    return names if len(names) > 1 else None


def has_free_letter(text: str) -> bool:
    """A letter outside a LaTeX command: a variable (``11a+c``), so not worked arithmetic."""
    return bool(_LETTER_RE.search(_COMMAND_RE.sub("", text)))


def ratio_parts(text: str) -> list[str] | None:
    """``7:32`` -> ``["7", "32"]``: two or more parts with no free letter; else None."""
    if ":" not in text or "=" in text:
        return None
    parts = split_top_level(text, (":",))
    if len(parts) < 2 or any(not p or has_free_letter(p) or re.search(r"[<>]|\\[lg]e\b", p) for p in parts):
        return None
    return parts


def clock_like(parts: list[str]) -> bool:
    """``12:00``, ``1:05:30``: every part after the first is two digits below 60."""
    return len(parts) <= 3 and parts[0].isdigit() and all(_CLOCK_TAIL_RE.match(p) for p in parts[1:])


def proportional(a: list[Fraction], b: list[Fraction]) -> bool:
    """Same ratio: ``a = k b`` for some k > 0 (all parts non-zero)."""
    if len(a) != len(b) or not all(a) or not all(b):
        return False
    k = a[0] / b[0]
    return k > 0 and all(x == k * y for x, y in zip(a, b))


def written_number(text: str) -> str | None:
    """A number written with spaces: ``1 000`` -> ``1000``, ``3128 1/2`` -> ``\\frac{6257}{2}``."""
    if _SPACED_THOUSANDS_RE.match(text):
        return text.replace(" ", "")
    m = _MIXED_RE.match(text)
    if m and len(text) <= 60:
        sign, whole, num, den = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
        if 0 < num < den:
            value = whole * den + num
            return f"{sign}\\frac{{{value}}}{{{den}}}"
    return None


def split_bracket_alternatives(text: str) -> str:
    """``(11,7)or(7,11)`` -> ``(11,7), (7,11)``: alternatives written without spaces."""
    return _BRACKET_OR_RE.sub(", ", text) if "or" in text or "and" in text else text
