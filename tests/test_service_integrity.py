"""Issue 28, classes 1, 3 and 8: code verdicts are never cached across calls, queue time is never
the program's time (honest items keep honest verdicts next to stalling ones), and reward paths
never show hidden expected values."""

import asyncio
import json
import threading
import time

import httpx
import pytest
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.grading import EvalGrader
from rlvr.sandbox.service import GradingService, parse_item
from rlvr.sandbox.serving.admission import JudgeSlots
from rlvr.sandbox.serving.client import RewardClient
from rlvr.sandbox.serving.server import ServerConfig, ServerState
from rlvr.sandbox.verdict import NOT_RUN, OVERRUN, UNVERIFIABLE_REASONS, Verdict, redact
from server_helpers import Server

GUESS = "import os\nprint(os.urandom(1)[0] % 3)\n"  # right one time in three
SECRET_STDIN = "7319024"
SECRET_CALL = 424242
SECRET_GOLD = r"\frac{12345"
LEAKY = [
    {"kind": "code", "completion": "print(0)", "tests": [{"input": "", "output": SECRET_STDIN}]},
    {
        "kind": "code",
        "completion": "def add(a, b):\n    return 0\n",
        "tests": [{"input": "1\n2", "output": str(SECRET_CALL), "testtype": "functional"}],
        "fn_name": "add",
    },
    {"kind": "math", "completion": r"\boxed{3}", "answer": SECRET_GOLD},
]
SECRETS = (SECRET_STDIN, str(SECRET_CALL), "12345")
#: Holds its judge for its whole budget: tests of 0.5 s CPU each until total_s is spent.
STALL = {
    "kind": "code",
    "completion": "while True:\n    pass\n",
    "tests": [{"input": "", "output": "1"}] * 40,
    "partial": True,
    "limits": {"time_s": 0.5, "wall_factor": 1, "wall_grace_s": 0, "total_s": 2},
}
HONEST = {"kind": "code", "completion": "print(int(input()) * 2)", "tests": [{"input": "21", "output": "42"}]}


def leaked(verdicts) -> list[str]:
    text = json.dumps([v.to_dict() if isinstance(v, Verdict) else v for v in verdicts])
    return [s for s in SECRETS if s in text]


# ---------------------------------------------------------------------------------------------
# class 1: no cross-call verdict cache for code
# ---------------------------------------------------------------------------------------------
def test_a_guessing_program_is_run_again_on_every_regrade():
    service = GradingService(workers=2)
    math_calls = []
    verify_math = service.math.verify_batch
    service.math.verify_batch = lambda batch, **kw: math_calls.append(len(batch)) or verify_math(batch, **kw)
    try:
        item = parse_item({"kind": "code", "completion": GUESS, "tests": [{"input": "", "output": "0"}]})
        rewards = [service.grade([item])[0].reward for _ in range(20)]
        math = parse_item({"kind": "math", "completion": r"\boxed{4}", "answer": "4"})
        first, second = service.grade([math])[0], service.grade([math])[0]
    finally:
        service.close()
    assert set(rewards) == {0.0, 1.0}, rewards  # all-equal has odds of 3e-4
    assert 1 <= sum(rewards) <= 19
    assert first == second and first.correct and math_calls == [1]  # math verdicts stay cached


# ---------------------------------------------------------------------------------------------
# class 8: hidden expected values never leave a reward path
# ---------------------------------------------------------------------------------------------
def test_redact_keeps_the_outcome_and_drops_the_text():
    v = Verdict(False, 0.25, "wrong_answer", "print(0)", 3.0, "code", "test 3: expected 7, got 0", 1, 4, 3)
    r = redact(v)
    assert r.detail == "wrong_answer; first failing test 3; 1/4 tests passed" and "7" not in r.detail
    assert (r.reward, r.reason, r.passed, r.total, r.first_failure, r.extracted) == (
        0.25,
        "wrong_answer",
        1,
        4,
        3,
        "print(0)",
    )
    assert redact(r) == r
    not_run = Verdict(False, 0.0, "sandbox_error", None, 0.0, "code", NOT_RUN, 0, 0, None)
    assert redact(not_run) is not_run


def test_reward_paths_redact_and_evaluation_keeps_details_when_asked():
    items = [parse_item(raw, i) for i, raw in enumerate(LEAKY)]
    reward_side = GradingService(workers=1)
    eval_side = GradingService(workers=1, test_details=True)
    try:
        redacted, full = reward_side.grade(items), eval_side.grade(items)
    finally:
        reward_side.close()
        eval_side.close()
    assert [v.reason for v in redacted] == [v.reason for v in full] == ["wrong_answer", "wrong_answer", "grader_error"]
    assert [v.first_failure for v in redacted] == [v.first_failure for v in full]
    assert leaked(redacted) == []
    assert leaked(full) == list(SECRETS)  # without redaction every one of them shows


def test_eval_grader_redacts_unless_the_run_keeps_test_details():
    problem = Problem("p1", "custom", "code", "print 42", {"tests": [{"input": "", "output": SECRET_STDIN}]})
    trainer_side, logging_side = EvalGrader(workers=1), EvalGrader(workers=1, test_details=True)
    try:
        assert leaked(trainer_side.grade([(problem, "print(0)")])) == []
        assert leaked(logging_side.grade([(problem, "print(0)")])) == [SECRET_STDIN]
    finally:
        trainer_side.close()
        logging_side.close()


# ---------------------------------------------------------------------------------------------
# class 3: scheduling, with a stand-in service whose items sleep as long as they say
# ---------------------------------------------------------------------------------------------
class SleepyService:
    """Items' completions are seconds to sleep on a "judge"; ``hold`` bounds each one."""

    def __init__(self, judges: int, hold: float):
        self.code = type("Code", (), {"workers": judges})()
        self.hold = hold
        self.started: list[str] = []

    def hold_s(self, item) -> float:
        return self.hold

    def grade(self, items):
        self.started.append(items[0].id)
        time.sleep(float(items[0].completion))
        return [Verdict(True, 1.0, "ok", None, 0.0, "code", "", 1, 1, None)]

    def restarts(self):
        return {}


def sleepy_items(*seconds: float, tag: str = "") -> list:
    return [parse_item({**HONEST, "id": f"{tag}{i}", "completion": str(s)}, i) for i, s in enumerate(seconds)]


def run_state(service, scenario):
    async def main():
        state = ServerState(ServerConfig(), service)
        await state.start()
        try:
            return await scenario(state)
        finally:
            await asyncio.to_thread(state.stop)

    return asyncio.run(main())


def test_waiting_is_never_the_programs_time():
    service = SleepyService(judges=1, hold=5.0)

    async def scenario(state):
        start = time.monotonic()
        rows = await state.grade(sleepy_items(1.0, 0.1), time.monotonic() + 0.3)
        return rows, time.monotonic() - start

    rows, took = run_state(service, scenario)
    # the first item started before the deadline: it keeps its own limits and its verdict
    assert rows[0]["reason"] == "ok" and 0.9 < took < 3
    # the second waited for the only judge until the deadline: never run, maskable, and it says so
    assert rows[1]["reason"] in UNVERIFIABLE_REASONS and rows[1]["detail"] == NOT_RUN
    assert service.started == ["0"]


def test_an_item_past_its_budget_is_a_scored_time_limit():
    service = SleepyService(judges=1, hold=0.5)

    async def scenario(state):
        first = await state.grade(sleepy_items(2.0), time.monotonic() + 10)
        second = await state.grade(sleepy_items(0.0), time.monotonic() + 10)  # waits for the judge to free
        return first, second

    first, second = run_state(service, scenario)
    assert first[0]["reason"] == "time_limit" and first[0]["detail"] == OVERRUN
    assert second[0]["reason"] == "ok"


def test_requests_take_turns_for_the_judges():
    service = SleepyService(judges=1, hold=5.0)

    async def scenario(state):
        hostile = asyncio.ensure_future(state.grade(sleepy_items(0.3, 0.3, 0.3, 0.3, tag="h"), time.monotonic() + 30))
        await asyncio.sleep(0.1)
        honest = await state.grade(sleepy_items(0.0, tag="ok"), time.monotonic() + 30)
        await hostile
        return honest

    honest = run_state(service, scenario)
    assert honest[0]["reason"] == "ok"
    assert service.started.index("ok0") == 2  # after the hostile item running and the next one, not after all


def test_a_withdrawn_waiter_does_not_lose_a_slot():
    async def main():
        slots = JudgeSlots(1)
        held = await slots.acquire(1, time.monotonic() + 1, 1.0)
        waiter = asyncio.ensure_future(slots.acquire(2, time.monotonic() + 10, 1.0))
        await asyncio.sleep(0.01)
        waiter.cancel()
        timed_out = await slots.acquire(3, time.monotonic() + 0.05, 1.0)
        slots.release(held)
        again = await slots.acquire(4, time.monotonic() + 0.05, 1.0)
        return held, timed_out, again, slots.busy, slots.waiting

    held, timed_out, again, busy, waiting = asyncio.run(main())
    assert held is not None and timed_out is None and again is not None and (busy, waiting) == (1, 0)


# ---------------------------------------------------------------------------------------------
# class 3 and 8 through `rlvr serve --workers 2`
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server():
    s = Server("--request-timeout", "8")
    yield s
    s.stop()


def post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=120)


def stalls_in_background(server, n: int, total_s: float) -> tuple[threading.Thread, dict]:
    """``n`` stalling items in one request, on another thread; returns it and its result."""
    stall = {**STALL, "limits": {**STALL["limits"], "total_s": total_s}}
    out: dict = {}

    def run():
        start = time.monotonic()
        out["rows"] = post(server, "/v1/grade", {"items": [stall] * n}).json()["results"]
        out["took"] = time.monotonic() - start

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    return thread, out


@pytest.mark.slow
def test_honest_item_keeps_its_verdict_behind_stalling_ones(server):
    thread, stalls = stalls_in_background(server, 2, total_s=2)
    start = time.monotonic()
    honest = post(server, "/v1/grade", {"items": [HONEST]}).json()["results"][0]
    waited = time.monotonic() - start
    thread.join(60)
    assert honest["reason"] == "ok", honest
    assert waited < 2 + 5  # it ran as soon as a stalling item's budget was spent
    assert [r["reason"] for r in stalls["rows"]] == ["time_limit", "time_limit"]
    assert stalls["took"] < 2 + 5  # the judges were held within the limits + 5 s


@pytest.mark.slow
def test_honest_item_that_never_ran_is_masked_not_scored(server):
    thread, stalls = stalls_in_background(server, 2, total_s=12)  # longer than the server's 8 s deadline
    cut = post(server, "/v1/grade", {"items": [HONEST], "timeout": 1}).json()["results"][0]
    label = json.dumps({"inputs": ["21"], "outputs": ["42"]})
    busy = httpx.post(
        server.url + "/get_reward",
        json={"query": ["```python\nprint(int(input()) * 2)\n```"], "prompts": [""], "labels": [label]},
        timeout=120,
    )
    thread.join(60)
    assert cut["reason"] == "sandbox_error" and cut["detail"] == NOT_RUN and cut["reward"] == 0.0
    assert busy.status_code == 503 and int(busy.headers["Retry-After"]) >= 1
    assert [r["reason"] for r in stalls["rows"]] == ["time_limit", "time_limit"]
    assert stalls["took"] < 12 + 5
    again = post(server, "/v1/grade", {"items": [HONEST], "timeout": 1}).json()["results"][0]
    assert again["reason"] == "ok"


def test_client_sends_items_that_never_ran_again(server):
    thread, _ = stalls_in_background(server, 2, total_s=2)
    rows = RewardClient(server.url, timeout=0.5, backoff=1.0).grade([HONEST, {**HONEST, "id": "b"}])
    thread.join(60)
    assert [r["reason"] for r in rows] == ["ok", "ok"]


def test_server_answers_carry_no_expected_values(server):
    rows = post(server, "/v1/grade", {"items": LEAKY}).json()["results"]
    assert [r["reason"] for r in rows] == ["wrong_answer", "wrong_answer", "grader_error"]
    assert leaked(rows) == []
