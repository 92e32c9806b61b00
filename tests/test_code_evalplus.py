"""HumanEval+ and MBPP+ through the project's benchmark path (``rlvr.harness.grading.EvalGrader``):
every canonical solution passes all of its inputs, a mutated one fails, and verdicts agree with
EvalPlus 0.3.1's own evaluator program by program.

``tests/fixtures/evalplus_verdicts.jsonl`` holds programs (canonical solutions and mutants of
every class in ``benchmarks/code_mutants.py``) with the verdict EvalPlus's evaluator gave each,
recorded by ``benchmarks/bench_code_peers.py --write-fixture``. The default run checks them all,
and every 9th task's canonical solution; ``-m slow`` checks all 542 tasks and reruns EvalPlus live
on the fixture's programs.
"""

import gzip
import importlib.util
import json
import sys

import pytest
from conftest import ROOT
from rlvr.harness.benchmarks.registry import load_problems
from rlvr.harness.grading import EvalGrader

sys.path.insert(0, str(ROOT / "benchmarks"))
from code_mutants import PEER_WRONG, PEER_WRONG_TASKS  # noqa: E402

FIXTURE = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "evalplus_verdicts.jsonl").open()]
MUTATION = """

_rlvr_reference = {name}


def {name}(*args, **kwargs):
    value = _rlvr_reference(*args, **kwargs)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, (list, tuple)):
        return type(value)(list(value) + [None])
    return None
"""


def rows(name):
    with gzip.open(ROOT / "harness" / "data" / "code" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


PROBLEMS = {p.id: p for name in ("humanevalplus", "mbppplus") for p in load_problems(name)}
ENTRY = {r["task_id"]: r["entry_point"] for name in ("humanevalplus", "mbppplus") for r in rows(name)}


@pytest.fixture(scope="module")
def grader():
    g = EvalGrader(workers=2)
    yield g
    g.close()


def fenced(program: str) -> str:
    return f"```python\n{program.strip()}\n```"


def check_problem(grader, task_id):
    problem = PROBLEMS[task_id]
    program = problem.solution.strip().removeprefix("```python").removesuffix("```")
    honest, mutated = grader.grade(
        [(problem, problem.solution), (problem, fenced(program + MUTATION.format(name=ENTRY[task_id])))]
    )
    assert honest.correct, (task_id, honest.reason, honest.detail)
    assert honest.passed == honest.total and honest.total == len(problem.gold["differential"]["inputs"])
    assert not mutated.correct and mutated.reason in ("wrong_answer", "runtime_error"), (
        task_id,
        mutated.reason,
        mutated.detail,
    )


def test_problem_count():
    assert len(PROBLEMS) == 542


#: Sampled tasks whose reference alone runs for 5-30 s (their plus inputs): in the slow test only.
HEAVY = {"Mbpp/599", "Mbpp/392", "Mbpp/271"}


@pytest.mark.parametrize("task_id", [t for t in list(PROBLEMS)[::9] if t not in HEAVY])
def test_sampled_problem(grader, task_id):
    check_problem(grader, task_id)


@pytest.mark.slow
@pytest.mark.parametrize("task_id", list(PROBLEMS))
def test_every_problem(grader, task_id):
    check_problem(grader, task_id)


def test_fixture_covers_every_mutant_class_and_both_datasets():
    from code_mutants import MUTANTS

    classes = {row["class"] for row in FIXTURE}
    assert {"canonical", *MUTANTS} - classes <= {"bool_of_result"}, sorted({"canonical", *MUTANTS} - classes)
    assert {row["dataset"] for row in FIXTURE} == {"humanevalplus", "mbppplus"}
    assert len(FIXTURE) >= 300


def test_verdicts_agree_with_evalplus(grader):
    """Verdict for verdict, except where EvalPlus is demonstrably wrong (named deviations)."""
    verdicts = grader.grade([(PROBLEMS[row["task_id"]], fenced(row["program"])) for row in FIXTURE])
    disagreements = []
    for row, verdict in zip(FIXTURE, verdicts):
        assert verdict.reason != "sandbox_error", (row["id"], verdict.detail)
        if row["class"] == "canonical":
            assert verdict.correct, (row["id"], verdict.reason, verdict.detail)  # correct by definition
        elif row["class"] in PEER_WRONG:
            assert not verdict.correct, (row["id"], PEER_WRONG[row["class"]], verdict.reason)
        elif row["task_id"] in PEER_WRONG_TASKS:
            continue  # EvalPlus's verdict on this task says nothing (it fails everything)
        elif verdict.correct != row["evalplus_pass"]:
            disagreements.append((row["id"], row["evalplus_pass"], verdict.reason, verdict.detail[:120]))
    assert not disagreements, disagreements


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("evalplus") is None, reason="EvalPlus is installed by the test extras (make install)"
)
def test_evalplus_live_gives_the_fixture_verdicts(tmp_path):
    """EvalPlus's evaluator, run now on the fixture's programs, still gives the stored verdicts."""
    from bench_code_peers import run_evalplus

    tasks = {row["task_id"] for row in FIXTURE}
    for dataset in ("humanevalplus", "mbppplus"):
        chosen = [r for r in rows(dataset) if r["task_id"] in tasks]
        programs = [row for row in FIXTURE if row["dataset"] == dataset]
        verdicts, _ = run_evalplus(dataset, chosen, programs, tmp_path, 2, "cold")
        assert {row["id"]: row["evalplus_pass"] for row in programs} == verdicts
