"""String normalisation of an extracted answer, before any parsing.

Everything here is plain string work that runs in linear time on the (length-capped) answer,
so it is safe to run in the caller's process. It removes what MATH conventions treat as
formatting (delimiters, spacing macros, ``\\text`` units, ``\\$``, degree signs, thousands
separators) and records what carries meaning (a percent sign, a degree sign) as flags.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sandbox.math.latex_scan import find_group, strip_outer_braces

MAX_ANSWER_CHARS = 20_000

_UNICODE = {
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u2010": "-", "\u2011": "-", "\ufe63": "-", "\uff0d": "-",
    "\u00d7": r"\times ", "\u00f7": r"\div ", "\u00b7": r"\cdot ", "\u22c5": r"\cdot ",
    "\u2264": r"\le ", "\u2265": r"\ge ", "\u2260": r"\ne ", "\u2a7d": r"\le ", "\u2a7e": r"\ge ",
    "\u03c0": r"\pi ", "\u221a": r"\sqrt", "\u221e": r"\infty ", "\u00b0": r"^\circ ",
    "\u222a": r"\cup ", "\u2229": r"\cap ", "\u2205": r"\emptyset ", "\u211d": r"\mathbb{R}",
    "\u00b2": "^2", "\u00b3": "^3", "\u00b9": "^1", "\u00bd": r"\frac{1}{2}", "\u00bc": r"\frac{1}{4}",
    "\u00be": r"\frac{3}{4}", "\u2153": r"\frac{1}{3}", "\u2154": r"\frac{2}{3}", "\u2208": r"\in ",
    "\u00b1": r"\pm ", "\u2213": r"\mp ", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2002": " ",
    "\u2003": " ", "\u200b": "", "\u2044": "/", "\uff0c": ",", "\u3002": ".",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))

_TEXT_MACROS = ("text", "textbf", "textit", "textrm", "textup", "mathrm", "mathbf", "mathit", "mbox", "textnormal", "texttt", "boldsymbol", "bm")
_TEXT_MACRO_RE = re.compile(r"\\(" + "|".join(_TEXT_MACROS) + r")\s*(?=\{)")

UNIT_WORDS = frozenset(
    """
    unit units sq square squared cubic cube cm mm km m meter meters metre metres centimeter centimeters
    millimeter millimeters kilometer kilometers inch inches in ft foot feet yard yards yd mile miles mi
    mph kph kmh hour hours hr hrs h minute minutes min mins second seconds sec secs s day days week weeks
    month months year years yr yrs gram grams g kg kilogram kilograms mg pound pounds lb lbs ounce ounces oz
    ton tons liter liters litre litres l ml milliliter milliliters gallon gallons gal quart quarts pint pints
    cup cups dollar dollars cent cents usd euro euros rupee rupees yen degree degrees deg rad radian radians
    percent percentage points point pts people persons students apples cookies marbles times
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


def normalize_answer(answer: str) -> Normalized:
    """Normalise an extracted answer string; see the module docstring for what is removed."""
    s = answer[:MAX_ANSWER_CHARS]
    s = _replace_unicode(s)
    s = s.replace(r"\$", " ").replace("$", " ")
    s = re.sub(r"\\[()\[\]]", " ", s)
    s = re.sub(r"\\(displaystyle|textstyle|scriptstyle|limits|nolimits)\b", " ", s)
    s = re.sub(r"\\(left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big|bigg|Bigg)(?![a-zA-Z])\s*\.?", "", s)
    s = re.sub(r"(\d)\s*\{,\}\s*(\d)", r"\1\2", s)
    s = s.replace("\\\\", _ROW_BREAK)
    s = s.replace("\\!", "")
    s = re.sub(r"(\d)\\[,;:]\s*(?=\d{3}\b)", r"\1", s)
    s = re.sub(r"\\(?:[,;:>]|quad|qquad)|\\ |~", " ", s)
    s = re.sub(r"\\hspace\*?\{[^{}]*\}", " ", s)
    s = re.sub(r"\\[dt]frac(?![a-zA-Z])", r"\\frac", s)
    s = re.sub(r"\\[dt]binom(?![a-zA-Z])", r"\\binom", s)
    s = re.sub(r"\\(leqslant|leq)(?![a-zA-Z])", r"\\le", s)
    s = re.sub(r"\\(geqslant|geq)(?![a-zA-Z])", r"\\ge", s)
    s = re.sub(r"\\(neq)(?![a-zA-Z])", r"\\ne", s)
    s = re.sub(r"\\lt(?![a-zA-Z])", "<", s)
    s = re.sub(r"\\gt(?![a-zA-Z])", ">", s)
    s = re.sub(r"<=|=<", r"\\le ", s)
    s = re.sub(r">=|=>", r"\\ge ", s)
    s = re.sub(r"\\(varnothing|emptyset|empty)(?![a-zA-Z])", r"\\emptyset ", s)
    s = s.replace(r"\{\}", r"\emptyset ")

    degrees = False
    s, n = re.subn(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree(?![a-zA-Z])", " ", s)
    degrees |= n > 0
    percent = False
    s, n = re.subn(r"\\%|%|\\percent(?![a-zA-Z])", " ", s)
    percent |= n > 0

    s = _unwrap_text_macros(s)
    s = _fix_shorthand(s)
    s = re.sub(r"\s+", " ", s).strip()
    for _ in range(4):
        before = s
        s = s.rstrip(" .,;:?")
        s = re.sub(r"(?<=[A-Za-z\s])!+$", "", s)
        s = re.sub(r"\s*(?:\\text\s*)?(?:degrees?|percent)$", lambda m: "", s, flags=re.IGNORECASE) if s else s
        s = _strip_trailing_unit_words(s)
        if s.endswith(r"\\"):
            s = s[:-2]
        if s == before:
            break
    if re.search(r"\bpercent\b", answer, re.IGNORECASE):
        percent = True
    if re.search(r"\bdegrees?\b", answer, re.IGNORECASE):
        degrees = True
    s = s.replace(_ROW_BREAK, "\\\\")
    s = strip_outer_braces(s.strip())
    s = re.sub(r"\s+", " ", s).strip()
    return Normalized(s, percent=percent, degrees=degrees)
