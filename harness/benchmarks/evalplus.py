"""EvalPlus (HumanEval+, MBPP+): reference programs, typed inputs, oracles, differential tests.

EvalPlus rows ship inputs only; expected outputs come from running the canonical solution in
our sandbox (``rlvr.sandbox.code.judging.reference``). MBPP+ stores tuples, sets and complex numbers as JSON
lists and strings, so some tasks need their argument types restored before any call (the
table below follows EvalPlus 0.3.1's ``mbpp_deserialize_inputs``, task by task). Results are
compared with EvalPlus's own rule (``rlvr.sandbox.code.judging.compare``, rule ``evalplus``), its task
tolerance ``atol``, and the special oracles its ``unsafe_execute`` chooses by entry point.
"""

from __future__ import annotations

from typing import Any

# How to restore MBPP+ argument types, by task number.
_EACH_ARG_TUPLE = {
    2,
    116,
    132,
    143,
    222,
    261,
    273,
    394,
    399,
    421,
    424,
    429,
    470,
    560,
    579,
    596,
    616,
    630,
    726,
    740,
    744,
    809,
}
_EACH_ARG_LIST_OF_TUPLES = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}
_FIRST_ARG_LIST_OF_TUPLES = {75, 413, 444, 753}
_SECOND_ARG_TUPLE = {106, 750}
_FIRST_ARG_TUPLE = {250, 405, 446, 617, 720, 763, 808}
_EACH_ARG_TUPLE_OF_TUPLES = {259, 401, 445}
_EVERYTHING_TUPLE = {580, 615, 791}

#: Inputs whose reference output exceeds the sandbox's 64 MiB cap on one return value
#: (combinations_with_replacement of 5 colours choose 77, and of 4 choose 77): left out.
OVERSIZED_INPUTS = {"Mbpp/255": {88, 103}}

#: ``evalplus/eval/_special_oracle.py`` and ``unsafe_execute``: MBPP+ oracles by entry point.
MBPP_SET_ORACLE = {
    "similar_elements",
    "find_char_long",
    "common_in_nested_lists",
    "extract_singly",
    "larg_nnum",
    "intersection_array",
    "find_dissimilar",
    "Diff",
}
MBPP_NOT_NONE_ORACLE = {"check_str", "text_match_three", "text_starta_endb"}
MBPP_ENTRY_ORACLES = {
    "are_equivalent": "any_value",
    "sum_div": "sum_div",
    "surface_Area": "surface_area",
    "digit_distance_nums": "digit_distance",
}


def _deep_tuple(value: Any) -> Any:
    return tuple(_deep_tuple(v) for v in value) if isinstance(value, list) else value


def restore_mbpp_inputs(task_id: str, inputs: list[list[Any]]) -> list[list[Any]]:
    """Give MBPP+ arguments back the Python types JSON could not hold."""
    n = int(str(task_id).rsplit("/", 1)[-1])
    out = []
    for args in inputs:
        if n in _EACH_ARG_TUPLE:
            args = [tuple(a) for a in args]
        elif n in _EACH_ARG_LIST_OF_TUPLES:
            args = [[tuple(x) for x in a] for a in args]
        elif n in _FIRST_ARG_LIST_OF_TUPLES:
            args = [[tuple(x) for x in args[0]], *args[1:]]
        elif n in _SECOND_ARG_TUPLE:
            args = [args[0], tuple(args[1]), *args[2:]]
        elif n in _FIRST_ARG_TUPLE:
            args = [tuple(args[0]), *args[1:]]
        elif n in _EACH_ARG_TUPLE_OF_TUPLES:
            args = [tuple(tuple(x) for x in a) for a in args]
        elif n in _EVERYTHING_TUPLE:
            args = list(_deep_tuple(args))
        elif n == 115:  # a list of sets; EvalPlus writes an empty member as {} (a dict)
            args = [[set(x) if isinstance(x, list) and x else {} for x in args[0]]]
        elif n == 124:
            args = [float(args[0]), complex(args[1])]
        elif n == 252:
            args = [complex(args[0])]
        elif n == 278:
            args = [tuple(tuple(x) if isinstance(x, list) else x for x in args[0])]
        elif n == 307:
            args = [tuple(args[0]), args[1], args[2]]
        elif n == 722:
            args = [{k: tuple(v) for k, v in args[0].items()}, *args[1:]]
        out.append(list(args))
    return out


def reference_program(row: dict[str, Any]) -> str:
    """The canonical solution as a runnable program (HumanEval+ splits it from the prompt)."""
    if str(row["task_id"]).startswith("HumanEval"):
        return row["prompt"] + row["canonical_solution"]
    return row["canonical_solution"]


def inputs_of(row: dict[str, Any], plus: bool = True) -> list[list[Any]]:
    inputs = list(row.get("base_input") or [])
    if plus and isinstance(row.get("plus_input"), list):
        inputs += row["plus_input"]
    if str(row["task_id"]).startswith("Mbpp"):
        inputs = restore_mbpp_inputs(row["task_id"], inputs)
    skip = OVERSIZED_INPUTS.get(row["task_id"], set())
    return [args for i, args in enumerate(inputs) if i not in skip]


def input_groups(row: dict[str, Any]) -> list[str]:
    """``base`` or ``plus`` for each input of ``inputs_of(row)``: EvalPlus checks the two groups
    separately (its float tolerance and its time budget are per group)."""
    base = len(row.get("base_input") or [])
    plus = len(row["plus_input"]) if isinstance(row.get("plus_input"), list) else 0
    skip = OVERSIZED_INPUTS.get(row["task_id"], set())
    return [group for i, group in enumerate(["base"] * base + ["plus"] * plus) if i not in skip]


def oracle_of(row: dict[str, Any]) -> str:
    """The special oracle EvalPlus's ``unsafe_execute`` applies to this task."""
    entry = row["entry_point"]
    if str(row["task_id"]).startswith("HumanEval"):
        return "find_zero" if entry == "find_zero" else "exact"
    if entry in MBPP_ENTRY_ORACLES:
        return MBPP_ENTRY_ORACLES[entry]
    if entry in MBPP_SET_ORACLE:
        return "set"
    if entry in MBPP_NOT_NONE_ORACLE:
        return "not_none"
    return "exact"


def comparison_of(row: dict[str, Any]) -> dict[str, Any]:
    """EvalPlus's comparison for this task: its rule, its oracle, its ``atol``."""
    return {"rule": "evalplus", "oracle": oracle_of(row), "atol": float(row.get("atol") or 0.0)}
