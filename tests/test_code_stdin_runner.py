"""Issue 41, item 2: the per-submission stdin runner (``stdin_process="submission"``).

A fresh process per stdin test stays the default. The option runs all of one submission's stdin
tests in one process (as LiveCodeBench's runner and EvalPlus do). Each test's input becomes fd 0,
its clocks and output caps are its own, and a runner that fails is replaced for the next test.
What a program leaves outside its namespace is shared between its own tests and never reaches
another submission.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT
from rlvr.harness.grading import EvalGrader
from rlvr.sandbox.code.verify import CodeGrader

from rlvr.cli.main import main

MODES = ("test", "submission")


@pytest.fixture(scope="module")
def code():
    grader = CodeGrader(workers=1)
    yield grader
    grader.close()


def doubles(n: int = 4) -> list[dict[str, str]]:
    return [{"input": f"{i}\n", "output": f"{2 * i}\n", "testtype": "stdin"} for i in range(n)]


@pytest.mark.parametrize("mode", MODES)
def test_exits_and_errors_get_the_same_verdicts_in_both_modes(code, mode):
    """LiveCodeBench's exit rules hold in the runner as in a fresh process: SystemExit after the
    answer passes, a non-zero ``os._exit`` or an exception after it does not."""
    stdin = [{"input": "2\n", "output": "2\n3\n", "testtype": "stdin"}] * 3
    head = "n = int(input())\nprint(n)\n"
    exits = {
        "print(n + 1)": "ok",
        "print(n + 1)\nexit(1)": "ok",
        "print(n + 1)\nimport sys\nsys.exit('bye')": "ok",
        "import sys\nsys.stdout.flush()\nsys.exit(1)\nprint(n + 1)": "wrong_answer",
        "print(n + 1)\nimport os, sys\nsys.stdout.flush()\nos._exit(1)": "runtime_error",
        "print(n + 1)\nimport os, sys\nsys.stdout.flush()\nos._exit(256)": "ok",  # status 0, as a process
        "print(n + 1)\nraise SystemError('after the answer')": "runtime_error",
    }
    for tail, reason in exits.items():
        verdict = code.verify(head + tail, stdin, stdin_process=mode)
        assert verdict.reason == reason, (tail, verdict.detail)
    no_rule = [{"input": "2\n", "output": "2\n"}]
    assert code.verify("print(input())\nexit(3)", no_rule, compare="python", stdin_process=mode).reason == (
        "runtime_error"
    )


@pytest.mark.parametrize("mode", MODES)
def test_every_way_of_reading_stdin_sees_this_tests_input_and_its_end(code, mode):
    readers = [
        "print(int(input()) * 2)",
        "print(int(open(0).read()) * 2)",  # closes fd 0 when done
        "import sys\nprint(int(sys.stdin.buffer.read()) * 2)",
        "import os\nd = b''\nwhile True:\n    c = os.read(0, 1)\n    if not c: break\n    d += c\nprint(int(d) * 2)",
        "import sys\nprint(sum(int(x) for x in sys.stdin) * 2)",
    ]
    for program in readers:
        verdict = code.verify(program, doubles(), stdin_process=mode)
        assert verdict.correct, (program, verdict.reason, verdict.detail)


def test_state_is_shared_between_a_submissions_tests_and_never_across():
    """The weaker guarantee, pinned: a module attribute set by test 0 is seen by test 1 in the
    runner (a fresh process each in the default); the next submission starts clean."""
    counting = "import sys\nsys.seen = getattr(sys, 'seen', 0) + 1\ninput()\nprint(sys.seen)"
    runs = [{"input": "x\n", "output": f"{i}\n"} for i in (1, 2, 3)]
    with CodeGrader(workers=1) as grader:  # one judge: both submissions meet the same zygote
        for _ in range(2):
            assert grader.verify(counting, runs, stdin_process="submission").correct
        fresh = grader.verify(counting, runs, partial=True)
        assert (fresh.passed, fresh.first_failure) == (1, 1)
        assert grader.verify(counting, [{"input": "x\n", "output": "1\n"}] * 3).correct


def test_a_failed_test_replaces_the_runner_and_the_next_test_runs_clean(code):
    program = (
        "import os, sys\nx = int(input())\nif x == 1:\n    os._exit(3)\nif x == 2:\n    while True: pass\n"
        "sys.runs = getattr(sys, 'runs', 0) + 1\nprint(x * 2 if sys.runs == 1 or x == 0 else -1)"
    )
    verdict = code.verify(program, doubles(4), stdin_process="submission", partial=True, limits={"time_s": 0.5})
    # test 0 passes, 1 dies (runtime error), 2 runs out of CPU, 3 passes in a new runner (runs == 1)
    assert (verdict.passed, verdict.first_failure, verdict.reason) == (2, 1, "runtime_error"), verdict.detail
    verdict = code.verify(program, doubles(4)[2:], stdin_process="submission", partial=True, limits={"time_s": 0.5})
    assert (verdict.passed, verdict.first_failure, verdict.reason) == (1, 0, "time_limit"), verdict.detail
    flood = (
        "import sys\nx = int(input())\nprint(x * 2)\nif x == 1:\n    print('y' * (3 << 20))\n"
        "sys.n = getattr(sys, 'n', 0) + 1\nprint(sys.n)"
    )
    tests = [{"input": f"{i}\n", "output": f"{2 * i}\n{n}\n"} for i, n in ((0, 1), (1, 2), (2, 1))]
    limits = {"output_kb": 1024, "result_mb": 1}  # the sandbox itself keeps at most 1 MiB
    verdict = code.verify(flood, tests, stdin_process="submission", partial=True, limits=limits)
    # test 1 overflows what the sandbox keeps (its runner is replaced): test 2 runs in a new one
    assert (verdict.passed, verdict.first_failure, verdict.reason) == (2, 1, "output_limit"), verdict.detail


def test_each_test_has_its_own_cpu_clock(code):
    """Four tests of 0.3 s of CPU each pass a 0.6 s limit: the runner's lifetime CPU is not
    charged to its later tests (nor to a test that then fails)."""
    burn = "import time\nx = int(input())\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    verdict = code.verify(burn + "print(x * 2)", doubles(4), stdin_process="submission", limits={"time_s": 0.6})
    assert verdict.correct, verdict.detail
    crash = burn + "import os, sys\nif x == 3:\n    sys.stdout.flush()\n    os._exit(1)\nprint(x * 2)"
    verdict = code.verify(crash, doubles(4), stdin_process="submission", limits={"time_s": 0.6})
    assert (verdict.reason, verdict.first_failure) == ("runtime_error", 3), verdict.detail


def test_what_the_program_writes_to_the_runners_channel_only_fails_it(code):
    """The end of a test is read by the supervisor from the runner's channel; a program that
    writes there itself ends its own test early or breaks the channel, and fails."""
    forged = "import os\nx = int(input())\nos.write(4, b'D\\x00')\nprint(x * 2)"
    assert not code.verify(forged, doubles(), stdin_process="submission").correct
    garbage = "import os\nx = int(input())\nprint(x * 2)\nimport sys\nsys.stdout.flush()\nos.write(4, b'Zz')"
    verdict = code.verify(garbage, doubles(), stdin_process="submission")
    assert verdict.reason == "runtime_error", verdict.detail
    closed = "import os\nx = int(input())\nprint(x * 2)\nos.close(3)"
    verdict = code.verify(closed, doubles(), stdin_process="submission", partial=True)
    assert verdict.passed >= 1 and not verdict.correct


def test_a_runner_left_writing_cannot_hold_the_supervisor(code):
    """A thread that floods stderr and stdout after its test ended: the supervisor reads what
    was there at the end of the test, never waits for the flood to stop, and the next test runs."""
    program = (
        "import os, sys, threading\nx = int(input())\nprint(x * 2)\nsys.stdout.flush()\n"
        "def flood():\n    while True:\n        os.write(2, b'e' * 65536)\n"
        "if x == 0:\n    threading.Thread(target=flood, daemon=True).start()\n"
    )
    verdict = code.verify(program, doubles(3), stdin_process="submission", limits={"time_s": 2, "total_s": 20})
    assert verdict.reason in ("ok", "time_limit"), verdict.detail  # the flood's CPU is charged to later tests
    assert verdict.reason != "sandbox_error"


#: Forks ``n`` children that each fork a grandchild and exit at once: every grandchild is an
#: orphan (reparented to PID 1) whose zombie holds one of the sandbox's 32 processes until
#: reaped. A child whose ``fork`` fails exits 1, so the program sees it and says so.
ORPHANS = """
import os, sys, time
n, pause = map(float, input().split())
failed = 0
for _ in range(int(n)):
    pid = os.fork()
    if pid == 0:
        try:
            if os.fork() == 0:
                os._exit(0)
        except OSError:
            os._exit(1)
        os._exit(0)
    failed += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
    time.sleep(pause)
print("forks failed" if failed else "ok")
"""


@pytest.mark.parametrize("mode", MODES)
def test_orphans_are_reaped_while_a_test_runs(code, mode):
    """PID 1 collects orphans' zombies as an init does, while the test runs (it wakes at
    least every 20 ms to check the CPU clock): 60 orphans, 5 ms apart, in one test of a
    sandbox that holds 32 processes. Left to the test's end, the 31st ``fork`` failed."""
    verdict = code.verify(ORPHANS, [{"input": "60 0.005\n", "output": "ok\n"}], stdin_process=mode)
    assert verdict.correct, verdict.detail


@pytest.mark.parametrize("mode", MODES)
def test_orphans_do_not_pile_up_across_a_submissions_tests(code, mode):
    """Three orphans per test over 40 tests: in the stdin runner, whose process outlives its
    tests, they were left to the submission's end and test 10's ``fork`` failed, where a
    process per test passed them all. Both modes now pass them all."""
    tests = [{"input": "3 0\n", "output": "ok\n"}] * 40
    verdict = code.verify(ORPHANS, tests, stdin_process=mode)
    assert verdict.correct and verdict.passed == 40, verdict.detail


def test_orphan_reaping_is_bounded_per_pass_and_collects_a_tracked_child(tmp_path):
    """One pass of ``reap_orphans`` reaps at most ``2 * processes`` (64 at least), so zombies
    made as fast as they are reaped cannot keep the supervisor from its clocks; the next pass
    takes the rest. A tracked child found among them gets its status, as ``reap`` records it.
    Run in a forked process: the supervisor reaps any child of its own process."""
    import os

    from rlvr.sandbox.code.rules.languages import get_language
    from rlvr.sandbox.code.rules.limits import Limits
    from rlvr.sandbox.code.running.pump import Child
    from rlvr.sandbox.code.running.runner import Supervisor

    pid = os.fork()
    if pid == 0:
        try:
            sup = Supervisor(get_language("python"), Limits(), None, False, str(tmp_path), None, False)
            kids = []
            for number in range(100):
                kid = os.fork()
                if kid == 0:
                    os._exit(7 if number == 0 else 0)
                kids.append(kid)
            for kid in kids:  # every one a zombie before the first pass
                while open(f"/proc/{kid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    pass
            sup.call_child = Child(kids[0], -1, 0.0, {})
            sup.reap_orphans()
            left = [kid for kid in kids if os.path.exists(f"/proc/{kid}")]
            assert len(left) == 100 - 64, len(left)
            assert sup.call_child.exited and os.WEXITSTATUS(sup.call_child.status) == 7
            sup.reap_orphans()
            assert not [kid for kid in kids if os.path.exists(f"/proc/{kid}")]
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_closed_standard_streams_are_restored_for_the_next_test(code):
    program = "x = int(input())\nwith open(1, 'w') as out:\n    out.write(f'{x * 2}\\n')\nimport os\nos.close(2)"
    assert code.verify(program, doubles(), stdin_process="submission").correct


def test_a_tests_garbage_is_freed_before_the_next(code):
    """Test k's globals (held by a cycle through a function's ``__globals__``) are collected at
    its end: four tests of 300 MiB each fit a 512 MiB sandbox."""
    program = "x = int(input())\nblock = bytearray(300 << 20)\ndef f():\n    return block\nprint(x * 2)"
    verdict = code.verify(program, doubles(4), stdin_process="submission", limits={"memory_mb": 512})
    assert verdict.correct, verdict.detail


def test_output_limits_and_a_large_input_behave_as_in_a_fresh_process(code):
    flood = "x = int(input())\nprint(x * 2)\nif x == 1:\n    print('y' * (3 << 20))"
    verdict = code.verify(flood, doubles(3), stdin_process="submission", compare="python", limits={"output_kb": 1024})
    assert (verdict.reason, verdict.first_failure) == ("output_limit", 1), verdict.detail
    big = "x" * (64 << 10)
    tests = [{"input": big + "\n", "output": f"{len(big)}\n"}] * 2
    # an input larger than file_kb cannot be a file in the sandbox: that test gets its own process
    verdict = code.verify("print(len(input()))", tests, stdin_process="submission", limits={"file_kb": 16})
    assert verdict.correct, verdict.detail
    # a small input, a large one (its own process: the runner, and a thread it left, are ended
    # first), then a small one again in a new runner
    leaves = "import sys, threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    mixed = [{"input": "ab\n", "output": "2\n"}, tests[0], {"input": "abc\n", "output": "3\n"}]
    verdict = code.verify(leaves + "print(len(input()))", mixed, stdin_process="submission", limits={"file_kb": 16})
    assert verdict.correct, verdict.detail


def test_compiled_languages_keep_a_process_per_test(code):
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    program = '#include <stdio.h>\nint main(){int x; scanf("%d",&x); printf("%d\\n", 2*x); return 0;}'
    assert code.verify(program, doubles(), language="c", stdin_process="submission").correct


def test_the_server_and_ray_items_take_the_option():
    from rlvr.sandbox.item_options import BadOption, check_code_options
    from rlvr.sandbox.service import CODE_OPTIONS

    assert "stdin_process" in CODE_OPTIONS
    check_code_options({"stdin_process": "submission"})
    with pytest.raises(BadOption, match="test or submission"):
        check_code_options({"stdin_process": "thread"})


def test_a_bad_setting_is_a_one_line_error(code, tmp_path, capsys):
    verdict = code.verify("print(1)", [{"input": "", "output": "1"}], stdin_process="thread")
    assert verdict.reason == "bad_input" and "stdin_process" in verdict.detail
    with pytest.raises(ValueError, match="stdin_process"):
        CodeGrader(stdin_process="thread")
    with pytest.raises(SystemExit):
        main(["grade", "--kind", "code", "--input", "x", "--output", "y", "--stdin-process", "thread"])
    assert "invalid choice" in capsys.readouterr().err


def test_rlvr_grade_takes_the_option_and_a_rows_own_setting_wins(tmp_path, capsys):
    counting = "import sys\nsys.seen = getattr(sys, 'seen', 0) + 1\ninput()\nprint(sys.seen)"
    tests = [{"input": "x\n", "output": f"{i}\n", "testtype": "stdin"} for i in (1, 2)]
    rows = [
        {"id": "shared", "completion": counting, "tests": tests},
        {"id": "own", "completion": counting, "tests": tests, "stdin_process": "test"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    argv = ["grade", "--kind", "code", "--input", str(src), "--output", str(out), "--no-progress", "--workers", "1"]
    assert main([*argv, "--stdin-process", "submission"]) == 0
    graded = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert graded["shared"]["correct"] and not graded["own"]["correct"]


@pytest.mark.slow
def test_livecodebench_verdicts_are_the_same_with_the_runner():
    """Every fast program of the LiveCodeBench fixture gets LiveCodeBench's verdict (or the
    named departure) with one process per submission, as with one per test."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_code_livecodebench import FIXTURE, check, grade

    grader = EvalGrader(workers=2, code_stdin_process="submission")
    assert grader.settings()["code_stdin_process"] == "submission"
    assert "code_stdin_process" not in EvalGrader(workers=1).settings()  # earlier fingerprints stay
    try:
        rows = [row for row in FIXTURE if not row["slow"]]
        check(rows, grade(grader, rows))
    finally:
        grader.close()
