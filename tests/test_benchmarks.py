"""The benchmark registry and the harness's grading path: sizes, gold answers and reference
solutions graded correct through `EvalGrader` (the path `rlvr eval` uses), each benchmark's
prelude/adapter, and user data files."""

import json

import pytest
from fixtures.lcb_solutions import SOLUTIONS
from rlvr.harness.benchmarks.custom import load_custom, parse_fields
from rlvr.harness.benchmarks.registry import all_benchmarks, get_benchmark, load_problems
from rlvr.harness.errors import UserError
from rlvr.harness.grading import EvalGrader

SIZES = {
    "aime2024": 30,
    "aime2025": 30,
    "amc2023": 40,
    "math500": 500,
    "minerva_math": 272,
    "olympiadbench": 675,
    "gsm8k": 1319,
    "livecodebench": 279,
    "leetcode_contest": 180,
    "humaneval": 164,
    "humanevalplus": 164,
    "mbpp": 500,
    "mbppplus": 378,
}


@pytest.fixture(scope="module")
def grader():
    g = EvalGrader(workers=2)
    yield g
    g.close()


def test_registry_sizes_and_ids_are_unique():
    for name, size in SIZES.items():
        problems = load_problems(name)
        assert len(problems) == size, name
        assert len({p.id for p in problems}) == size
        assert all(p.benchmark == name and p.kind == get_benchmark(name).kind for p in problems)
    assert set(SIZES) <= set(all_benchmarks())
    assert [p.id for p in load_problems("gsm8k", 3)] == ["gsm8k/0000", "gsm8k/0001", "gsm8k/0002"]
    assert "PUBLIC TESTS ONLY" in get_benchmark("livecodebench").notes


def test_unknown_benchmark_suggests_a_name():
    with pytest.raises(UserError, match="did you mean 'math500'"):
        get_benchmark("math50")


@pytest.mark.parametrize(
    "name", ["aime2024", "aime2025", "amc2023", "math500", "minerva_math", "olympiadbench", "gsm8k"]
)
def test_math_gold_answers_grade_correct_through_the_harness(grader, name):
    problems = load_problems(name)[::25][:12]
    verdicts = grader.grade([(p, f"So the final answer is $\\boxed{{{p.gold['answer']}}}$.") for p in problems])
    assert all(v.correct for v in verdicts), [
        (p.id, v.reason, v.detail) for p, v in zip(problems, verdicts) if not v.correct
    ]
    wrong = grader.grade([(p, "So the final answer is $\\boxed{\\text{no idea}}$.") for p in problems[:3]])
    assert not any(v.correct for v in wrong)


def test_livecodebench_reference_solutions(grader):
    problems = {p.id: p for p in load_problems("livecodebench")}
    pairs = [(problems[pid], f"```python\n{code}\n```") for pid, code in SOLUTIONS.items()]
    verdicts = grader.grade(pairs)
    assert all(v.correct for v in verdicts), [
        (p.id, v.reason, v.detail) for (p, _), v in zip(pairs, verdicts) if not v.correct
    ]


def test_contest_prelude_supplies_typing_like_the_benchmark_runner(grader):
    problem = next(p for p in load_problems("leetcode_contest") if p.gold.get("fn_name") == "countOfPairs")
    code = """class Solution:
    def countOfPairs(self, n: int, x: int, y: int) -> List[int]:
        res = [0] * n
        for i in range(1, n + 1):
            for j in range(1, n + 1):
                if i != j:
                    res[min(abs(i - j), abs(i - x) + 1 + abs(y - j), abs(i - y) + 1 + abs(x - j)) - 1] += 1
        return res"""
    verdict = grader.grade([(problem, f"```python\n{code}\n```")])[0]
    assert verdict.correct, verdict.detail
    assert verdict.total >= 50 and "typing" not in verdict.extracted


DOUBLE_IT = """class Solution:
    def doubleIt(self, head: Optional[ListNode]) -> Optional[ListNode]:
        values = []
        while head:
            values.append(head.val)
            head = head.next
        out, carry = [], 0
        for v in reversed(values):
            carry, digit = divmod(2 * v + carry, 10)
            out.append(digit)
        if carry:
            out.append(carry)
        dummy = node = ListNode(0)
        for d in reversed(out):
            node.next = ListNode(d)
            node = node.next
        return dummy.next"""


def test_linked_list_problems_convert_lists_to_nodes_and_back(grader):
    problem = next(p for p in load_problems("leetcode_contest") if p.gold.get("fn_name") == "doubleIt")
    right = grader.grade([(problem, f"```python\n{DOUBLE_IT}\n```")])[0]
    assert right.correct, right.detail
    wrong = grader.grade([(problem, "```python\n" + DOUBLE_IT.replace("2 * v", "3 * v") + "\n```")])[0]
    assert wrong.reason == "wrong_answer"


BREAK_FUNCTIONS = """
import types as _types
for _name, _value in list(globals().items()):
    if isinstance(_value, _types.FunctionType):
        globals()[_name] = lambda *args, **kwargs: None
"""


@pytest.mark.parametrize("name", ["humaneval", "humanevalplus", "mbpp", "mbppplus"])
def test_function_benchmarks_grade_their_reference_solutions(grader, name):
    problems = load_problems(name)[::40][:4]
    verdicts = grader.grade([(p, p.solution) for p in problems])
    assert all(v.correct for v in verdicts), [
        (p.id, v.reason, v.detail) for p, v in zip(problems, verdicts) if not v.correct
    ]
    broken = grader.grade(
        [(p, p.solution.rstrip().removesuffix("```") + BREAK_FUNCTIONS + "```") for p in problems[:2]]
    )
    assert not any(v.correct for v in broken), [v.detail for v in broken]


def test_humaneval_accepts_a_function_without_its_imports_or_a_bare_body(grader):
    problem = load_problems("humaneval", 1)[0]  # has_close_elements(numbers: List[float], ...)
    row_body = (
        "    for i, a in enumerate(numbers):\n        for j, b in enumerate(numbers):\n            if i != j "
        "and abs(a - b) < threshold:\n                return True\n    return False\n"
    )
    function = "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n" + row_body
    for completion in (f"```python\n{function}```", f"```python\n{row_body}```"):
        verdict = grader.grade([(problem, completion)])[0]
        assert verdict.correct, (completion, verdict.detail)


def test_custom_jsonl_with_field_mapping(tmp_path, grader):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r) for r in [{"idx": 1, "text": "1+1?", "gold": "2"}, {"idx": 2, "text": "2+2?", "gold": "4"}]
        )
        + "\n"
    )
    problems = load_custom(str(path), parse_fields("question=text,answer=gold,id=idx"))
    assert [(p.id, p.question, p.gold["answer"], p.kind) for p in problems] == [
        ("mine/1", "1+1?", "2", "math"),
        ("mine/2", "2+2?", "4", "math"),
    ]
    assert grader.grade([(problems[1], "\\boxed{4}")])[0].correct
    with pytest.raises(UserError, match=r"row 1 has no answer \(its fields are .*\); map it with --fields answer="):
        load_custom(str(path), parse_fields("question=text"))
    with pytest.raises(UserError, match="OUR=THEIRS"):
        parse_fields("question")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x", "answer": "1"}\n{oops\n')
    with pytest.raises(UserError, match="line 2 is not valid JSON"):
        load_custom(str(bad))


def test_custom_code_rows_and_parquet(tmp_path, grader):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [
        {
            "id": "a",
            "question": "Print the sum of two integers on one line.",
            "tests": json.dumps([{"input": "1 2\n", "output": "3\n"}]),
        }
    ]
    path = tmp_path / "code.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    problem = load_custom(str(path))[0]
    assert problem.kind == "code"
    assert grader.grade([(problem, "```python\nprint(sum(map(int, input().split())))\n```")])[0].correct


def test_hub_dataset_without_network_is_one_clear_error(tmp_path):
    """In a fresh process (``datasets`` reads the offline switches when it is imported)."""
    pytest.importorskip("datasets")
    from eval_helpers import rlvr

    result = rlvr(
        "eval",
        "--benchmarks",
        "hf:nobody/nothing@test",
        "--out",
        str(tmp_path / "x"),
        "--no-progress",
        env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 2 and "cannot load hub dataset 'nobody/nothing'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
