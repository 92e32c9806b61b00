"""Realistic variants of EvalPlus canonical solutions, one class per way graders disagree.

Each mutant wraps the canonical entry point and changes its result (or its behaviour) the way a
model's program plausibly would: a tuple where the reference returns a list, ``1`` for ``True``,
a float that rounds an exact integer, a numpy scalar, an exception on some inputs, a program
that never returns on some inputs, an object whose ``__eq__`` always says yes. The same program
text goes to EvalPlus's evaluator and to ours (``bench_code_peers.py``), so each class shows
where the two agree and where not. Which classes apply to a task follows from the type of the
reference's result on its first input.
"""

from __future__ import annotations

import random
from typing import Any

HEADER = """

import zlib as _rlvr_zlib
_rlvr_reference = {entry}


def _rlvr_key(args):
    return _rlvr_zlib.crc32(repr(args).encode())


def {entry}(*args, **kwargs):
    result = _rlvr_reference(*args, **kwargs)
"""

#: class -> (body of the wrapper after ``result`` is computed, the result types it applies to).
MUTANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tuple_for_list": ("    return tuple(result) if type(result) is list else result", ("list",)),
    "list_for_tuple": ("    return list(result) if type(result) is tuple else result", ("tuple",)),
    "int_for_bool": ("    return int(result) if type(result) is bool else result", ("bool",)),
    "bool_for_int": ("    return bool(result) if type(result) is int and result in (0, 1) else result", ("int",)),
    "float_for_int": ("    return float(result) if type(result) is int else result", ("int",)),
    "float_within_1e-9": (
        "    return result + 1e-9 * max(1.0, abs(result)) if type(result) is float else result",
        ("float",),
    ),
    "float_off_1e-4": ("    return result * (1 + 1e-4) + 1e-4 if type(result) is float else result", ("float",)),
    "floats_within_1e-9": (
        "    return [x + 1e-9 if type(x) is float else x for x in result] if type(result) is list else result",
        ("float_list",),
    ),
    "off_by_one": ("    return result + 1 if type(result) is int else result", ("int",)),
    "str_of_result": ("    return str(result)", ("int", "float", "list", "tuple", "bool")),
    "none_result": ("    return None", ("int", "float", "str", "list", "tuple", "bool", "dict", "set")),
    "reversed_list": ("    return list(reversed(result)) if type(result) is list else result", ("list",)),
    "duplicated_list": ("    return result + result[:1] if type(result) is list and result else result", ("list",)),
    "bool_of_result": ("    return bool(result)", ("object", "none")),
    "raises_sometimes": (
        "    if _rlvr_key(args) % 7 == 0:\n        raise ValueError('mutant')\n    return result",
        ("*",),
    ),
    "wrong_sometimes": ("    if _rlvr_key(args) % 11 == 0:\n        return None\n    return result", ("*",)),
    "hangs_sometimes": (
        "    if _rlvr_key(args) % 29 == 0:\n        while True:\n            pass\n    return result",
        ("*",),
    ),
    "numpy_float": (
        "    import numpy\n    return numpy.float64(result) if type(result) is float else result",
        ("float",),
    ),
    "numpy_int": (
        "    import numpy\n    return numpy.int64(result) if type(result) is int and abs(result) < 2**62 else result",
        ("int",),
    ),
    "numpy_array": (
        "    import numpy\n    return numpy.array(result) if type(result) is list and result and all(type(x) in (int, "
        "float) for x in result) else result",
        ("list", "float_list"),
    ),
    "always_equal": (
        "    class _Equal:\n        def __eq__(self, other):\n            return True\n    return _Equal()",
        ("*",),
    ),
}
#: Where EvalPlus 0.3.1 is demonstrably wrong, with the reason (our deliberate differences).
PEER_WRONG = {
    "always_equal": "an object whose __eq__ always returns True passes EvalPlus without solving anything",
}
PEER_WRONG_TASKS = {
    "HumanEval/32": "EvalPlus 0.3.1's find_zero oracle never records a pass (canonical solution included)",
    "Mbpp/255": "EvalPlus fails every solution, canonical included: one plus input's expected output (1.66 million "
    "77-tuples) "
    "exceeds its 4 GiB memory cap; we leave that input (and one other over 64 MiB) out",
}


def result_kind(value: Any) -> str:
    if value is None:
        return "none"
    kind = type(value).__name__
    if kind == "list" and value and all(type(x) is float for x in value):
        return "float_list"
    return kind if kind in ("int", "float", "str", "list", "tuple", "bool", "dict", "set") else "object"


def mutant_program(program: str, entry: str, name: str) -> str:
    body, _ = MUTANTS[name]
    return program.rstrip("\n") + "\n" + HEADER.format(entry=entry) + body + "\n"


def applicable(kind: str) -> list[str]:
    return [
        name
        for name, (_, kinds) in MUTANTS.items()
        if "*" in kinds or kind in kinds or (kind == "float_list" and "list" in kinds)
    ]


def programs_for(
    task_id: str, program: str, entry: str, kind: str, per_task: int, rng: random.Random, skip: set[str] = frozenset()
) -> list[tuple[str, str]]:
    """(class, program): the canonical solution and ``per_task`` mutants drawn from the
    classes that apply to this task's result type (less ``skip``)."""
    classes = [name for name in applicable(kind) if name not in skip]
    chosen = classes if per_task >= len(classes) else rng.sample(classes, per_task)
    head = [] if "canonical" in skip else [("canonical", program)]
    return head + [(name, mutant_program(program, entry, name)) for name in sorted(chosen)]
