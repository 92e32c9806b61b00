"""The spare sandbox a zygote builds ahead, and the limits it is built for.

A zygote answers a judge's request with a sandbox built before the request came (the spare)
when that sandbox was built for the same language and limits. ``total_s`` is not among them:
the supervisor reads it from the judge's first frame (``LATE_LIMITS``), so EvalPlus's
per-task ``total_s`` no longer throws a third of HumanEval+'s spares away. These tests pin that
the spare is used across ``total_s``, and that each submission still gets its own.
"""

import os

import pytest
from rlvr.sandbox.code.isolation.primitives import isolation_available
from rlvr.sandbox.code.isolation.zygote import Zygote, setup_key
from rlvr.sandbox.code.rules.limits import LATE_LIMITS
from rlvr.sandbox.code.verify import CodeGrader
from rlvr.sandbox.wire import read_frame, write_frame

RLIMIT = "resource.getrlimit(resource.RLIMIT_CPU)[0]"
#: Each path whose long-lived process has the submission's ``total_s`` as its CPU backstop: the
#: call child, the per-submission stdin runner, and the tester of assert-style tests.
BACKSTOP_PROBES = {
    "calls": lambda n: (
        f"import resource\n\ndef f():\n    return {RLIMIT}\n",
        [{"args": [], "expected": n}],
        {"fn_name": "f"},
    ),
    "stdin runner": lambda n: (
        f"import resource\nprint({RLIMIT})\n",
        [{"input": "", "output": str(n)}] * 2,
        {"stdin_process": "submission"},
    ),
    "tester": lambda n: (
        "def f():\n    return 1\n",
        [{"testtype": "assert", "code": f"import resource\nassert f() == 1 and {RLIMIT} == {n}"}],
        {"fn_name": "f"},
    ),
}


def _setup(**limits: float) -> dict:
    return {"language": "python", "limits": {"time_s": 2.0, "memory_mb": 256, **limits}}


def test_the_key_leaves_out_only_the_late_limits():
    assert LATE_LIMITS == ("total_s",)
    assert setup_key(_setup(total_s=66.0)) == setup_key(_setup(total_s=69.0)) == setup_key(_setup())
    assert setup_key(_setup(time_s=3.0)) != setup_key(_setup())
    assert setup_key(_setup(memory_mb=512)) != setup_key(_setup())
    assert setup_key({**_setup(), "language": "cpp"}) != setup_key(_setup())


def test_a_spare_built_for_another_total_s_serves_the_next_request():
    """The zygote's own bookkeeping, without isolation: the sandbox handed out for a request
    with another ``total_s`` is the spare built before it (before: thrown away, built anew)."""
    zygote = Zygote(isolated=False)
    handed: list[int] = []

    def open_(setup: dict) -> int:
        reply, fds = zygote.open(setup, setup_key(setup))
        for fd in fds:  # as the zygote's loop does once they are sent: later forks hold none
            os.close(fd)
        handed.append(reply["pid"])
        return reply["pid"]

    def refill(setup: dict) -> int:
        zygote.refill(setup, setup_key(setup))
        assert zygote.spare is not None
        return zygote.spare[1]["pid"]

    try:
        open_(_setup(total_s=66.0))
        spare = refill(_setup(total_s=66.0))
        assert open_(_setup(total_s=69.0)) == spare
        spare = refill(_setup(total_s=69.0))
        assert open_(_setup(time_s=3.0, total_s=69.0)) != spare  # another time_s: not the spare
    finally:
        _close(zygote, handed)


def _close(zygote: Zygote, handed: list[int]) -> None:
    """Reap the sandboxes handed out (their control pipes are closed: they exit), then close
    the zygote."""
    for pid in handed:
        zygote.reap(pid)
    zygote.close()


@pytest.mark.parametrize("late", [None, {"total_s": -1}, {"total_s": "60"}, {}])
def test_a_supervisor_without_its_late_limits_fails_closed(late):
    """A first frame without valid ``LATE_LIMITS`` ends the sandbox with a fatal report (the
    judge's ``sandbox_error``), never a run under the limits it was built with."""
    zygote = Zygote(isolated=False)
    setup = _setup(total_s=66.0)
    reply, fds = zygote.open(setup, setup_key(setup))
    try:
        ctl, res, _ = fds
        frame = {"files": {"solution.py": "print(1)"}, "entry": None, **({} if late is None else {"late": late})}
        write_frame(ctl, frame)
        header, _ = read_frame(res)
        assert "fatal" in header and "compile" not in header, header
    finally:
        for fd in fds:
            os.close(fd)
        _close(zygote, [reply["pid"]])


@pytest.mark.parametrize("path", sorted(BACKSTOP_PROBES))
@pytest.mark.parametrize("isolated", [True, False])
def test_each_submission_gets_its_own_total_s_though_served_by_a_spare(isolated, path, monkeypatch):
    """One judge, submissions whose ``total_s`` alternate: each is served by the spare built
    for the one before, and its long-lived process's CPU backstop (``RLIMIT_CPU``) is still its
    own ``total_s``, not the spare's."""
    if isolated and not isolation_available()[0]:
        pytest.skip("needs the sandbox's isolation (root, namespaces)")
    if not isolated:
        if path == "stdin runner":
            pytest.skip("the per-submission stdin runner exists only isolated (unsafe: a process per test)")
        monkeypatch.setenv("RLVR_SANDBOX_ISOLATION", "off")  # ``unsafe`` alone still isolates where it can
    with CodeGrader(workers=1, unsafe=not isolated) as grader:
        for total_s in (7, 13, 7, 21):
            program, tests, options = BACKSTOP_PROBES[path](total_s)
            verdict = grader.verify(program, tests, limits={"total_s": float(total_s)}, **options)
            assert verdict.correct, (path, total_s, verdict.detail)
