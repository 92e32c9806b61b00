"""Procedural benchmarks: easy verifiable tasks generated from a seed, with disjoint train and
held-out splits, so learning is visible on a small model and a CPU.

* ``arith`` — small-integer arithmetic ("What is 7 + 5?"), graded by the math verifier with
  the ``arith`` policy. Levels: 1-digit addition, 1-digit multiplication, 2-digit + 1-digit
  addition (10-29 + 0-9), 1-digit subtraction with a non-negative result: 455 problems.
* ``pyfunc`` — one-line Python functions ("Write a Python function `add_3(x)` that returns x
  plus 3."), graded by the code sandbox on five calls.

Every problem is a pure function of its parameters, and its split is decided by a hash of those
parameters, so the train and held-out splits never share a problem and never change. ``arith``
and ``pyfunc`` are the held-out splits; ``arith_train`` and ``pyfunc_train`` are the pools the
trainers sample from.

* ``arith_test1k`` — a held-out test of 1,010 ``arith``-style problems for comparisons that must
  resolve a few points (110 items give a paired CI of about ±5 points): the 110 ``arith`` items
  plus two extended-range levels no training item comes from, 2-digit + 1-digit addition with
  the first operand 30-69 (``add2x``, 400) and 2-digit - 1-digit subtraction, 10-59 minus 0-9
  (``sub2x``, 500). Disjoint from ``arith_train`` by construction (tested on the questions).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Callable

from rlvr.harness.benchmarks.problems import BenchmarkSpec, Problem

_HELD_OUT_SHARE = 0.25


def _is_held_out(key: str) -> bool:
    """A stable 25% of all parameter combinations are held out."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < _HELD_OUT_SHARE


# ---- arith -----------------------------------------------------------------------------------
def _arith_space() -> list[tuple[str, int, str, int, int]]:
    """Every (level, a, op, b, answer) of the task family."""
    space = []
    for a in range(10):
        for b in range(10):
            space.append(("add1", a, "+", b, a + b))
            space.append(("mul1", a, "*", b, a * b))
            if a >= b:
                space.append(("sub1", a, "-", b, a - b))
    for a in range(10, 30):
        for b in range(10):
            space.append(("add2", a, "+", b, a + b))
    return space


_ARITH_NAMES = {"test": "arith", "train": "arith_train", "test1k": "arith_test1k"}


def _arith_problem(item: tuple[str, int, str, int, int], split: str) -> Problem:
    level, a, op, b, answer = item
    symbol = {"+": "+", "*": "\u00d7", "-": "-"}[op]
    name = _ARITH_NAMES[split]
    return Problem(
        id=f"{name}/{level}-{a}{op}{b}",
        benchmark=name,
        kind="math",
        question=f"What is {a} {symbol} {b}?",
        gold={"answer": str(answer), "policy": "arith"},
        solution=f"{a} {symbol} {b} = {answer}. The final answer is $\\boxed{{{answer}}}$.",
        meta={"level": level},
    )


def _arith_extended_space() -> list[tuple[str, int, str, int, int]]:
    """The extended-range levels of ``arith_test1k``: no training item has these operands."""
    space = [("add2x", a, "+", b, a + b) for a in range(30, 70) for b in range(10)]
    return space + [("sub2x", a, "-", b, a - b) for a in range(10, 60) for b in range(10)]


def arith_problems(split: str, size: int | None = None, seed: int = 0) -> list[Problem]:
    """The split's problems in a seeded order, levels interleaved so any prefix is balanced.
    ``split``: ``train``, ``test`` (the 110 held-out items) or ``test1k`` (those plus the
    extended-range levels)."""
    by_level: dict[str, list] = {}
    for item in _arith_space():
        key = f"arith:{item[0]}:{item[1]}{item[2]}{item[3]}"
        if _is_held_out(key) == (split != "train"):
            by_level.setdefault(item[0], []).append(item)
    if split == "test1k":
        for item in _arith_extended_space():
            by_level.setdefault(item[0], []).append(item)
    return _interleave(
        by_level, size or sum(len(v) for v in by_level.values()), seed, lambda it: _arith_problem(it, split)
    )


def _interleave(by_level: dict[str, list], size: int, seed: int, build: Callable[[Any], Problem]) -> list[Problem]:
    rng = random.Random(seed)
    pools = {level: rng.sample(items, len(items)) for level, items in sorted(by_level.items())}
    out: list[Problem] = []
    while len(out) < size and any(pools.values()):
        for level in sorted(pools):
            if pools[level] and len(out) < size:
                out.append(build(pools[level].pop()))
    return out


# ---- pyfunc ----------------------------------------------------------------------------------
#: (family, description with {k}, reference, argument generator); k varies the task.
_FAMILIES: list[tuple[str, str, Callable[[int], Callable[..., Any]], Callable[[random.Random], list[Any]]]] = [
    ("add", "returns x plus {k}", lambda k: lambda x: x + k, lambda r: [r.randint(-50, 50)]),
    ("mul", "returns x multiplied by {k}", lambda k: lambda x: x * k, lambda r: [r.randint(-20, 20)]),
    ("sub", "returns x minus {k}", lambda k: lambda x: x - k, lambda r: [r.randint(-50, 50)]),
    ("pow", "returns x raised to the power {k}", lambda k: lambda x: x**k, lambda r: [r.randint(-6, 6)]),
    (
        "gt",
        "returns True if x is greater than {k}, otherwise False",
        lambda k: lambda x: x > k,
        lambda r: [r.randint(-5, 30)],
    ),
    ("mod", "returns the remainder of x divided by {k}", lambda k: lambda x: x % k, lambda r: [r.randint(0, 100)]),
    (
        "repeat",
        "returns the string s repeated {k} times",
        lambda k: lambda s: s * k,
        lambda r: [r.choice(["a", "ab", "xyz", ""])],
    ),
    (
        "listadd",
        "returns the list of numbers in xs, each plus {k}",
        lambda k: lambda xs: [x + k for x in xs],
        lambda r: [[r.randint(-9, 9) for _ in range(r.randint(0, 4))]],
    ),
    (
        "count",
        "returns how many times the number {k} appears in the list xs",
        lambda k: lambda xs: xs.count(k),
        lambda r: [[r.randint(0, 12) for _ in range(r.randint(0, 6))]],
    ),
    ("maxk", "returns the larger of x and {k}", lambda k: lambda x: max(x, k), lambda r: [r.randint(-10, 30)]),
]
_PARAMS = {"pow": range(2, 5), "mod": range(2, 32), "repeat": range(2, 10), "count": range(0, 13)}


def _pyfunc_problem(family: str, k: int, split: str) -> Problem:
    name_of = {
        "add": "add",
        "mul": "times",
        "sub": "minus",
        "pow": "power",
        "gt": "greater_than",
        "mod": "mod",
        "repeat": "repeat",
        "listadd": "add_to_all",
        "count": "count",
        "maxk": "max_with",
    }
    entry = next(f for f in _FAMILIES if f[0] == family)
    _, description, make, argument = entry
    fn_name = f"{name_of[family]}_{k}"
    arg = "s" if family == "repeat" else ("xs" if family in ("listadd", "count") else "x")
    reference = make(k)
    rng = random.Random(f"{family}:{k}")
    calls = [argument(rng) for _ in range(5)]
    tests = [{"args": args, "expected": reference(*args)} for args in calls]
    text = description.format(k=k)
    example_args = calls[0]
    return Problem(
        id=f"pyfunc{'' if split == 'test' else '_train'}/{family}-{k}",
        benchmark="pyfunc" if split == "test" else "pyfunc_train",
        kind="code",
        question=f"Write a Python function `{fn_name}({arg})` that {text}. For example, "
        f"`{fn_name}({example_args[0]!r})` returns `{tests[0]['expected']!r}`. "
        f"Put the function in a ```python code block.",
        gold={"tests": tests, "fn_name": fn_name},
        solution=f"```python\ndef {fn_name}({arg}):\n    return {_solution_body(family, k, arg)}\n```",
        meta={"level": family},
    )


def _solution_body(family: str, k: int, arg: str) -> str:
    return {
        "add": f"{arg} + {k}",
        "mul": f"{arg} * {k}",
        "sub": f"{arg} - {k}",
        "pow": f"{arg} ** {k}",
        "gt": f"{arg} > {k}",
        "mod": f"{arg} % {k}",
        "repeat": f"{arg} * {k}",
        "listadd": f"[x + {k} for x in {arg}]",
        "count": f"{arg}.count({k})",
        "maxk": f"max({arg}, {k})",
    }[family]


def pyfunc_problems(split: str, size: int | None = None, seed: int = 0) -> list[Problem]:
    by_level: dict[str, list] = {}
    for family, *_ in _FAMILIES:
        for k in _PARAMS.get(family, range(1, 31)):
            if _is_held_out(f"pyfunc:{family}:{k}") == (split == "test"):
                by_level.setdefault(family, []).append((family, k))
    size = size or sum(len(v) for v in by_level.values())
    return _interleave(by_level, size, seed, lambda item: _pyfunc_problem(item[0], item[1], split))


#: The procedural benchmarks, listed by ``rlvr.harness.benchmarks.registry`` with the shipped ones.
PROCEDURAL_SPECS = [
    BenchmarkSpec(
        name=name,
        kind=kind,
        description=description,
        source="generated by harness/benchmarks/procedural.py (seed 0)",
        load=(lambda make=make, split=split: make(split)),
        instruction="Reply with just the number."
        if kind == "math"
        else "Put your solution in a single ```python code block.",
        policy="arith" if kind == "math" else None,
        shots_from=name,
    )
    for name, kind, make, split, description in (
        ("arith", "math", arith_problems, "test", "small-integer arithmetic, held-out split (procedural)"),
        ("arith_train", "math", arith_problems, "train", "small-integer arithmetic, training split (procedural)"),
        (
            "arith_test1k",
            "math",
            arith_problems,
            "test1k",
            "small-integer arithmetic, 1,010 held-out problems: arith plus extended ranges (procedural)",
        ),
        ("pyfunc", "code", pyfunc_problems, "test", "one-line Python functions, held-out split (procedural)"),
        ("pyfunc_train", "code", pyfunc_problems, "train", "one-line Python functions, training split (procedural)"),
    )
]
