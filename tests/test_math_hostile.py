"""Hostile inputs: host-side facts after grading, deadlines from any caller, isolation."""

import asyncio
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
from rlvr.sandbox import MathGrader, verify_math

INJECTIONS = [
    (r"\boxed{__import__('pathlib').Path('pwned_marker').touch()}", "0", "pwned_marker"),
    (r"\boxed{[open('pwnedtwo','w').close(), 1]}", r"\begin{pmatrix}1\\ 2\end{pmatrix}", "pwnedtwo"),
    (r"\boxed{[open('pwnedthree','w').close(), 1]}", r"[1, 2]", "pwnedthree"),
    (r"\boxed{\text{__import__('os').system('touch pwnedfour')}}", "1", "pwnedfour"),
    (r"\boxed{x}", r"__import__('pathlib').Path('pwnedfive').touch()", "pwnedfive"),
]


def test_model_text_is_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    grader = MathGrader(workers=1)
    try:
        verdicts = grader.verify_batch([{"completion": c, "answer": g} for c, g, _ in INJECTIONS])
    finally:
        grader.close()
    assert not any(v.correct for v in verdicts)
    for _, _, marker in INJECTIONS:
        assert not (tmp_path / marker).exists(), marker
    assert list(tmp_path.iterdir()) == []


def test_worker_restarts_are_not_needed_for_guarded_hostile_input():
    grader = MathGrader(workers=1)
    try:
        hostile = [r"\boxed{9^{9^{9^{9}}}}", r"\boxed{(10^{20})!}", r"\boxed{2^{2^{20}}}", r"\boxed{10^{10^{10}}}"]
        verdicts = grader.verify_batch([{"completion": c, "answer": "1"} for c in hostile])
        assert [v.reason for v in verdicts] == ["unparseable"] * 4
        assert grader.pool.restarts == 0
    finally:
        grader.close()


def test_deadline_gives_timeout_verdict_then_next_item_is_graded():
    grader = MathGrader(workers=1, timeout=0.02)
    try:
        grader.pool.warm_up()
        slow = grader.verify(
            r"\boxed{\frac{\omega_{n}^{2}}{\sqrt{1-\zeta^{2}}} e^{-\zeta \omega_{n} t} \lfloor \sin (\omega_{n} "
            r"\sqrt{1-\zeta^{2}} t) \rfloor}",
            r"\lfloor \omega_{n} t \rfloor",
        )
        assert slow.reason == "timeout" and not slow.correct
        assert slow.elapsed_ms < 20 + 250
        honest = grader.verify(r"\boxed{2\sqrt{3}}", r"\sqrt{12}", timeout=10)
        assert honest.correct
    finally:
        grader.close()


def test_a_worker_the_scheduler_keeps_waiting_is_not_timed_out():
    """The deadline is the worker's CPU time: a worker stopped (as a starved one is, on a busy
    machine) for three times its budget still gives its verdict."""
    import os
    import signal

    grader = MathGrader(workers=1, timeout=0.5)
    try:
        grader.pool.warm_up()
        worker = grader.pool.pids()[0]
        os.kill(worker, signal.SIGSTOP)
        resume = threading.Timer(1.5, os.kill, (worker, signal.SIGCONT))
        resume.start()
        try:
            verdict = grader.verify(r"\boxed{\pi r^2}", r"r^{2}\pi")
        finally:
            resume.join()
        assert verdict.correct and verdict.reason == "ok", verdict
        assert grader.pool.restarts == 0
    finally:
        grader.close()


def test_soft_cpu_timer_turns_a_slow_comparison_into_a_timeout_verdict(monkeypatch):
    import signal

    import rlvr.sandbox.math.symbolic  # noqa: F401  (as a real worker does: never let the timer fire mid-import)
    from rlvr.sandbox.math import worker

    previous = signal.signal(signal.SIGPROF, worker._on_soft_timeout)
    try:
        request = {
            "answer": r"\frac{x^{7}+3x^{5}-2}{(x-3)^{4}} + \sin(x)\cos(x)^{3} - \lfloor x \rfloor",
            "gold": {"answer": r"\frac{x^{6}-1}{(x+2)^{3}} + \lfloor 2x \rfloor"},
            "policy": {"name": "math"},
            "soft_timeout": 0.002,
        }
        monkeypatch.setattr(worker, "_parses", worker.WARM_AFTER_PARSES)
        assert worker.handle(request)["reason"] == "timeout"
        # a worker still warming its parser caches tries again on fresh budgets; a warm one not
        worker._parses = 0
        assert f"{worker.COLD_RETRIES + 1} tries" in worker.handle(request)["detail"]
        worker._parses = worker.WARM_AFTER_PARSES
        assert "tries" not in worker.handle(request)["detail"]
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_work_the_timer_interrupted_leaves_nothing_in_the_caches(monkeypatch):
    """The timer's exception can be swallowed (a bare ``except:`` in a library, or a ``gc``
    callback it lands in) and the comparison then finishes: its verdict is not trusted, and what it
    cached must not answer the cold retry or a later item (a flaky timeout became wrong_answer
    this way, from a cache the interrupted try had filled)."""
    from rlvr.sandbox.math import judge as judge_module
    from rlvr.sandbox.math import worker
    from rlvr.sandbox.math.symbolic import to_sympy

    def interrupted(answer, gold, policy, symbolic=False):
        to_sympy("x^2 + 1")
        judge_module.parse_gold("x^2 + 1")
        worker._fired = True  # the handler ran; its exception never reached us
        return judge_module.judge(answer, gold, policy, symbolic=symbolic)

    monkeypatch.setattr(worker, "judge", interrupted)
    monkeypatch.setattr(worker, "_parses", worker.WARM_AFTER_PARSES)
    request = {"answer": "x^2+1", "gold": {"answer": "1+x^2"}, "policy": {"name": "math"}}
    assert worker.handle(request)["reason"] == "timeout"
    assert to_sympy.cache_info().currsize == 0 and judge_module.parse_gold.cache_info().currsize == 0
    monkeypatch.setattr(worker, "judge", judge_module.judge)
    assert worker.handle(request)["reason"] == "ok"

    def stopped(answer, gold, policy, symbolic=False):
        to_sympy("x^3 + 1")
        worker._fired = True
        raise worker.SoftTimeout()  # the interrupt reached us: nothing half-done was stored

    monkeypatch.setattr(worker, "judge", stopped)
    assert worker.handle(request)["reason"] == "timeout"
    assert to_sympy.cache_info().currsize > 0


def test_megabyte_completions_are_bounded():
    start = time.perf_counter()
    big = verify_math("lorem ipsum " * 100_000 + r"\boxed{42}", "42")
    boxes = verify_math(r"\boxed{1}" * 100_000, "1")
    braces = verify_math("{" * 1_000_000, "1")
    assert big.correct and boxes.correct and not braces.correct
    assert time.perf_counter() - start < 5


def _grade_in_child(args):
    completion, gold = args
    return verify_math(completion, gold).correct


def test_works_from_threads():
    items = [
        (r"\boxed{2\sqrt{3}}", r"\sqrt{12}", True),
        (r"\boxed{5}", "6", False),
        (r"\boxed{x \le 3}", r"(-\infty,3]", True),
    ] * 8
    with ThreadPoolExecutor(max_workers=8) as executor:
        results = list(executor.map(lambda c: verify_math(c[0], c[1]).correct, items))
    assert results == [c[2] for c in items]


def test_works_from_non_main_thread_without_signals():
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("v", verify_math(r"\boxed{\frac{\pi}{4}}", r"\arctan 1")))
    thread.start()
    thread.join(30)
    assert out["v"].correct


def test_works_from_asyncio():
    async def main():
        return await asyncio.gather(*(asyncio.to_thread(verify_math, r"\boxed{1+2i}", "2i+1") for _ in range(4)))

    assert all(v.correct for v in asyncio.run(main()))


def test_works_inside_daemonic_process_pool():
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(_grade_in_child, [(r"\boxed{2\sqrt{3}}", r"\sqrt{12}"), (r"\boxed{7}", "8")])
    assert results == [True, False]


def test_works_inside_spawned_process_pool():
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as executor:
        results = list(executor.map(_grade_in_child, [(r"\boxed{x^2-1}", "(x-1)(x+1)"), (r"\boxed{3}", "4")]))
    assert results == [True, False]


@pytest.mark.parametrize("workers", [1, 2])
def test_deterministic_across_worker_counts_and_order(workers):
    items = [
        {"completion": r"\boxed{2\sqrt{3}}", "answer": r"\sqrt{12}"},
        {"completion": r"\boxed{(2, 5)}", "answer": "[2, 5]"},
        {"completion": r"\boxed{x \le 3}", "answer": r"(-\infty,3]"},
        {"completion": r"\boxed{0.333}", "answer": r"\frac13"},
        {"completion": r"\boxed{\frac{x^2-1}{x-1}}", "answer": "x+1"},
        {"completion": r"\boxed{1, 2}", "answer": "2, 1"},
    ] * 3
    single = MathGrader(workers=1)
    try:
        reference = [(v.correct, v.reason, v.extracted) for v in single.verify_batch(items)]
    finally:
        single.close()
    grader = MathGrader(workers=workers)
    try:
        forward = [(v.correct, v.reason, v.extracted) for v in grader.verify_batch(items)]
        backward = [(v.correct, v.reason, v.extracted) for v in grader.verify_batch(items[::-1])][::-1]
    finally:
        grader.close()
    assert forward == reference == backward
