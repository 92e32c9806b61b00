"""The zygote: a warm fork server that creates one sandbox per submission.

It has the Python runtime and common standard-library modules already imported, so a test child
is a ``fork`` away instead of a fresh interpreter. It is forked from the judge at start-up,
before the judge has read any request, and afterwards receives only limits and a language:
never a program, an input or a test. So no sandboxed process (all forked from here) can find
another submission in its memory, freed or not. What every sandbox would otherwise repeat after
the fork is done here once (limits parsed, the import path found in the root template, host
modules dropped): every page a forked process writes is a copy. For each submission it takes a
slot (a cgroup and an empty network namespace no other live sandbox holds), draws a fresh uid,
and forks the supervisor straight into a new PID namespace (PID 1 there), which gives itself a
new empty session keyring, enters the slot's network namespace and fresh mount, IPC and UTS ones,
and covers ``/tmp``, ``/prog`` and ``/proc`` in its copy of the read-only root; the supervisor's
pipes and a pidfd go back to the judge over a Unix socket, and the judge then sends the program
straight to the supervisor. An isolated supervisor ends by killing and reaping every other
process of its PID namespace and saying so; the judge then returns the verdict and *releases*
the sandbox, and the zygote reaps PID 1 once it has exited (its namespaces' teardown is off the
verdict's path), checks its cgroup empty and only then recycles the slot. A sandbox that does
not say so (unsafe mode, a crash, work still running) is *reaped* on the judge's request while
the verdict waits, as before.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from collections import deque
from typing import Any, Callable

from rlvr.sandbox.code.isolation import seccomp
from rlvr.sandbox.code.isolation.cgroups import SUPERVISOR_MB, Cgroups
from rlvr.sandbox.code.isolation.child import plan_import_path, sandbox_environment
from rlvr.sandbox.code.isolation.primitives import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    SCRATCH_DIR,
    build_template,
    default_layout,
    enter_root,
    join_fresh_keyring,
    mount_proc,
    prctl,
    sandbox_uid,
    setns,
    unshare,
)
from rlvr.sandbox.code.isolation.slots import Slot, Slots
from rlvr.sandbox.code.rules.languages import Language, get_language
from rlvr.sandbox.code.rules.limits import LATE_LIMITS, Limits
from rlvr.sandbox.code.running.submission import serve_submission
from rlvr.sandbox.wire import recv_json, send_json, write_frame

#: Program directory size: the source (at most 512k characters) and a compiled binary.
PROGRAM_KB = 64 << 10


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor not in ``keep`` (other slots', the judge's socket, the spare's pipes)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 65536)


def start_isolated(
    limits: Limits, language: Language, slot: Slot, uid: int, root: str, own_pidns: int
) -> tuple[int, int, int]:
    """Fork the sandbox's PID 1 for one submission; returns (its pid, control fd, result fd)."""
    ctl_r, ctl_w = os.pipe()
    res_r, res_w = os.pipe()
    unshare(CLONE_NEWPID)  # the next child is PID 1 of a new PID namespace
    try:
        pid = os.fork()
    except BaseException:
        setns(own_pidns, CLONE_NEWPID)
        raise
    if pid == 0:
        code = 1
        try:
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            _close_all_but({0, 1, 2, ctl_r, res_w, *slot.fds()})
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            join_fresh_keyring()
            unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)
            setns(slot.netns, CLONE_NEWNET)
            os.close(slot.netns)
            enter_root(root, limits.scratch_mb, limits.scratch_files, PROGRAM_KB)
            mount_proc()
            socket.sethostname("sandbox")
            serve_submission(ctl_r, res_w, limits, language, uid, True, SCRATCH_DIR, slot.cgroup, seccomp.available())
            code = 0
        except BaseException as exc:  # report, never raise out of a forked child
            report_fatal(res_w, exc)
        os._exit(code)
    setns(own_pidns, CLONE_NEWPID)
    os.close(ctl_r)
    os.close(res_w)
    return pid, ctl_w, res_r


def report_fatal(res_w: int, exc: BaseException) -> None:
    """Tell the supervisor's reader why a forked child could not start (best effort: the pipe may
    already be gone)."""
    try:
        write_frame(res_w, {"fatal": f"{type(exc).__name__}: {exc}"})
    except BaseException:
        pass


def start_unsafe(limits: Limits, language: Language) -> tuple[int, int, int]:
    """Without isolation (``unsafe``): an outer process with a private work directory, which it
    removes once the supervisor (a subreaper for the program's processes) is gone."""
    ctl_r, ctl_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(ctl_w)
            os.close(res_r)
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            import shutil
            import tempfile

            workdir = tempfile.mkdtemp(prefix="rlvr-unsafe-")
            os.chmod(workdir, 0o755)
            supervisor = os.fork()
            if supervisor == 0:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                prctl(PR_SET_CHILD_SUBREAPER, 1)
                serve_submission(ctl_r, res_w, limits, language, None, False, workdir, None, False)
                os._exit(0)
            os.close(ctl_r)
            os.close(res_w)
            os.waitpid(supervisor, 0)
            shutil.rmtree(workdir, ignore_errors=True)
            code = 0
        except BaseException as exc:  # report, never raise out of a forked child
            report_fatal(res_w, exc)
        os._exit(code)
    os.close(ctl_r)
    os.close(res_w)
    return pid, ctl_w, res_r


def setup_key(setup: dict[str, Any]) -> str:
    """What a sandbox is built for: its language and limits but ``LATE_LIMITS`` (a spare serves
    a request with the same key)."""
    return json.dumps([setup["language"], _built_for(setup["limits"])], sort_keys=True)


def _built_for(limits: dict[str, Any]) -> dict[str, Any]:
    """The limits a sandbox is built for: all but ``LATE_LIMITS`` (its supervisor gets those
    with the program)."""
    return {k: v for k, v in limits.items() if k not in LATE_LIMITS}


#: Standard-library modules programs commonly import, loaded once here so tests skip the import.
PRELOAD = (
    "traceback",
    "linecache",
    "collections",
    "heapq",
    "bisect",
    "itertools",
    "functools",
    "math",
    "re",
    "string",
    "operator",
    "copy",
    "array",
    "random",
    "typing",
    "decimal",
    "fractions",
    "statistics",
    "datetime",
    "json",
    # Imported in a forked test process, hashlib (OpenSSL) costs ~6 CPU-ms and zlib ~1, against
    # ~0.6 MiB more to copy at each fork: HumanEval/162's solution imports hashlib, and so do
    # the benchmarks' LiveCodeBench programs; their EvalPlus mutants import zlib.
    "hashlib",
    "zlib",
)


class Zygote:
    """The zygote's state: the root template, the slots, live sandboxes' slots, recently used
    uids, and one spare sandbox built ahead (namespaces, root, slot, supervisor waiting for its
    program), so a judge's request is answered at once and the building overlaps the judge's
    work. A spare holds nothing of any submission: the program reaches it only after it is
    handed out."""

    #: How many of the last uids are never handed out again.
    REMEMBERED_UIDS = 65536

    def __init__(self, isolated: bool):
        self.isolated = isolated
        cgroups, self.cgroup_note = Cgroups.detect() if isolated else (None, "unsafe mode")
        if cgroups is not None:
            cgroups.sweep()
        self.slots = Slots(cgroups)
        self.live: dict[int, Slot | None] = {}
        #: Sandboxes released by their judge (PID 1 said everything else in them is dead), by a
        #: pidfd of the zygote's own: reaped once PID 1 has exited (the loop watches them).
        self.released: dict[int, int] = {}
        #: The last ``REMEMBERED_UIDS`` uids handed out, in order and as a set: a uid drawn again
        #: while remembered is drawn anew. (A deque alone made each draw a scan of 65,536
        #: entries once full, ~0.9 ms: about a tenth of a submission's cost in a long run.)
        self.recent_uids: deque[int] = deque()
        self.recent_uid_set: set[int] = set()
        self.spare: tuple[str, dict[str, Any], list[int]] | None = None
        #: The last setup's limits but ``LATE_LIMITS`` (left at their defaults), parsed, by its
        #: key: a judge sends the same setup again and again, and nothing of earlier setups is
        #: kept for a sandbox to find.
        self.parsed: dict[str, Limits] = {}
        self.root, self.own_pidns = "", -1
        if isolated:
            self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            unshare(CLONE_NEWNS)  # the template lives in the zygote's own mount namespace
            self.root = build_template(default_layout())
            plan_import_path(self.root)
            # Every sandbox inherits this environment, so a test child need not rewrite its own.
            sandbox_environment(SCRATCH_DIR)

    def uid(self) -> int:
        """A fresh uid for the next sandbox, none of the last ``REMEMBERED_UIDS``."""
        while True:
            uid = sandbox_uid()
            if uid not in self.recent_uid_set:
                self.recent_uids.append(uid)
                self.recent_uid_set.add(uid)
                if len(self.recent_uids) > self.REMEMBERED_UIDS:
                    self.recent_uid_set.discard(self.recent_uids.popleft())
                return uid

    def open(self, setup: dict[str, Any], key: str) -> tuple[dict[str, Any], list[int]]:
        """A sandbox for ``setup`` (``setup_key``: the spare if it was built for the same
        language and limits, ``LATE_LIMITS`` aside); a new spare like it is built afterwards, by
        ``refill``."""
        spare, self.spare = self.spare, None
        if spare is not None:
            if spare[0] == key:
                return spare[1], spare[2]
            self.discard(spare)
        return self.build(setup, key)

    def refill(self, setup: dict[str, Any], key: str) -> None:
        if self.spare is None:
            reply, fds = self.build(setup, key)
            self.spare = (key, reply, fds)

    def discard(self, spare: tuple[str, dict[str, Any], list[int]]) -> None:
        _, reply, fds = spare
        for fd in fds:
            os.close(fd)  # the supervisor sees its control pipe close and exits
        self.reap(reply["pid"])

    def limits_of(self, setup: dict[str, Any], key: str) -> Limits:
        limits = self.parsed.get(key)
        if limits is None:
            limits = Limits.from_any(_built_for(setup["limits"]))
            self.parsed = {key: limits}
        return limits

    def build(self, setup: dict[str, Any], key: str) -> tuple[dict[str, Any], list[int]]:
        language = get_language(setup["language"])
        limits = self.limits_of(setup, key)
        if not self.isolated:
            pid, ctl_w, res_r = start_unsafe(limits, language)
            self.live[pid] = None
        else:
            # The supervisor lives in the sandbox's cgroup, outside the program's: one process
            # more, and memory for itself and the output and result buffers it fills.
            supervisor_mb = SUPERVISOR_MB + 2 * limits.result_mb + 2 * (-(-limits.output_kb // 1024))
            slot = self.slots.acquire(
                limits.memory_mb << 20,
                limits.processes + 1,
                supervisor_mb << 20,
                max(limits.memory_mb, limits.compile_memory_mb) << 20,
            )
            try:
                pid, ctl_w, res_r = start_isolated(limits, language, slot, self.uid(), self.root, self.own_pidns)
            except BaseException:
                self.slots.recycle(slot, self.slots.vacate(slot))
                raise
            self.live[pid] = slot
        pidfd = os.pidfd_open(pid)
        return {
            "pid": pid,
            "cgroup": self.slots.cgroups is not None,
            "cgroup_note": self.cgroup_note,
            "seccomp": self.isolated and seccomp.available(),
        }, [ctl_w, res_r, pidfd]

    def release(self, pid: int) -> None:
        """The judge is done with ``pid``, whose PID 1 said it killed and reaped every other
        process of its namespace: reap it once it exits (off the verdict's path)."""
        if pid not in self.live:
            return  # already reaped (``reap_exited``)
        try:
            self.released[os.pidfd_open(pid)] = pid  # an unreaped child: its pid is not reused
        except OSError:
            self.reap(pid)  # no descriptor to watch it with: wait for it here

    def reap_released(self, pidfds: list[int]) -> None:
        """Reap the released sandboxes of ``pidfds`` (readable: their PID 1 has exited)."""
        for pidfd in pidfds:
            pid = self.released.pop(pidfd)
            os.close(pidfd)
            self.reap(pid)

    def reap_exited(self) -> None:
        """While idle: reap whatever has exited (a sandbox whose judge is late or gone, a spare
        that died); ``reap`` vacates and recycles its slot, and it leaves the zygote's books
        (released, spare), so a ``reap`` or ``release`` for it later finds nothing to do and no
        request is handed a dead spare."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.reap(pid)  # already collected: only its slot's check and the books are left
            for pidfd in [fd for fd, released in self.released.items() if released == pid]:
                del self.released[pidfd]
                os.close(pidfd)
            if self.spare is not None and self.spare[1]["pid"] == pid:
                spare, self.spare = self.spare, None  # a spare that died: the next request builds one
                for fd in spare[2]:
                    os.close(fd)

    def reap(self, pid: int, reaped: Callable[[int], None] | None = None) -> None:
        """Reap a sandbox's PID 1 (the kernel has then ended every process of its PID
        namespace), check its slot's cgroup is empty (killing and waiting for any member
        found), answer, and only then recycle the slot."""
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        slot = self.live.pop(pid, None)
        clean = self.slots.vacate(slot) if slot is not None else True
        if reaped is not None:
            reaped(pid)
        if slot is not None:
            self.slots.recycle(slot, clean)

    def close(self) -> None:
        for pidfd in self.released:
            os.close(pidfd)
        self.released = {}
        if self.spare is not None:
            self.discard(self.spare)
        for pid in list(self.live):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.reap(pid)
        self.slots.close_all()


def zygote_loop(sock: socket.socket, isolated: bool) -> None:
    """Serve the judge until the socket closes: ``{"open": setup}`` starts a sandbox and
    returns its pipes and pidfd; ``{"reap": pid}`` collects an exited sandbox (no zombie, no
    leftover cgroup) and answers; ``{"release": pid}`` does the same, unanswered, once the
    sandbox's PID 1 (which said it stopped) has exited."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import gc

    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    # The host's trainers and harness (loaded when the zygote is forked from a caller that has
    # them) are not the sandbox's: no process forked from here finds them in ``sys.modules``.
    for name in [m for m in sys.modules if m.split(".")[:2] in (["rlvr", "harness"], ["rlvr", "trainers"])]:
        del sys.modules[name]
    zygote = Zygote(isolated)
    gc.collect()
    gc.freeze()
    while True:
        ready, _, _ = select.select([sock, *zygote.released], [], [], 5.0)
        if not ready:
            zygote.reap_exited()
            continue
        if sock not in ready:
            zygote.reap_released(ready)  # released sandboxes whose PID 1 has exited
            continue
        message = recv_json(sock)
        if message is None:
            zygote.close()
            return
        if "reap" in message:
            # Reply once PID 1 is reaped and its cgroup found empty (the verdict waits for
            # this: no process and no zombie is left when it returns).
            zygote.reap(int(message["reap"]), lambda pid: send_json(sock, {"reaped": pid}))
            continue
        if "release" in message:
            zygote.release(int(message["release"]))
            continue
        try:
            setup = message["open"]
            key = setup_key(setup)
            reply, fds = zygote.open(setup, key)
        except Exception as exc:  # report, keep serving
            send_json(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        send_json(sock, reply, fds=fds)
        for fd in fds:
            os.close(fd)
        try:
            zygote.refill(setup, key)
        except Exception:
            pass  # the next request builds one itself


def start_zygote(isolated: bool) -> tuple[int, socket.socket]:
    """Fork the zygote; returns its pid and the judge's end of the socket."""
    judge_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        judge_end.close()
        try:
            zygote_loop(zygote_end, isolated)
        finally:
            os._exit(0)
    zygote_end.close()
    return pid, judge_end
