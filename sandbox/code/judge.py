"""The code judge: a pool worker that runs tests in a sandbox and compares outputs.

The judge holds each submission's expected outputs and is the trusted parent that compares:
the supervisor inside the sandbox only reports what the program printed or returned. Sandboxes
come from a zygote (``sandbox.code.zygote``) forked at start-up, before any request, so expected
outputs never reach a process a sandbox is forked from. The judge starts with a scrubbed
environment, so nothing in any forked memory is a host secret.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import signal
import sys
import time
from typing import Any

from sandbox.code.isolation import isolation_available
from sandbox.code.languages import get_language
from sandbox.code.limits import Limits
from sandbox.code.zygote import start_zygote
from sandbox.wire import WorkerCrashed, WorkerTimeout, read_message, recv_json, send_json, write_message

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
ZYGOTE: Any = None


def _stop(sandbox: tuple[int, int, int, int], grace: float = 2.0) -> None:
    """Tell the supervisor to finish; kill the sandbox if it does not exit within ``grace``.

    Returns only once the sandbox process has exited (the pidfd becomes readable), so when a
    verdict is returned nothing of the submission is still running.
    """
    pid, pidfd, ctl_w, res_r = sandbox
    try:
        write_message(ctl_w, {"stop": True})
    except OSError:
        pass
    if not select.select([pidfd], [], [], grace)[0]:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], 10.0)
    send_json(ZYGOTE[1], {"reap": pid})
    recv_json(ZYGOTE[1])
    for fd in (ctl_w, res_r, pidfd):
        try:
            os.close(fd)
        except OSError:
            pass


def _open_sandbox(setup: dict[str, Any]) -> tuple[int, int, int, int]:
    sock = ZYGOTE[1]
    send_json(sock, {"setup": setup})
    reply, fds = recv_json(sock, want_fds=3)
    if reply is None:
        raise WorkerCrashed("zygote closed")
    if "error" in reply:
        raise WorkerCrashed(f"zygote: {reply['error']}")
    ctl_w, res_r, pidfd = fds
    return reply["pid"], pidfd, ctl_w, res_r


def judge_outcome(test: dict[str, Any], outcome: dict[str, Any], limits: Limits, nonce: str | None, oracle: str = "exact") -> tuple[bool, str, str]:
    """Compare one test's outcome with its expectation; returns (passed, reason, detail)."""
    from sandbox.code.compare import result_matches, stdout_matches  # after the zygote fork: keep it small
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
    setup = {"language": language.name, "limits": limits.to_dict(), "files": files, "entry": {"fn_name": request.get("fn_name")}}
    deadline = started + limits.total_s
    try:
        sandbox = _open_sandbox(setup)
        _, _, ctl_w, res_r = sandbox
    except (WorkerCrashed, OSError) as exc:
        return {"reason": "sandbox_error", "detail": f"could not start the sandbox: {exc}", "passed": 0, "total": len(tests)}
    results: list[dict[str, Any]] = []
    reply: dict[str, Any] = {"passed": 0, "total": len(tests), "first_failure": None}
    try:
        compiled = read_message(res_r, min(deadline, time.monotonic() + limits.compile_time_s * 1.5 + 10))
        if "fatal" in compiled:
            return {**reply, "reason": "sandbox_error", "detail": f"sandbox setup failed: {compiled['fatal']}"}
        if compiled["compile"]["status"] != "ok":
            status = compiled["compile"]["status"]
            reason = "time_limit" if status == "tle" else "compile_error"
            return {**reply, "reason": reason, "detail": "compiler: " + (compiled["compile"].get("stderr") or "").strip()[-500:], "compile": compiled["compile"], "results": []}
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
                results.append({key: outcome.get(key) for key in ("status", "result", "cpu_ms", "wall_ms", "stdout", "stderr", "exit_code", "signal")})
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
        _stop(sandbox)
    if request.get("collect"):
        return {"results": results, "reason": reply.get("reason", "ok"), "detail": reply.get("detail", ""), "compile": compiled.get("compile") if "compiled" in locals() else None}
    reply.setdefault("reason", "ok")
    if reply["reason"] == "ok" and reply["passed"] != len(tests):
        reply["reason"] = "sandbox_error"
    return reply


def main() -> None:
    """Fork the zygote first, while this process is small (fork cost grows with memory), then
    load what judging needs."""
    global ISOLATION, ZYGOTE
    ISOLATION = isolation_available()
    ZYGOTE = start_zygote(ISOLATION[0])
    from sandbox.pool import serve

    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)  # expected outputs may hold huge integers
    serve(handle, on_exit=_stop_zygote)


def _stop_zygote() -> None:
    """On shutdown, let the zygote exit and reap it, so nothing is left for init to collect."""
    pid, sock = ZYGOTE
    sock.close()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


if __name__ == "__main__":
    main()
