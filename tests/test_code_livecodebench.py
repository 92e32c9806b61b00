"""LiveCodeBench graded as LiveCodeBench's own runner grades it, through the project's benchmark
path (``rlvr.harness.grading.EvalGrader``, what ``rlvr eval --benchmarks livecodebench`` uses).

``tests/fixtures/livecodebench_verdicts.jsonl`` holds programs over every shipped LiveCodeBench
problem (one correct by construction per problem, mutants of output format, return types,
exits, instance state, time and output volume: ``benchmarks/lcb_programs.py``) with the verdict
LiveCodeBench's runner (``nvidia-livecodebench``) gave each, the same in three runs, recorded by
``benchmarks/lcb_peer.py --write-fixture``. The default run checks a sample of every class that
does not wait out a 6 s limit; ``-m slow`` checks every program and reruns LiveCodeBench live. Where we differ
on purpose (``DEPARTURES``, named in the README), our verdict is the one stated there.
"""

import importlib.util
import json
import shutil
import sys

import pytest
from conftest import ROOT
from rlvr.harness.benchmarks.registry import load_problems
from rlvr.harness.grading import EvalGrader

sys.path.insert(0, str(ROOT / "benchmarks"))
from lcb_programs import DEPARTURES, SLOW  # noqa: E402

FIXTURE = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "livecodebench_verdicts.jsonl").open()]
PROBLEMS = {p.id: p for p in load_problems("livecodebench")}


@pytest.fixture(scope="module")
def grader():
    g = EvalGrader(workers=2)
    yield g
    g.close()


def grade(grader, rows):
    return grader.grade([(PROBLEMS[row["problem_id"]], f"```python\n{row['program']}\n```") for row in rows])


def check(rows, verdicts):
    disagreements = []
    for row, verdict in zip(rows, verdicts):
        assert verdict.reason != "sandbox_error", (row["id"], verdict.detail)
        if row["class"] == "correct":
            assert verdict.correct, (row["id"], verdict.reason, verdict.detail)  # correct by construction
        if row["class"] in DEPARTURES:
            ours = DEPARTURES[row["class"]].startswith("pass")
            assert verdict.correct == ours != row["lcb_pass"], (row["id"], DEPARTURES[row["class"]], verdict.reason)
        elif verdict.correct != row["lcb_pass"]:
            disagreements.append((row["id"], row["lcb_pass"], verdict.reason, verdict.detail[:120]))
    assert not disagreements, disagreements


def test_fixture_covers_every_problem_and_class():
    assert {row["problem_id"] for row in FIXTURE if row["class"] == "correct"} == set(PROBLEMS)
    classes = {row["class"] for row in FIXTURE}
    assert set(DEPARTURES) | SLOW <= classes
    assert len(FIXTURE) >= 600
    by_class = {}
    for row in FIXTURE:
        by_class.setdefault(row["class"], set()).add(row["lcb_pass"])
    # the runner's rules this fixture pins: exits after the answer, ignored output, one instance
    for kind in ("exit1_after", "sys_exit_main", "stderr_flood", "trailing_space_flood", "print_flood"):
        assert by_class[kind] == {True}, kind
    for kind in ("exit1_midway", "exit0_before", "raise_after", "instance_counter"):
        assert by_class[kind] == {False}, kind


def sampled(rows, per_class=4):
    """Every class, at most ``per_class`` programs of each (the correct ones of every 5th problem)."""
    seen, out = {}, []
    for number, row in enumerate(rows):
        if (number % 5 == 0) if row["class"] == "correct" else seen.get(row["class"], 0) < per_class:
            seen[row["class"]] = seen.get(row["class"], 0) + 1
            out.append(row)
    return out


def test_verdicts_agree_with_livecodebench(grader):
    """Verdict for verdict on a sample of every class that does not wait out a limit; the named
    departures give our stated verdict."""
    rows = sampled([row for row in FIXTURE if not row["slow"]])
    check(rows, grade(grader, rows))


def test_runner_rules_only_where_its_runner_applies_them(grader):
    """SystemExit after the answer passes; a non-zero ``os._exit`` or an exception after it does
    not, nor an exit before the whole answer. One instance per submission only under
    LiveCodeBench's rule; output during calls is never a limit under any rule."""
    code = grader.service.code
    stdin = [{"input": "2\n", "output": "2\n3\n", "testtype": "stdin"}]
    head = "n = int(input())\nprint(n)\n"
    exits = {
        "print(n + 1)\nexit(1)": "ok",
        "print(n + 1)\nimport sys\nsys.exit('bye')": "ok",
        "import sys\nsys.stdout.flush()\nsys.exit(1)\nprint(n + 1)": "wrong_answer",
        "print(n + 1)\nimport os, sys\nsys.stdout.flush()\nos._exit(1)": "runtime_error",
        "print(n + 1)\nraise SystemError('after the answer')": "runtime_error",
    }
    for tail, reason in exits.items():
        assert code.verify(head + tail, stdin).reason == reason, tail
    counter = "class Solution:\n    def f(self, x):\n        self.n = getattr(self, 'n', 0) + 1\n        return self.n"
    lcb = [{"input": "1", "output": "1", "testtype": "functional"}] * 2
    assert code.verify(counter, lcb, fn_name="f").reason == "wrong_answer"
    assert code.verify(counter, [{"args": [1], "expected": 1}] * 2, fn_name="f").correct
    loud = "def f(x):\n    print('p' * (3 << 20))\n    return x"
    assert code.verify(loud, [{"args": [1], "expected": 1}], fn_name="f", compare="evalplus").correct
    memory = "x = bytearray(400 << 20)\nprint(len(x) > 0)"
    assert code.verify(memory, [{"input": "", "output": "True"}], limits={"memory_mb": 256}).reason == "memory_limit"


@pytest.mark.slow
def test_every_program_agrees_with_livecodebench(grader):
    check(FIXTURE, grade(grader, FIXTURE))


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("livecodebench") is None or shutil.which("unshare") is None,
    reason="nvidia-livecodebench is installed by the test extras (make install); unshare runs it",
)
def test_livecodebench_live_gives_the_fixture_verdicts():
    """LiveCodeBench's runner, run now (in a subprocess, in its own mount namespace), still gives
    the stored verdicts."""
    from lcb_peer import run_livecodebench

    verdicts, _ = run_livecodebench(FIXTURE, PROBLEMS, workers=2)
    assert {row["id"]: row["lcb_pass"] for row in FIXTURE} == verdicts
