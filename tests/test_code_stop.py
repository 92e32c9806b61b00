"""How a sandbox ends: the verdict waits for the submission's processes, not for PID 1's exit.

On ``stop``, an isolated sandbox's PID 1 kills and reaps every other process of its PID
namespace (orphans are reparented to it, so that is all of the submission's), then says
``stopped``; the judge returns the verdict on that frame and hands the sandbox back to its
zygote, which reaps PID 1 once it has exited (tearing its namespaces down takes milliseconds)
and checks the slot's cgroup before the slot serves another sandbox. Each test here fails when
one of those steps is missing.
"""

import errno
import os
import re
import select
import signal
import time
import traceback

import pytest
from code_helpers import sandbox_processes, zombies
from rlvr.sandbox.code.isolation.primitives import isolation_available
from rlvr.sandbox.code.isolation.zygote import Zygote, setup_key
from rlvr.sandbox.code.verify import CodeGrader

needs_isolation = pytest.mark.skipif(
    not isolation_available()[0], reason="needs the sandbox's isolation (root, namespaces)"
)

#: A call-based program whose module leaves two processes behind, alive until the sandbox
#: stops: a child holding 400 MiB it has written (its teardown takes milliseconds) and a
#: grandchild in its own session whose parent has exited (reparented to PID 1).
LEAVES_PROCESSES = """
import os, time

ready_r, ready_w = os.pipe()
if os.fork() == 0:
    block = bytearray(400 << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    os.write(ready_w, b"x")
    time.sleep(60)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.read(ready_r, 1)

def f(x):
    return x
"""

UNSAFE_PROBE = "import os\n\ndef f(x):\n    return os.getppid() != 1\n"
SETUP = {"language": "python", "limits": {"time_s": 2.0}}
NETWORK_NAMESPACE = "import os\nprint(os.readlink('/proc/self/ns/net'))\n"


@pytest.fixture(scope="module")
def grader():
    with CodeGrader(workers=1) as grader:
        grader.warm_up()
        yield grader


@needs_isolation
def test_the_verdict_comes_once_every_process_the_submission_left_is_reaped(grader):
    """No process of the submission, running or a zombie, is left when the verdict returns
    (checked at once, no grace): PID 1 kills and reaps them before it says it stopped."""
    for _ in range(3):
        verdict = grader.verify(
            LEAVES_PROCESSES,
            [{"args": [3], "expected": 3}],
            fn_name="f",
            limits={"memory_mb": 640, "processes": 8},
        )
        assert verdict.correct, verdict.detail
        assert not sandbox_processes()


@needs_isolation
def test_a_released_sandbox_is_reaped_without_another_request_and_its_slot_reused(grader):
    """Sandboxes released by the judge are reaped by their zygote as soon as PID 1 exits (no
    zombie a second later, with no request after the last), and their slots (the network
    namespaces here) serve the next sandboxes instead of new ones being made."""
    seen = set()
    for _ in range(12):
        verdict = grader.verify(NETWORK_NAMESPACE, [{"input": "", "output": "x"}])
        match = re.search(r"net:\[\d+\]", verdict.detail)
        assert match, verdict.detail
        seen.add(match.group(0))
    assert not zombies(grace_s=2.0)  # the zygote's idle reap would come only after 5 s
    assert len(seen) <= 4, seen  # the sandbox, the spare, one or two being reaped (12 if never)


def test_a_sandbox_that_never_says_it_stopped_is_still_ended_before_the_verdict(monkeypatch):
    """Without isolation PID 1 does not say ``stopped`` (a process can leave its session), so the
    judge waits for its exit and for the zygote's reaping, as before: no zombie at the verdict,
    checked at once (isolated, the released PID 1 may still be exiting then)."""
    monkeypatch.setenv("RLVR_SANDBOX_ISOLATION", "off")
    with CodeGrader(workers=1, unsafe=True) as grader:
        for _ in range(5):
            # Its parent is the host's supervisor process (isolated, it would be PID 1).
            verdict = grader.verify(UNSAFE_PROBE, [{"args": [2], "expected": True}], fn_name="f")
            assert verdict.correct, verdict.detail
            assert not zombies(grace_s=0.0)


def _exited_sandbox(zygote) -> int:
    """A sandbox from ``zygote`` whose supervisor is told nothing and whose pipes are closed: it
    exits on its own."""
    reply, fds = zygote.open(SETUP, setup_key(SETUP))
    for fd in fds:
        os.close(fd)
    return reply["pid"]


def _refused(pid: int, flags: int = 0) -> int:
    raise OSError(errno.EMFILE, "too many open files")


def _assert_reaped(zygote, pid: int, why: str) -> None:
    """``pid`` is out of the zygote's books and no longer its child (reaped, not a zombie)."""
    assert pid not in zygote.live and not zygote.released
    try:
        os.waitpid(pid, os.WNOHANG)
        raise AssertionError(why)
    except ChildProcessError:
        pass


def _until(done, zygote) -> None:
    deadline = time.monotonic() + 10
    while not done() and time.monotonic() < deadline:
        zygote.reap_exited()
        time.sleep(0.01)


def _zygote_books() -> None:
    zygote = Zygote(isolated=False)
    try:
        pid = _exited_sandbox(zygote)
        zygote.release(pid)
        assert list(zygote.released.values()) == [pid]
        ready, _, _ = select.select(list(zygote.released), [], [], 10.0)
        zygote.reap_released(ready)
        _assert_reaped(zygote, pid, "a released sandbox was not reaped")

        pid = _exited_sandbox(zygote)
        _until(lambda: pid not in zygote.live, zygote)
        assert pid not in zygote.live
        zygote.release(pid)
        zygote.release(os.getpid())
        assert not zygote.released

        pid = _exited_sandbox(zygote)
        pidfd_open = os.pidfd_open
        os.pidfd_open = _refused  # no descriptor to watch it with: reaped on the spot
        try:
            zygote.release(pid)
        finally:
            os.pidfd_open = pidfd_open
        _assert_reaped(zygote, pid, "a sandbox released without a pidfd was not reaped")

        zygote.refill(SETUP, setup_key(SETUP))
        dead = zygote.spare[1]["pid"]
        os.kill(dead, signal.SIGKILL)
        _until(lambda: zygote.spare is None, zygote)
        assert zygote.spare is None and dead not in zygote.live
        reply, fds = zygote.open(SETUP, setup_key(SETUP))
        for fd in fds:
            os.close(fd)
        assert reply["pid"] != dead
    finally:
        zygote.close()


def test_the_zygote_keeps_its_books_when_sandboxes_exit_before_it_is_told():
    """The zygote's own bookkeeping, without isolation: a released sandbox is watched by a pidfd
    and reaped once it exits; one that an idle ``reap_exited`` took first, or a pid that is not a
    sandbox, is released without error (the zygote would otherwise die, and its judge with it);
    one the zygote cannot open a pidfd for is reaped on the spot; a spare that died while idle
    is dropped, not handed to the next request. Run in a forked child, whose only children are
    the zygote's sandboxes (``reap_exited`` reaps any exited child)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _zygote_books()
            code = 0
        except BaseException:
            traceback.print_exc()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_replies_to_a_testers_relayed_calls_are_not_operations_awaiting_an_answer():
    """A tester sandbox asks the judge for calls (``relay`` frames) and gets replies; only the
    operation and its outcome count as pending, so after the outcome nothing is pending and the
    sandbox can be released on the fast path (counting the replies sent every tester sandbox
    down the slow one)."""
    from rlvr.sandbox.code.isolation.box import Box
    from rlvr.sandbox.code.rules.limits import Limits
    from rlvr.sandbox.wire import read_frame, write_frame

    to_box_r, to_box_w = os.pipe()
    from_box_r, from_box_w = os.pipe()
    box = Box("python", Limits())
    box.ctl, box.res = to_box_w, from_box_r
    try:
        box.send({"op": "assert", "spec": {}, "wall_s": 1})
        for _ in range(3):
            write_frame(from_box_w, {"relay": True}, b"call")
            header, _ = box.receive(5)
            assert header == {"relay": True}
            box.send({"status": "value"}, b"answer")
        assert box.pending == 1
        write_frame(from_box_w, {"outcome": {"status": "ok"}})
        box.receive(5)
        assert box.pending == 0
        assert [read_frame(to_box_r)[0].get("op") for _ in range(4)] == ["assert", None, None, None]
    finally:
        for fd in (to_box_r, to_box_w, from_box_r, from_box_w):
            os.close(fd)
