"""The spare sandbox a zygote builds ahead, and the limits it is built for.

A zygote answers a judge's request with a sandbox built before the request came (the spare)
when that sandbox was built for the same language and limits. ``total_s`` is not among them:
the supervisor reads it from the judge's first frame (``zygote.LATE_LIMITS``), so EvalPlus's
per-task ``total_s`` no longer throws a third of HumanEval+'s spares away. These tests pin that
the spare is used across ``total_s``, and that each submission still gets its own.
"""

import os

import pytest
from rlvr.sandbox.code.isolation.primitives import isolation_available
from rlvr.sandbox.code.isolation.zygote import LATE_LIMITS, Zygote, setup_key
from rlvr.sandbox.code.verify import CodeGrader

RLIMIT_PROGRAM = "import resource\n\ndef f():\n    return resource.getrlimit(resource.RLIMIT_CPU)[0]\n"


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
    handed: list[list[int]] = []
    try:
        first = _setup(total_s=66.0)
        reply, fds = zygote.open(first, setup_key(first))
        handed.append(fds)
        zygote.refill(first, setup_key(first))
        assert zygote.spare is not None
        spare_pid = zygote.spare[1]["pid"]
        second = _setup(total_s=69.0)
        reply, fds = zygote.open(second, setup_key(second))
        handed.append(fds)
        assert reply["pid"] == spare_pid
        third = _setup(time_s=3.0, total_s=69.0)
        zygote.refill(second, setup_key(second))
        spare_pid = zygote.spare[1]["pid"]
        reply, fds = zygote.open(third, setup_key(third))
        handed.append(fds)
        assert reply["pid"] != spare_pid  # another time_s: not the spare's sandbox
    finally:
        for fds in handed:
            for fd in fds:
                os.close(fd)
        zygote.close()


@pytest.mark.parametrize("isolated", [True, False])
def test_each_submission_gets_its_own_total_s_though_served_by_a_spare(isolated):
    """One judge, submissions whose ``total_s`` alternate: each is served by the spare built
    for the one before, and its call child's CPU backstop (``RLIMIT_CPU``) is still its own
    ``total_s``, not the spare's."""
    if isolated and not isolation_available()[0]:
        pytest.skip("needs the sandbox's isolation (root, namespaces)")
    with CodeGrader(workers=1, unsafe=not isolated) as grader:
        for total_s in (7.0, 13.0, 7.0, 21.0):
            verdict = grader.verify(
                RLIMIT_PROGRAM, [{"args": [], "expected": int(total_s)}], fn_name="f", limits={"total_s": total_s}
            )
            assert verdict.correct, (total_s, verdict.detail)
