"""The zygote: a warm fork server that creates one sandbox per submission.

It has the Python runtime and common standard-library modules already imported, so a test child
is a ``fork`` away instead of a fresh interpreter. It is forked from the judge at start-up,
before the judge has read any request, and afterwards only ever receives programs and limits:
expected outputs never enter its memory, so no sandboxed process (all forked from here) can find
them there. For each submission it forks a small process that creates the namespaces and the
read-only root, which forks the supervisor (PID 1 inside); the supervisor's pipes and a pidfd
of the sandbox go back to the judge over a Unix socket.
"""
from __future__ import annotations

import os
import select
import signal
import socket
from typing import Any

from sandbox.code.isolation import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    SANDBOX_NAMESPACES,
    SANDBOX_UID_BASE,
    build_root,
    default_layout,
    mount_proc,
    prctl,
    unshare,
)
from sandbox.code.languages import Language, get_language
from sandbox.code.limits import Limits
from sandbox.code.runner import serve_submission
from sandbox.wire import recv_json, send_json, write_message


def start_sandbox(setup: dict[str, Any], language: Language, isolated: bool) -> tuple[int, int, int]:
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
            uid = None
            workdir = "/tmp"
            if isolated:
                unshare(SANDBOX_NAMESPACES)
                build_root(default_layout(), limits.scratch_mb)
                uid = SANDBOX_UID_BASE + os.getpid()
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
                serve_submission(ctl_r, res_w, setup, language, uid, isolated, workdir)
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
                write_message(res_w, {"fatal": f"{type(exc).__name__}: {exc}"})
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
PRELOAD = ("traceback", "linecache", "collections", "heapq", "bisect", "itertools", "functools", "math", "re", "string", "operator", "copy", "array", "random", "typing")


def zygote_loop(sock: socket.socket, isolated: bool) -> None:
    """Serve the judge until the socket closes: ``{"setup": ...}`` starts a sandbox and returns
    its pipes and pidfd; ``{"reap": pid}`` collects an exited sandbox, so none stays a zombie."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import gc

    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    gc.collect()
    gc.freeze()
    while True:
        ready, _, _ = select.select([sock], [], [], 5.0)
        if not ready:
            _reap()
            continue
        message = recv_json(sock)
        if message is None:
            return
        if "reap" in message:
            try:
                os.waitpid(int(message["reap"]), 0)
            except ChildProcessError:
                pass
            send_json(sock, {"reaped": True})
            continue
        try:
            setup = message["setup"]
            pid, ctl_w, res_r = start_sandbox(setup, get_language(setup["language"]), isolated)
            pidfd = os.pidfd_open(pid)
        except Exception as exc:  # report, keep serving
            send_json(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        send_json(sock, {"pid": pid}, fds=[ctl_w, res_r, pidfd])
        for fd in (ctl_w, res_r, pidfd):
            os.close(fd)


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
