"""What a reused slot (network namespace + cgroup) and the per-sandbox namespaces guarantee.

A slot is reused from one sandbox to the next (``rlvr.sandbox.code.isolation.slots``), never held by two at
once; each sandbox still gets fresh PID, mount, IPC and UTS namespaces, ``/tmp``, ``/prog`` and
``/proc``. Each test here fails when one of those guarantees is broken.
"""

import os
import signal
import socket
import time

import pytest
from rlvr.sandbox import CodeGrader
from rlvr.sandbox.code.isolation.cgroups import Cgroups
from rlvr.sandbox.code.isolation.primitives import CLONE_NEWNET, setns
from rlvr.sandbox.code.isolation.slots import Slots

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="slots need root (as the sandbox does)")

LISTENER = """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0rlvr-slot-probe")
s.listen(1)
s.settimeout(3)
try:
    s.accept()
    print("MET")
except OSError:
    print("ALONE")
"""
CONNECTOR = """
import socket, time
end, seen = time.time() + 3, "ALONE"
while time.time() < end:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect("\\0rlvr-slot-probe")
        seen = "MET"
        break
    except OSError:
        time.sleep(0.05)
print(seen)
"""


@pytest.fixture
def slots():
    cgroups, _ = Cgroups.detect()
    pool = Slots(cgroups)
    yield pool
    pool.close_all()


def _inode(fd: int) -> int:
    return os.fstat(fd).st_ino


def test_concurrent_sandboxes_cannot_talk_over_an_abstract_unix_socket():
    """Two programs graded at once (two judges): one listens on an abstract Unix socket, the
    other tries to connect for 3 s. In one shared network namespace they meet."""
    with CodeGrader(workers=2) as grader:
        grader.warm_up()
        limits = {"time_s": 6}
        verdicts = grader.verify_batch(
            [
                {"completion": program, "tests": [{"input": "", "output": "ALONE"}], "limits": limits}
                for program in (LISTENER, CONNECTOR)
            ]
        )
    assert [v.reason for v in verdicts] == ["ok", "ok"], [v.detail for v in verdicts]


def test_fresh_tmp_prog_and_names_between_submissions_of_one_slot():
    """One judge, so consecutive submissions reuse its slots: what one leaves in ``/tmp``, its
    program file and an abstract socket name are gone for the next; the hostname is the sandbox's."""
    leaver = (
        "import os, socket\nopen('/tmp/left-behind', 'w').write('x')\n"
        "s = socket.socket(socket.AF_UNIX)\ns.bind('\\0rlvr-left')\nprint('done')"
    )
    finder = (
        "import os, socket\nseen = sorted(os.listdir('/tmp')) + sorted(os.listdir('/prog'))\n"
        "c = socket.socket(socket.AF_UNIX)\n"
        "try:\n    c.connect('\\0rlvr-left')\n    seen.append('socket')\nexcept OSError:\n    pass\n"
        "print(' '.join(seen + [socket.gethostname()]))"
    )
    with CodeGrader(workers=1) as grader:
        for _ in range(3):
            first = grader.verify(leaver, [{"input": "", "output": "done"}])
            second = grader.verify(finder, [{"input": "", "output": "solution.py sandbox"}])
            assert first.reason == "ok", first.detail
            assert second.reason == "ok", second.detail


def test_slots_held_at_once_never_share_a_network_namespace_and_a_freed_one_is_reused(slots):
    held = [slots.acquire(64 << 20, 8, 32 << 20, 64 << 20) for _ in range(3)]
    inodes = {_inode(slot.netns) for slot in held}
    assert len(inodes) == 3
    own = os.stat("/proc/self/ns/net").st_ino
    assert own not in inodes  # and never the caller's own
    assert os.stat("/proc/self/ns/net").st_ino == own  # making them left the caller where it was
    first = held.pop()
    slots.recycle(first, slots.vacate(first))
    again = slots.acquire(64 << 20, 8, 32 << 20, 64 << 20)
    assert again is first  # a vacated clean slot is reused, not rebuilt
    for slot in [*held, again]:
        slots.recycle(slot, slots.vacate(slot))


def _hold(action, slot) -> tuple[int, int]:
    """A child that does ``action(slot)`` then waits; returns (pid, read end of its ready pipe)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            action(slot)
            os.write(ready_w, b"1")
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid, pid


def test_a_process_left_in_a_slots_cgroup_is_found_killed_and_the_slot_dropped(slots):
    slot = slots.acquire(64 << 20, 8, 32 << 20, 64 << 20)
    if slot.cgroup is None:
        pytest.skip("no usable cgroup here")
    pid, _ = _hold(lambda s: s.cgroup.join(), slot)
    assert not slots.vacate(slot)
    assert pid in slots.escapes
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    dirs = list(slot.cgroup.dirs)
    slots.recycle(slot, False)
    assert slot not in slots.free
    assert not any(os.path.exists(d) for d in dirs)  # removed, not reused


def test_a_slot_whose_network_namespace_still_has_a_socket_is_not_reused(slots):
    slot = slots.acquire(64 << 20, 8, 32 << 20, 64 << 20)

    def bind(s):
        setns(s.netns, CLONE_NEWNET)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind("\0rlvr-outlives")
        sock.listen(1)
        bind.keep = sock

    pid, _ = _hold(bind, slot)
    try:
        slots.recycle(slot, True)
        assert slot not in slots.free
        assert slots.leftover_sockets >= 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
