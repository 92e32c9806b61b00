"""The code judge: a warm pool worker that forks one sandbox per submission and compares outputs.

This process has the Python runtime and common standard-library modules already imported, so a
sandboxed test child is a ``fork`` away instead of a fresh interpreter. It is started with a
scrubbed environment (whatever a forked child could find in memory holds no host secrets). For
each submission it forks a small process that creates the namespaces and the read-only root,
which forks the supervisor (PID 1 inside). Expected outputs stay here, outside the sandbox: the
supervisor reports what the program printed or returned, and this trusted parent compares.
"""
from __future__ import annotations

import gc
import json
import os
import secrets
import shutil
import signal
import sys
import socket
import tempfile
import time
from typing import Any

from sandbox.code.compare import result_matches, stdout_matches
from sandbox.code.isolation import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    SANDBOX_NAMESPACES,
    SANDBOX_UID_BASE,
    build_root,
    default_layout,
    isolation_available,
    mount_proc,
    prctl,
    unshare,
)
from sandbox.code.languages import Language, get_language
from sandbox.code.limits import Limits
from sandbox.code.runner import serve_submission
from sandbox.pool import WorkerCrashed, WorkerTimeout, read_message, serve, write_message

PRELOAD = (
    "runpy", "traceback", "collections", "heapq", "bisect", "itertools", "functools", "math", "re", "string",
    "random", "decimal", "fractions", "operator", "copy", "array", "statistics", "datetime", "typing",
    "dataclasses", "cmath", "queue", "sortedcontainers",
)
REASONS = {
    "re": "runtime_error",
    "tle": "time_limit",
    "mle": "memory_limit",
    "ole": "output_limit",
    "bad_entry": "runtime_error",
    "not_json": "wrong_answer",
    "sandbox": "sandbox_error",
}
ISOLATION: tuple[bool, str] = (False, "not checked")


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


def _stop(pid: int, ctl_w: int, res_r: int, grace: float = 2.0) -> None:
    try:
        write_message(ctl_w, {"stop": True})
    except OSError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.002)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for fd in (ctl_w, res_r):
        try:
            os.close(fd)
        except OSError:
            pass


def judge_outcome(test: dict[str, Any], outcome: dict[str, Any], limits: Limits, nonce: str | None, oracle: str = "exact") -> tuple[bool, str, str]:
    """Compare one test's outcome with its expectation; returns (passed, reason, detail)."""
    status = outcome["status"]
    stderr_tail = (outcome.get("stderr") or "").strip().splitlines()[-1:] or [""]
    if status == "ok":
        kind = test["kind"]
        if kind == "stdin":
            ok, why = stdout_matches(outcome["stdout"], test["output"], limits.float_abs_tol, limits.float_rel_tol)
            return ok, "ok" if ok else "wrong_answer", why
        if kind == "call":
            try:
                got = json.loads(outcome["result"]) if outcome.get("result") is not None else None
            except ValueError:
                return False, "wrong_answer", "unreadable return value"
            want = json.loads(test["expected_json"])
            ok = result_matches(got, want, oracle, json.loads(test["args_json"]), limits.float_abs_tol, limits.float_rel_tol)
            return ok, "ok" if ok else "wrong_answer", "" if ok else f"expected {test['expected_json'][:80]}, got {(outcome.get('result') or '')[:80]}"
        ok = nonce is not None and outcome.get("result") == nonce
        return ok, "ok" if ok else "wrong_answer", "" if ok else "the program stopped before its tests finished"
    if status == "re" and test["kind"] == "assert" and "AssertionError" in (outcome.get("stderr") or ""):
        return False, "wrong_answer", "assertion failed"
    if status == "not_json":
        return False, "wrong_answer", stderr_tail[0][:200] or "return value is not a plain value"
    detail = stderr_tail[0][:200]
    if status == "tle":
        detail = f"exceeded {limits.time_s:g}s CPU or {limits.wall_s:g}s wall clock"
    elif status == "mle":
        detail = f"exceeded {limits.memory_mb} MiB"
    elif status == "ole":
        detail = f"printed more than {limits.output_kb} KiB"
    return False, REASONS.get(status, "sandbox_error"), detail


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Grade one submission (or, with ``collect``, just run it and return its results)."""
    started = time.monotonic()
    isolated, why = ISOLATION
    if not isolated and not request.get("unsafe"):
        return {"reason": "sandbox_error", "detail": f"isolation unavailable: {why}; pass unsafe=True (--unsafe) to run without it", "passed": 0}
    try:
        language = get_language(request["language"])
        limits = Limits.from_any(request["limits"])
    except (KeyError, ValueError) as exc:
        return {"reason": "sandbox_error", "detail": str(exc), "passed": 0}
    tests = request["tests"]
    files = {language.source: request["program"]}
    nonces: dict[int, str] = {}
    for i, test in enumerate(tests):
        if test["kind"] == "assert":
            files[f"test_{i}.py"] = request["program"] + "\n\n" + test["code"] + "\n"
            nonces[i] = secrets.token_hex(16)
    setup = {"limits": limits.to_dict(), "files": files, "entry": {"fn_name": request.get("fn_name")}}
    deadline = started + limits.total_s
    pid, ctl_w, res_r = start_sandbox(setup, language, isolated)
    results: list[dict[str, Any]] = []
    reply: dict[str, Any] = {"passed": 0, "total": len(tests), "first_failure": None}
    try:
        compiled = read_message(res_r, min(deadline, time.monotonic() + limits.compile_time_s * 1.5 + 10))
        if "fatal" in compiled:
            return {**reply, "reason": "sandbox_error", "detail": f"sandbox setup failed: {compiled['fatal']}"}
        if compiled["compile"]["status"] != "ok":
            status = compiled["compile"]["status"]
            reason = "time_limit" if status == "tle" else "compile_error"
            return {**reply, "reason": reason, "detail": "compiler: " + (compiled["compile"].get("stderr") or "").strip()[-500:]}
        for i, test in enumerate(tests):
            if time.monotonic() >= deadline:
                reply.update(reason=reply.get("reason") or "time_limit", detail=f"submission exceeded {limits.total_s:g}s")
                reply["first_failure"] = i if reply["first_failure"] is None else reply["first_failure"]
                break
            message = {"kind": test["kind"], "time_s": test.get("time_s")}
            if test["kind"] == "stdin":
                message["input"] = test["input"]
            elif test["kind"] == "call":
                message["args_json"] = test["args_json"]
            else:
                message.update(file=f"test_{i}.py", nonce=nonces[i])
            write_message(ctl_w, message)
            response = read_message(res_r, min(deadline + 5, time.monotonic() + limits.wall_s + 10))
            outcome = response["outcome"]
            if request.get("collect"):
                results.append({"status": outcome["status"], "result": outcome.get("result"), "cpu_ms": outcome.get("cpu_ms"), "stderr": outcome.get("stderr", "")[-300:]})
                continue
            passed, reason, detail = judge_outcome(test, outcome, limits, nonces.get(i), request.get("oracle") or "exact")
            if passed:
                reply["passed"] += 1
                continue
            if reply["first_failure"] is None:
                reply.update(first_failure=i, reason=reason, detail=f"test {i}: {detail}" if detail else f"test {i}")
            if request.get("stop_on_fail", True):
                break
    except (WorkerTimeout, WorkerCrashed, OSError, KeyError) as exc:
        reply.update(reason="sandbox_error", detail=f"sandbox stopped answering: {type(exc).__name__}")
    finally:
        _stop(pid, ctl_w, res_r)
    if request.get("collect"):
        return {"results": results, "reason": "ok"}
    reply.setdefault("reason", "ok")
    if reply["reason"] == "ok" and reply["passed"] != len(tests):
        reply["reason"] = "sandbox_error"
    return reply


def main() -> None:
    global ISOLATION
    ISOLATION = isolation_available()
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)  # expected outputs may hold huge integers
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    gc.collect()
    gc.freeze()
    serve(handle)


if __name__ == "__main__":
    main()
