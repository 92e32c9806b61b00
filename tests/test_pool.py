"""The worker pool: hard deadlines by SIGKILL, CPU budgets with a wall backstop, replacement,
thread safety, no leaks."""

import os
import threading
import time

import pytest
from rlvr.sandbox.pool import MAX_RENEWALS, Deadline, WorkerPool, WorkerTimeout, backstop, process_cpu_s


def _env(**extra):
    path = os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture
def pool():
    p = WorkerPool("stall_worker", size=2, env=_env())
    yield p
    p.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def test_echo(pool):
    assert pool.call({"echo": 5}, 5)["echo"] == 5


def test_hung_worker_is_killed_and_replaced(pool):
    pool.warm_up()
    before = set(pool.pids())
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        pool.call({"sleep": 30}, 0.3)
    assert time.monotonic() - start < 2
    assert pool.restarts == 1
    dead = before - set(pool.pids())
    assert len(dead) == 1 and not _alive(dead.pop())
    assert pool.call({"echo": "after"}, 10)["echo"] == "after"


def test_crashed_worker_is_replaced(pool):
    from rlvr.sandbox.pool import WorkerCrashed

    with pytest.raises(WorkerCrashed):
        pool.call({"exit": 3}, 5)
    assert pool.call({"echo": 1}, 10)["echo"] == 1


def test_concurrent_callers(pool):
    results = []
    lock = threading.Lock()

    def work(i):
        r = pool.call({"echo": i}, 10)["echo"]
        with lock:
            results.append(r)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(20))


def test_map_keeps_order_and_isolates_timeouts(pool):
    out = pool.map([{"echo": 1}, {"sleep": 30}, {"echo": 3}], 0.5)
    assert out[0]["echo"] == 1 and isinstance(out[1], WorkerTimeout) and out[2]["echo"] == 3


def test_close_leaves_no_processes():
    p = WorkerPool("stall_worker", size=2, env={**os.environ, "PYTHONPATH": os.path.dirname(__file__)})
    p.warm_up()
    pids = p.pids()
    p.close()
    time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def test_cpu_budget_kills_a_spinning_worker_once_it_has_used_the_budget(pool):
    pool.warm_up()
    start = time.monotonic()
    with pytest.raises(WorkerTimeout) as stopped:
        pool.call({"spin": 30}, Deadline.cpu(0.3))
    assert stopped.value.clock == "cpu" and 0.3 <= stopped.value.cpu_s < 1.0
    assert time.monotonic() - start < backstop(0.3) and pool.restarts == 1


def test_cpu_budget_does_not_count_time_the_worker_did_not_run(pool):
    # a sleeping worker uses no CPU, like one the scheduler keeps waiting on a busy machine
    assert pool.call({"sleep": 0.6, "echo": "late"}, Deadline.cpu(0.2))["echo"] == "late"
    assert pool.restarts == 0


def test_wall_backstop_stops_a_worker_that_uses_no_cpu(pool):
    with pytest.raises(WorkerTimeout) as stopped:
        pool.call({"sleep": 30}, Deadline(wall_s=0.5, cpu_s=0.3))
    assert stopped.value.clock == "wall" and stopped.value.cpu_s < 0.3 and stopped.value.wall_s >= 0.5


def test_an_idle_warm_up_step_is_not_charged_to_the_request_that_waits_for_it():
    p = WorkerPool("stall_worker", size=1, env=_env(STALL_IDLE_SPIN="0.4"))
    try:
        p.warm_up()
        time.sleep(0.1)  # the worker is now inside a 0.4 s idle step
        for i in range(3):
            assert p.call({"spin": 0.05, "echo": i}, Deadline.cpu(0.25))["echo"] == i
        assert p.restarts == 0
    finally:
        p.close()


def test_a_worker_may_renew_its_budget_a_bounded_number_of_times(pool):
    assert pool.call({"spin": 0.15, "renewals": 2, "echo": "ok"}, Deadline.cpu(0.25))["echo"] == "ok"
    with pytest.raises(WorkerTimeout) as stopped:
        pool.call({"spin": 0.15, "renewals": MAX_RENEWALS + 3}, Deadline.cpu(0.25))
    assert stopped.value.clock == "cpu"


def test_backstop_is_several_times_the_budget():
    assert backstop(1.0) >= 10 and backstop(0.01) >= 5
    assert Deadline.cpu(2.0) == Deadline(wall_s=backstop(2.0), cpu_s=2.0)


def test_process_cpu_clock_reads_another_process():
    import subprocess
    import sys

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time() + 0.2\nwhile time.process_time() < t: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 20
        while (process_cpu_s(child.pid) or 0) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.2 <= process_cpu_s(child.pid) < 1.0
    finally:
        child.kill()
        child.wait()
