"""String normalisation of an extracted answer, before any parsing.

Everything here is plain string work that runs in linear time on the (length-capped) answer,
so it is safe to run in the caller's process. It removes what MATH conventions treat as
formatting (delimiters, spacing macros, ``\\text`` units, ``\\$``, degree signs, thousands
separators) and records what carries meaning (a percent sign, a degree sign) as flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.sandbox.math.latex_scan import find_group, strip_outer_braces

MAX_ANSWER_CHARS = 20_000

_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2010": "-",
    "\u2011": "-",
    "\ufe63": "-",
    "\uff0d": "-",
    "\u00d7": r"\times ",
    "\u00f7": r"\div ",
    "\u00b7": r"\cdot ",
    "\u22c5": r"\cdot ",
    "\u2264": r"\le ",
    "\u2265": r"\ge ",
    "\u2260": r"\ne ",
    "\u2a7d": r"\le ",
    "\u2a7e": r"\ge ",
    "\u03c0": r"\pi ",
    "\u221a": r"\sqrt",
    "\u221e": r"\infty ",
    "\u00b0": r"^\circ ",
    "\u222a": r"\cup ",
    "\u2229": r"\cap ",
    "\u2205": r"\emptyset ",
    "\u211d": r"\mathbb{R}",
    "\u00b2": "^2",
    "\u00b3": "^3",
    "\u00b9": "^1",
    "\u00bd": r"\frac{1}{2}",
    "\u00bc": r"\frac{1}{4}",
    "\u00be": r"\frac{3}{4}",
    "\u2153": r"\frac{1}{3}",
    "\u2154": r"\frac{2}{3}",
    "\u2208": r"\in ",
    "\u00b1": r"\pm ",
    "\u2213": r"\mp ",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u2002": " ",
    "\u2003": " ",
    "\u200b": "",
    "\u2044": "/",
    "\uff0c": ",",
    "\u3002": ".",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))

_TEXT_MACROS = (
    "text",
    "textbf",
    "textit",
    "textrm",
    "textup",
    "mathrm",
    "mathbf",
    "mathit",
    "mbox",
    "textnormal",
    "texttt",
    "boldsymbol",
    "bm",
)
_TEXT_MACRO_RE = re.compile(r"\\(" + "|".join(_TEXT_MACROS) + r")\s*(?=\{)")

UNIT_WORDS = frozenset(
    """
    unit units sq square squared cubic cube cm mm km m meter meters metre metres centimeter centimeters
    millimeter millimeters kilometer kilometers inch inches in ft foot feet yard yards yd mile miles mi
    mph kph kmh hour hours hr hrs h minute minutes min mins second seconds sec secs s day days week weeks
    month months year years yr yrs gram grams g kg kilogram kilograms mg pound pounds lb lbs ounce ounces oz
    ton tons liter liters litre litres l ml milliliter milliliters gallon gallons gal quart quarts pint pints
    cup cups dollar dollars cent cents usd euro euros rupee rupees yen degree degrees deg rad radian radians
    percent pct percentage points point pts people persons students apples cookies marbles times
    """.split()
)
_ROW_BREAK = "\x00ROW\x00"


@dataclass(frozen=True)
class Normalized:
    text: str
    percent: bool = False
    degrees: bool = False


def _replace_unicode(s: str) -> str:
    return _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], s)


def _unwrap_text_macros(s: str) -> str:
    """Replace ``\\text{...}``-like wrappers by their content; drop pure unit words."""
    out = []
    pos = 0
    for _ in range(10_000):
        m = _TEXT_MACRO_RE.search(s, pos)
        if not m:
            break
        group = find_group(s, m.end())
        if group is None:
            break
        start, end = group
        content = s[start + 1 : end - 1]
        out.append(s[pos : m.start()])
        words = content.replace("^", " ").replace("/", " ").split()
        units = [w for w in words if w.strip(".,").lower() in UNIT_WORDS]
        if units and all(w in units or re.fullmatch(r"[-\d.,]+", w) for w in words):
            kept = " ".join(w for w in words if w not in units)
            out.append(f" {kept} " if kept else " ")
            exponent = re.match(r"\s*\^\s*(?:\{\s*\d\s*\}|\d)", s[end:])
            if exponent:
                end += exponent.end()
        else:
            out.append(" " + content + " " if " " in content.strip() else content)
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _strip_trailing_unit_words(s: str) -> str:
    """``15 cm^2`` -> ``15``, ``42 apples`` -> ``42``: words after a trailing number-ish term."""
    stripped = s.rstrip()
    for _ in range(8):
        m = re.search(r"(?:\s|(?<=\d))([A-Za-z]+\.?)(\^\{?\d\}?)?\s*$", stripped)
        if not m:
            break
        word = m.group(1).rstrip(".").lower()
        head = stripped[: m.start()].rstrip()
        if word not in UNIT_WORDS or not head or not re.search(r"[\d}]$", head):
            break
        if word in {"s", "h", "g", "l", "m", "in", "min", "mi", "yd", "rad"} and not re.search(r"\d$", head):
            break
        stripped = head
    return stripped


def _fix_shorthand(s: str) -> str:
    r"""Repair common malformed LaTeX: \frac12, \sqrt3, \sqrt(2), a**b, np.sqrt."""
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\1_FRACFIX_\2", s)
    s = re.sub(r"(\{[^{}]*\})_FRACFIX_(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+|[a-zA-Z])(?![a-zA-Z])", r"\\sqrt{\1}", s)
    s = re.sub(r"\\sqrt\s*\(([^()]*)\)", r"\\sqrt{\1}", s)
    s = s.replace("**", "^")
    s = re.sub(r"\b(?:np|math|sympy|sp)\.(pi)\b", r"\\pi", s)
    s = re.sub(r"\b(?:np|math|sympy|sp)\.(arcsin|arccos|arctan|sin|cos|tan|exp|log|sqrt)\b", r"\\\1", s)
    return s


_PLAIN_RE = re.compile(r"-?\d+(?:\.\d+)?|-?\d+/\d+|[A-Za-z]")
_DISPLAY_RE = re.compile(r"\\[()\[\]]|\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)\b")
_SIZING_RE = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big|bigg|Bigg)(?![a-zA-Z])\s*\.?"
)
#: ``-2 \\\\le x \\\\le 7``: every command's backslash doubled by string escaping (outside a matrix,
#: with no command written with one backslash), read as ``-2 \\le x \\le 7``
_ESCAPED_COMMAND_RE = re.compile(r"\\\\(?=[a-zA-Z])")
_SINGLE_COMMAND_RE = re.compile(r"(?<!\\)\\[a-zA-Z]")
#: a lone backslash ending the answer (``185\\``) escapes nothing
_STRAY_BACKSLASH_RE = re.compile(r"(?<!\\)\\\s*$")
_BRACED_COMMA_RE = re.compile(r"(\d)\s*\{\s*,\s*\}\s*(\d)")
#: ``11,\! 111`` (a space after the separator) is one number, as ``11,\!111`` is
_BANG_THOUSANDS_RE = re.compile(r"(\d),\\!\s*(?=\d{3}(?!\d))")
_THIN_THOUSANDS_RE = re.compile(r"(\d)\\[,;:]\s*(?=\d{3}\b)")
_SPACING_RE = re.compile(r"\\(?:[,;:>]|quad|qquad)|\\ |~|\\hspace\*?\{[^{}]*\}")
_MACRO_RULES = [
    (re.compile(r"\\[dt]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![a-zA-Z])"), r"\\binom"),
    (re.compile(r"\\(?:leqslant|leq)(?![a-zA-Z])"), r"\\le"),
    (re.compile(r"\\(?:geqslant|geq)(?![a-zA-Z])"), r"\\ge"),
    (re.compile(r"\\neq(?![a-zA-Z])"), r"\\ne"),
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
    (re.compile(r"\\(?:varnothing|emptyset|empty)(?![a-zA-Z])"), r"\\emptyset "),
]
_ASCII_RELATION_RULES = [(re.compile(r"<=|=<"), r"\\le "), (re.compile(r">=|=>"), r"\\ge ")]
_DEGREE_RE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree(?![a-zA-Z])")
_PERCENT_RE = re.compile(r"\\%|%|\\percent(?![a-zA-Z])")
_SPACES_RE = re.compile(r"\s+")
_TRAILING_BANG_RE = re.compile(r"(?<=[A-Za-z\s])!+$")
_TRAILING_WORD_RE = re.compile(r"\s*(?:\\text\s*)?(?:degrees?|percent|pct)$", re.IGNORECASE)
_PERCENT_WORD_RE = re.compile(r"\b(?:percent|pct)\b", re.IGNORECASE)
_DEGREE_WORD_RE = re.compile(r"\bdegrees?\b", re.IGNORECASE)


def normalize_answer(answer: str) -> Normalized:
    """Normalise an extracted answer string; see the module docstring for what is removed."""
    stripped = answer.strip()
    if _PLAIN_RE.fullmatch(stripped):
        return Normalized(stripped)
    s = _replace_unicode(answer[:MAX_ANSWER_CHARS])
    s = s.replace(r"\$", " ").replace("$", " ")
    if "\\" in s:
        if "\\begin" not in s and not _SINGLE_COMMAND_RE.search(s):
            s = _ESCAPED_COMMAND_RE.sub(r"\\", s)
        s = _STRAY_BACKSLASH_RE.sub("", s)
        s = _DISPLAY_RE.sub(" ", s)
        s = _SIZING_RE.sub("", s)
        s = _BANG_THOUSANDS_RE.sub(r"\1,", s)
        s = s.replace("\\\\", _ROW_BREAK).replace("\\!", "")
        s = _THIN_THOUSANDS_RE.sub(r"\1", s)
        s = _SPACING_RE.sub(" ", s)
        for pattern, repl in _MACRO_RULES:
            s = pattern.sub(repl, s)
        s = s.replace(r"\{\}", r"\emptyset ")
    s = _BRACED_COMMA_RE.sub(r"\1\2", s)
    for pattern, repl in _ASCII_RELATION_RULES:
        s = pattern.sub(repl, s)
    s, n = _DEGREE_RE.subn(" ", s)
    degrees = n > 0 or bool(_DEGREE_WORD_RE.search(answer))
    s, n = _PERCENT_RE.subn(" ", s)
    percent = n > 0 or bool(_PERCENT_WORD_RE.search(answer))
    s = _unwrap_text_macros(s)
    s = _fix_shorthand(s)
    s = _SPACES_RE.sub(" ", s).strip()
    for _ in range(4):
        before = s
        s = _TRAILING_BANG_RE.sub("", s.rstrip(" .,;:?"))
        if s:
            s = _TRAILING_WORD_RE.sub("", s)
        s = _strip_trailing_unit_words(s)
        if s.endswith(r"\\"):
            s = s[:-2]
        if s == before:
            break
    s = s.replace(_ROW_BREAK, "\\\\")
    s = strip_outer_braces(s.strip())
    return Normalized(_SPACES_RE.sub(" ", s).strip(), percent=percent, degrees=degrees)
