"""The zygote: a warm fork server that creates one sandbox per submission.

It has the Python runtime and common standard-library modules already imported, so a test child
is a ``fork`` away instead of a fresh interpreter. It is forked from the judge at start-up,
before the judge has read any request, and afterwards receives only limits and a language:
never a program, an input or a test. So no sandboxed process (all forked from here) can find
another submission in its memory, freed or not. For each submission it creates the sandbox's
cgroup, draws a fresh uid, and forks a small process that gives itself a new empty session
keyring, creates the namespaces and the read-only root, and forks the supervisor (PID 1
inside); the supervisor's pipes and a pidfd of the sandbox go back to the judge over a Unix
socket, and the judge then sends the program straight to the supervisor. When the judge reports
the sandbox gone, the zygote reaps it, says so (the verdict waits: no zombie outlives it), and
then removes its cgroup.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
from collections import deque
from typing import Any, Callable

from sandbox.code import seccomp
from sandbox.code.cgroups import SUPERVISOR_MB, Cgroups, SandboxCgroup
from sandbox.code.isolation import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    SANDBOX_NAMESPACES,
    build_root,
    default_layout,
    join_fresh_keyring,
    mount_proc,
    prctl,
    sandbox_uid,
    unshare,
)
from sandbox.code.languages import Language, get_language
from sandbox.code.limits import Limits
from sandbox.code.submission import serve_submission
from sandbox.wire import recv_json, send_json, write_frame

#: Program directory size: the source (at most 512k characters) and a compiled binary.
PROGRAM_KB = 64 << 10


def start_sandbox(
    setup: dict[str, Any], language: Language, isolated: bool, cgroup: SandboxCgroup | None, uid: int | None
) -> tuple[int, int, int]:
    """Fork the sandbox for one submission; returns (pid to kill, control fd, result fd)."""
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
            limits = Limits.from_any(setup["limits"])
            workdir = "/tmp"
            if isolated:
                join_fresh_keyring()
                unshare(SANDBOX_NAMESPACES)
                build_root(default_layout(), limits.scratch_mb, limits.scratch_files, PROGRAM_KB)
            else:
                import tempfile

                workdir = tempfile.mkdtemp(prefix="rlvr-unsafe-")
                os.chmod(workdir, 0o755)
            supervisor = os.fork()
            if supervisor == 0:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                if isolated:
                    mount_proc()
                    socket.sethostname("sandbox")
                else:
                    prctl(PR_SET_CHILD_SUBREAPER, 1)
                serve_submission(
                    ctl_r, res_w, setup, language, uid, isolated, workdir, cgroup, isolated and seccomp.available()
                )
                os._exit(0)
            os.close(ctl_r)
            os.close(res_w)
            os.waitpid(supervisor, 0)
            if not isolated:
                import shutil

                shutil.rmtree(workdir, ignore_errors=True)
            code = 0
        except BaseException as exc:  # report, never raise out of a forked child
            try:
                write_frame(res_w, {"fatal": f"{type(exc).__name__}: {exc}"})
            except BaseException:
                pass
        os._exit(code)
    os.close(ctl_r)
    os.close(res_w)
    return pid, ctl_w, res_r


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


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
)


class Zygote:
    """The zygote's state: the cgroup hierarchy, live sandboxes' cgroups, recently used uids,
    and one spare sandbox built ahead (namespaces, root, cgroup, supervisor waiting for its
    program), so a judge's request is answered at once and the building overlaps the judge's
    work. A spare holds nothing of any submission: the program reaches it only after it is
    handed out."""

    def __init__(self, isolated: bool):
        self.isolated = isolated
        self.cgroups, self.cgroup_note = Cgroups.detect() if isolated else (None, "unsafe mode")
        if self.cgroups is not None:
            self.cgroups.sweep()
        self.live: dict[int, SandboxCgroup | None] = {}
        self.recent_uids: deque[int] = deque(maxlen=65536)
        self.spare: tuple[str, dict[str, Any], list[int]] | None = None

    def uid(self) -> int:
        while True:
            uid = sandbox_uid()
            if uid not in self.recent_uids:
                self.recent_uids.append(uid)
                return uid

    def open(self, setup: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
        """A sandbox for ``setup`` (the spare if it was built for the same language and
        limits); a new spare like it is built afterwards, by ``refill``."""
        key = json.dumps([setup["language"], setup["limits"]], sort_keys=True)
        spare, self.spare = self.spare, None
        if spare is not None:
            if spare[0] == key:
                return spare[1], spare[2]
            self.discard(spare)
        return self.build(setup)

    def refill(self, setup: dict[str, Any]) -> None:
        if self.spare is None:
            reply, fds = self.build(setup)
            self.spare = (json.dumps([setup["language"], setup["limits"]], sort_keys=True), reply, fds)

    def discard(self, spare: tuple[str, dict[str, Any], list[int]]) -> None:
        _, reply, fds = spare
        for fd in fds:
            os.close(fd)  # the supervisor sees its control pipe close and exits
        self.reap(reply["pid"])

    def build(self, setup: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
        limits = Limits.from_any(setup["limits"])
        # The supervisor lives in the sandbox's cgroup, outside the program's: one process
        # more, and memory for itself and the output and result buffers it fills.
        supervisor_mb = SUPERVISOR_MB + 2 * limits.result_mb + 2 * (-(-limits.output_kb // 1024))
        cgroup = (
            self.cgroups.create(
                limits.memory_mb << 20,
                limits.processes + 1,
                supervisor_mb << 20,
                max(limits.memory_mb, limits.compile_memory_mb) << 20,
            )
            if self.cgroups is not None
            else None
        )
        try:
            pid, ctl_w, res_r = start_sandbox(
                setup, get_language(setup["language"]), self.isolated, cgroup, self.uid() if self.isolated else None
            )
        except BaseException:
            if cgroup is not None:
                self.cgroups.remove(cgroup)  # type: ignore[union-attr]
            raise
        if cgroup is not None:
            cgroup.close()  # the sandbox holds its own copies of the descriptors
        self.live[pid] = cgroup
        pidfd = os.pidfd_open(pid)
        return {
            "pid": pid,
            "cgroup": cgroup is not None,
            "cgroup_note": self.cgroup_note,
            "seccomp": self.isolated and seccomp.available(),
        }, [ctl_w, res_r, pidfd]

    def reap(self, pid: int, reaped: Callable[[int], None] | None = None) -> None:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        # The outer process can be gone while the sandbox's own processes are still dying (the
        # judge SIGKILLs it when work it sent ahead is pending): removing the cgroup kills and
        # waits for every member, so the reply really means nothing of the submission runs.
        cgroup = self.live.pop(pid, None)
        if cgroup is not None and self.cgroups is not None:
            try:
                self.cgroups.remove(cgroup)
            except OSError:
                pass
        if reaped is not None:
            reaped(pid)


def zygote_loop(sock: socket.socket, isolated: bool) -> None:
    """Serve the judge until the socket closes: ``{"open": setup}`` starts a sandbox and
    returns its pipes and pidfd; ``{"reap": pid}`` collects an exited sandbox (no zombie, no
    leftover cgroup)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import gc

    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    zygote = Zygote(isolated)
    gc.collect()
    gc.freeze()
    while True:
        ready, _, _ = select.select([sock], [], [], 5.0)
        if not ready:
            _reap()
            continue
        message = recv_json(sock)
        if message is None:
            if zygote.spare is not None:
                zygote.discard(zygote.spare)
            for pid in list(zygote.live):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                zygote.reap(pid)
            return
        if "reap" in message:
            # Reply once the process is reaped and its cgroup empty and removed (the verdict
            # waits for this: no process and no zombie is left when it returns).
            zygote.reap(int(message["reap"]), lambda pid: send_json(sock, {"reaped": pid}))
            continue
        try:
            reply, fds = zygote.open(message["open"])
        except Exception as exc:  # report, keep serving
            send_json(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        send_json(sock, reply, fds=fds)
        for fd in fds:
            os.close(fd)
        try:
            zygote.refill(message["open"])
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
