"""Numeric fast *reject* for expressions: two answers whose values clearly differ are unequal.

Most wrong answers to symbolic problems are wrong by a wide margin. Evaluating both sides at
30 significant digits (mpmath) at two fixed probe points decides those without sympy; anything
this small evaluator does not understand returns None and goes to the symbolic worker.
It only ever rejects: equality is always decided exactly or symbolically.

Supported: numbers, ``\\frac``, ``\\sqrt`` / ``\\sqrt[n]``, ``^``, ``+ - * /``, ``\\cdot``,
``\\times``, implicit products, parentheses, ``\\pi``, ``e``, ``i``, single-letter and Greek
variables (with subscripts), ``\\sin`` ``\\cos`` ``\\tan`` ``\\ln`` ``\\log`` ``\\exp`` and inverses.
"""

from __future__ import annotations

import re
from typing import Callable

import mpmath

DIGITS = 30
MAX_TOKENS = 400
MAX_EXPONENT = 10_000
REJECT_REL = 1e-6
_TOKEN_RE = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|(\\[a-zA-Z]+)|([A-Za-z])|([-+*/^(){}\[\]_!,]))")
_FUNCS = {
    r"\sin": "sin",
    r"\cos": "cos",
    r"\tan": "tan",
    r"\sec": "sec",
    r"\csc": "csc",
    r"\cot": "cot",
    r"\arcsin": "asin",
    r"\arccos": "acos",
    r"\arctan": "atan",
    r"\sinh": "sinh",
    r"\cosh": "cosh",
    r"\tanh": "tanh",
    r"\ln": "ln",
    r"\log": "log",
    r"\exp": "exp",
}
_GREEK = {
    "alpha",
    "beta",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
_PROBES = ((1.37, -0.61, 2.29, 0.83, -1.71, 1.13, 0.47, -2.03), (-1.93, 1.49, 0.71, -0.57, 2.61, -1.27, 1.87, 0.39))

Value = Callable[[dict[str, mpmath.mpc]], mpmath.mpc]


class Unsupported(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            if not text[pos:].strip():
                break
            raise Unsupported(text[pos : pos + 10])
        pos = m.end()
        out.append(next(g for g in m.groups() if g is not None))
        if len(out) > MAX_TOKENS:
            raise Unsupported("too long")
    return out


class _Parser:
    def __init__(self, tokens: list[str], allow_complex: bool):
        self.t = tokens
        self.i = 0
        self.allow_complex = allow_complex
        self.variables: set[str] = set()

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise Unsupported(f"expected {expected}")
        self.i += 1
        return tok

    def expr(self) -> Value:
        terms: list[tuple[int, Value]] = []
        sign = 1
        if self.peek() in ("+", "-"):
            sign = -1 if self.take() == "-" else 1
        terms.append((sign, self.product()))
        while self.peek() in ("+", "-"):
            sign = -1 if self.take() == "-" else 1
            terms.append((sign, self.product()))
        return lambda env: mpmath.fsum(s * f(env) for s, f in terms)

    def product(self) -> Value:
        factors: list[tuple[bool, Value]] = [(False, self.signed())]
        while True:
            tok = self.peek()
            if tok in ("*", r"\cdot", r"\times"):
                self.take()
                factors.append((False, self.signed()))
            elif tok in ("/", r"\div"):
                self.take()
                factors.append((True, self.signed()))
            elif tok is not None and tok not in ("+", "-", ")", "}", "]", ",", "^", "_", "!"):
                factors.append((False, self.power()))
            else:
                break

        def value(env):
            out = mpmath.mpc(1)
            for divide, f in factors:
                v = f(env)
                out = out / v if divide else out * v
            return out

        return value

    def signed(self) -> Value:
        if self.peek() == "-":
            self.take()
            inner = self.signed()
            return lambda env: -inner(env)
        if self.peek() == "+":
            self.take()
        return self.power()

    def power(self) -> Value:
        base = self.postfix()
        if self.peek() == "^":
            self.take()
            exponent = self.exponent()

            def value(env):
                e = exponent(env)
                if abs(e) > MAX_EXPONENT:
                    raise Unsupported("exponent too large")
                return mpmath.power(base(env), e)

            return value
        return base

    def exponent(self) -> Value:
        tok = self.peek()
        if tok == "{":
            return self.group()
        if tok == "-":
            self.take()
            inner = self.exponent()
            return lambda env: -inner(env)
        if tok is not None and re.fullmatch(r"\d", tok):
            self.take()
            return lambda env, v=int(tok): mpmath.mpc(v)
        return self.atom()

    def postfix(self) -> Value:
        value = self.atom()
        while self.peek() == "!":
            self.take()
            inner = value

            def value(env, inner=inner):
                v = inner(env)
                if v.imag != 0 or v.real != int(v.real) or not 0 <= v.real <= 170:
                    raise Unsupported("factorial")
                return mpmath.mpc(mpmath.factorial(int(v.real)))

        return value

    def group(self) -> Value:
        self.take("{")
        inner = self.expr()
        self.take("}")
        return inner

    def atom(self) -> Value:
        tok = self.peek()
        if tok is None:
            raise Unsupported("end")
        if re.fullmatch(r"\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+", tok):
            self.take()
            v = mpmath.mpf(tok)
            mixed = self.mixed_fraction(tok)
            if mixed is not None:
                return lambda env: mpmath.mpc(v + mixed)
            return lambda env: mpmath.mpc(v)
        if tok in ("(", "[", "{"):
            closer = {"(": ")", "[": "]", "{": "}"}[tok]
            self.take()
            inner = self.expr()
            self.take(closer)
            return inner
        if tok == r"\frac":
            self.take()
            num, den = self.group(), self.group()
            return lambda env: num(env) / den(env)
        if tok == r"\sqrt":
            self.take()
            index: Value | None = None
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
            radicand = self.group() if self.peek() == "{" else self.atom()
            if index is None:
                return lambda env: mpmath.sqrt(radicand(env))
            return lambda env: mpmath.power(radicand(env), 1 / index(env))
        if tok == r"\pi":
            self.take()
            return lambda env: mpmath.mpc(mpmath.pi)
        if tok in _FUNCS:
            return self.function(_FUNCS[self.take()])
        if tok.startswith("\\") and tok[1:] in _GREEK:
            self.take()
            return self.variable(tok[1:])
        if re.fullmatch(r"[A-Za-z]", tok):
            self.take()
            if tok == "e" and self.peek() != "_":
                return lambda env: mpmath.mpc(mpmath.e)
            if tok == "i" and self.allow_complex and self.peek() != "_":
                return lambda env: mpmath.mpc(0, 1)
            return self.variable(tok)
        raise Unsupported(tok)

    def mixed_fraction(self, whole: str) -> mpmath.mpf | None:
        """``2\\frac{1}{4}`` is a mixed number (2 + 1/4), as the symbolic parser reads it."""
        t = self.t[self.i : self.i + 7]
        if not whole.isdigit() or len(t) < 7 or t[0] != r"\frac" or t[1] != "{" or t[3:5] != ["}", "{"] or t[6] != "}":
            return None
        if not (t[2].isdigit() and t[5].isdigit()) or not 0 < int(t[2]) < int(t[5]):
            return None
        self.i += 7
        return mpmath.mpf(int(t[2])) / int(t[5])

    def variable(self, name: str) -> Value:
        if self.peek() == "_":
            self.take()
            if self.peek() == "{":
                depth, parts = 0, []
                while True:
                    tok = self.take()
                    depth += {"{": 1, "}": -1}.get(tok, 0)
                    parts.append(tok)
                    if depth == 0:
                        break
                name += "_" + "".join(tok for tok in parts if tok not in "{}")
            else:
                name += "_" + self.take()
        self.variables.add(name)
        return lambda env: env[name]

    def function_argument(self) -> Value:
        """Like latex2sympy: ``\\sin(x)`` takes the parentheses; ``\\sin 2x`` takes the implicit
        product up to the next operator or function (``\\sin x \\cos x`` is sin(x)cos(x))."""
        if self.peek() in ("(", "{"):
            return self.atom()
        factors = [self.power()]
        while not _argument_ends(self.peek()) and self.peek() not in ("^", "_", "!"):
            factors.append(self.power())

        def value(env):
            out = mpmath.mpc(1)
            for f in factors:
                out *= f(env)
            return out

        return value

    def function(self, name: str) -> Value:
        base: Value | None = None
        if name == "log" and self.peek() == "_":
            self.take()
            base = self.group() if self.peek() == "{" else self.atom()
        power: Value | None = None
        if self.peek() == "^":
            self.take()
            power = self.exponent()
        arg = self.function_argument()
        fn = getattr(mpmath, name)

        def value(env):
            a = arg(env)
            if name == "log":  # \\log without a base is base 10, as in the symbolic parser
                v = mpmath.ln(a) / mpmath.ln(base(env) if base is not None else 10)
            else:
                v = fn(a)
            return mpmath.power(v, power(env)) if power is not None else v

        return value


def _argument_ends(tok: str | None) -> bool:
    return tok is None or tok in ("+", "-", ")", "}", "]", ",", "*", "/", r"\cdot", r"\times", r"\div") or tok in _FUNCS


def compile_value(text: str, allow_complex: bool = True) -> tuple[Value, set[str]]:
    """Compile a LaTeX scalar into a numeric function of its variables; Unsupported otherwise."""
    if re.search(r"[=<>]|\\le\b|\\ge\b|\\ne\b|\\in\b|\\infty|\\cup|\\pm", text):
        raise Unsupported("not a scalar")
    parser = _Parser(_tokens(text), allow_complex)
    value = parser.expr()
    if parser.i != len(parser.t):
        raise Unsupported("trailing tokens")
    return value, parser.variables


def clearly_different(
    pred: str, gold: str, allow_complex: bool = True, scales: tuple[float, ...] = (1.0,), rel: float = REJECT_REL
) -> bool:
    """True only when the two expressions take clearly different values at both probe points.

    ``scales`` lists factors the prediction may legitimately carry (a percent sign allows /100).
    """
    try:
        fp, vp = compile_value(pred, allow_complex)
        fg, vg = compile_value(gold, allow_complex)
    except (Unsupported, RecursionError, ValueError):
        return False
    names = sorted(vp | vg)
    if len(names) > len(_PROBES[0]):
        return False
    with mpmath.workdps(DIGITS):
        for probe in _PROBES:
            env = {n: mpmath.mpc(probe[k]) for k, n in enumerate(names)}
            try:
                a, b = fp(env), fg(env)
            except (Unsupported, ZeroDivisionError, ValueError, OverflowError, TypeError):
                return False
            if not (mpmath.isfinite(a) and mpmath.isfinite(b)):
                return False
            scale = max(abs(a), abs(b))
            if any(abs(a * s - b) <= rel * max(scale, abs(a * s)) for s in scales):
                return False
    return True
