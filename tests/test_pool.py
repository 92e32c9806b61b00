"""The worker pool: hard deadlines by SIGKILL, replacement, thread safety, no leaks."""

import os
import threading
import time

import pytest

from sandbox.pool import WorkerPool, WorkerTimeout


@pytest.fixture
def pool():
    p = WorkerPool(
        "stall_worker",
        size=2,
        env={**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
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
    from sandbox.pool import WorkerCrashed

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
