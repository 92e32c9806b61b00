"""Code benchmarks: LiveCodeBench-style, LeetCode contests, HumanEval(+), MBPP(+) as problems.

Each benchmark's own harness supplies some code around the model's program (LiveCodeBench
prepends a block of standard imports; LeetCode defines ``ListNode``; HumanEval prompts import
``typing``). We pass those as the verifier's ``prelude`` / ``postlude`` so the grade matches
what the benchmark's runner would decide, and the model's program stays what it wrote.
"""
from __future__ import annotations

import ast
from typing import Any

from harness.benchmarks.evalplus import float_tolerance, inputs_of, oracle_of, reference_program
from harness.benchmarks.problems import Problem

#: Standard-library names LiveCodeBench-style runners make available without an import.
CONTEST_PRELUDE = """\
import sys, re, math, heapq, bisect, itertools, functools, collections, string, copy, random, statistics, operator, datetime, json
from typing import *
from collections import *
from heapq import *
from bisect import *
from itertools import *
from functools import *
from math import *
sys.setrecursionlimit(50000)"""

LIST_NODE = """
class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next"""

#: Adapts a LeetCode linked-list method to the list-in/list-out tests of the contest file.
LINKED_LIST_ADAPTER = """
def _rlvr_to_nodes(values):
    head = None
    for value in reversed(values or []):
        head = ListNode(value, head)
    return head


def _rlvr_to_list(node):
    out = []
    while node is not None:
        out.append(node.val)
        node = node.next
    return out


_RlvrSolution = Solution


class Solution(_RlvrSolution):
    def {fn}(self, head, *args):
        return _rlvr_to_list(super().{fn}(_rlvr_to_nodes(head), *args))
"""

CODE_BLOCK = "Put your complete solution in a single ```python code block."


def contest_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """LiveCodeBench and the DeepSeek LeetCode contest set (stdin or ``Solution`` method)."""
    fn_name = (row.get("metadata") or {}).get("func_name")
    if fn_name:
        fmt = f"Complete this starter code. {CODE_BLOCK}\n```python\n{row['starter_code'].rstrip()}\n```"
    else:
        fmt = f"Write a Python program that reads the input from standard input and prints the answer to standard output. {CODE_BLOCK}"
    gold: dict[str, Any] = {"tests": row["tests"], "prelude": CONTEST_PRELUDE}
    if fn_name:
        gold.update(fn_name=fn_name, starter_code=row["starter_code"])
    if (row.get("metadata") or {}).get("linked_list_io"):
        gold["prelude"] = CONTEST_PRELUDE + LIST_NODE
        gold["postlude"] = LINKED_LIST_ADAPTER.format(fn=fn_name)
    meta = {k: row[k] for k in ("platform", "difficulty", "contest_date", "tests_scope", "question_title") if row.get(k)}
    return Problem(row["id"], benchmark, "code", f"{row['question_content'].rstrip()}\n\n{fmt}", gold, None, meta)


def _imports_of(prompt: str) -> str:
    """The top-level import statements of a HumanEval prompt (the model may not repeat them)."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    lines = prompt.split("\n")
    return "\n".join(
        "\n".join(lines[node.lineno - 1 : node.end_lineno]) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def _function_question(prompt: str) -> str:
    return f"Complete the following Python function. {CODE_BLOCK}\n```python\n{prompt.rstrip()}\n```"


def humaneval_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """HumanEval: the original ``check(candidate)`` script as one assert test."""
    entry = row["entry_point"]
    gold = {
        "tests": [{"testtype": "assert", "code": f"{row['test']}\n\ncheck({entry})\n"}],
        "fn_name": entry,
        "starter_code": row["prompt"],
        "prelude": _imports_of(row["prompt"]),
    }
    solution = f"```python\n{row['prompt']}{row['canonical_solution']}```"
    return Problem(row["id"], benchmark, "code", _function_question(row["prompt"]), gold, solution)


def evalplus_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """HumanEval+ / MBPP+: differential tests against the canonical solution (outputs are
    computed in the sandbox when the problem is first graded, then cached)."""
    entry = row["entry_point"]
    humaneval = benchmark == "humanevalplus"
    gold: dict[str, Any] = {
        "differential": {"reference": reference_program(row), "inputs": inputs_of(row), "task_id": row["task_id"]},
        "fn_name": entry,
        "oracle": oracle_of(row),
        "limits": {"float_abs_tol": float_tolerance(row)},
    }
    if humaneval:
        gold["starter_code"] = row["prompt"]
        gold["prelude"] = _imports_of(row["prompt"])
        question = _function_question(row["prompt"])
    else:
        task = row["prompt"].strip().strip('"').strip()
        question = f"{task}\n\nWrite the Python function `{entry}`. {CODE_BLOCK}"
    solution = f"```python\n{reference_program(row).strip()}\n```"
    return Problem(row["id"], benchmark, "code", question, gold, solution)


def mbpp_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """MBPP (Austin et al.): the task text with its three asserts shown, graded by the asserts."""
    asserts = "\n".join(row["test_list"])
    question = f"{row['text']}\nYour code should pass these tests:\n{asserts}\n{CODE_BLOCK}"
    gold: dict[str, Any] = {"tests": [{"testtype": "assert", "code": t} for t in row["test_list"]]}
    if row.get("test_setup_code"):
        gold["prelude"] = row["test_setup_code"]
    solution = f"```python\n{row['code'].strip()}\n```"
    return Problem(row["id"], benchmark, "code", question, gold, solution, {"split": row.get("split")})
