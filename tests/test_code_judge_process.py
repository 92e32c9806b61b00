"""The judge process itself: what it starts with, and what it runs on."""

import os

from rlvr.sandbox.code.verify import CodeGrader


def test_the_judges_numpy_runs_on_one_thread():
    """A tolerance comparison imports numpy in the judge; OpenBLAS's pool would keep a second
    thread spinning through each small call (it doubled ``numpy.allclose``'s CPU)."""
    with CodeGrader(workers=1) as grader:
        grader.warm_up()
        (pid,) = grader.pool.pids()
        environ = dict(item.split("=", 1) for item in open(f"/proc/{pid}/environ").read().split("\0") if "=" in item)
        assert {environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")} == {"1"}
        threads = len(os.listdir(f"/proc/{pid}/task"))
        verdict = grader.verify(
            "```python\ndef f(x):\n    return [x + 1e-9, 0.5]\n```",
            [{"args": [1.0], "expected": [1.0, 0.5]}],
            fn_name="f",
            compare={"rule": "evalplus", "atol": 1e-6},
        )
        assert verdict.correct
        assert "numpy" in open(f"/proc/{pid}/maps").read()
        assert len(os.listdir(f"/proc/{pid}/task")) == threads
