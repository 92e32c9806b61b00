"""PID 1's main loop for one submission: frames from the judge in, outcomes out.

The program arrives only here, after the fork from the zygote, so the process that runs it
never held another submission's program, inputs or tests. It is compiled (or byte-compiled),
copied into the program directory and sealed read-only before any test runs.
"""

from __future__ import annotations

import os
import struct
from dataclasses import replace
from typing import Any

from rlvr.sandbox.code.isolation.child import compile_program, encode_call_request, sandbox_import_path
from rlvr.sandbox.code.isolation.primitives import read_bytes, seal_program_dir, write_bytes
from rlvr.sandbox.code.rules.languages import Language
from rlvr.sandbox.code.rules.limits import LATE_LIMITS, Limits
from rlvr.sandbox.code.running.call_child import run_calls
from rlvr.sandbox.code.running.channels import Outcome
from rlvr.sandbox.code.running.runner import SetupFailed, Supervisor
from rlvr.sandbox.code.running.stdin_runner import run_stdin_test
from rlvr.sandbox.code.running.tester_relay import run_tester
from rlvr.sandbox.wire import compact_json, read_frame, write_frame


def serve_submission(
    ctl_fd: int,
    res_fd: int,
    limits: Limits,
    language: Language,
    uid: int | None,
    isolated: bool,
    workdir: str,
    cgroup: Any,
    use_seccomp: bool,
) -> None:
    """PID 1's loop: receive the program (only now, after the fork), compile it, seal it, then
    run the tests the judge sends one by one."""
    if cgroup is not None:
        # Join once: every test child forked from here starts inside (a v1 attach costs
        # milliseconds). Children raise their out-of-memory score to the maximum, so the
        # kernel's killer picks them, never the supervisor; its own CPU is subtracted.
        cgroup.join()
    header, _ = read_frame(ctl_fd)
    # The submission's own ``LATE_LIMITS`` (``total_s``: its long-lived children's CPU backstop):
    # the sandbox was built without them, maybe as a spare while another submission ran.
    limits = replace(limits, **{name: header["late"][name] for name in LATE_LIMITS})
    supervisor = Supervisor(language, limits, uid, isolated, workdir, cgroup, use_seccomp)
    if not isolated:
        os.makedirs(supervisor.prog_dir, exist_ok=True)
        os.makedirs(supervisor.scratch, mode=0o777, exist_ok=True)
        os.chmod(supervisor.scratch, 0o777)
    for name, content in (header.get("files") or {}).items():
        write_bytes(os.path.join(supervisor.prog_dir, name), content.encode("utf-8", "surrogateescape"), 0o444)
    if isolated:
        sandbox_import_path()
    source = os.path.join(supervisor.prog_dir, language.source)
    compiled = {"status": "ok"}
    if language.warm and header.get("files"):
        try:
            compile_program(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            compiled = {"status": "ce", "stderr": f"{type(exc).__name__}: {exc}"[:4000]}
    elif language.compile and header.get("files"):
        outcome = supervisor.compile()
        compiled = {**outcome.header(), "stderr": outcome.stderr[-4000:].decode("utf-8", "replace")}
        if outcome.status == "ok":
            built = os.path.join(supervisor.scratch, "main")
            binary = read_bytes(built) if os.path.exists(built) else b""
            write_bytes(os.path.join(supervisor.prog_dir, "main"), binary, 0o555)
            supervisor.reset_scratch()
    if isolated:
        seal_program_dir()
    else:
        os.chmod(supervisor.prog_dir, 0o555)
    write_frame(res_fd, {"compile": compiled})
    if compiled["status"] != "ok":
        _say_stopped(supervisor, res_fd)
        return
    entry = header.get("entry")

    def relay(frame: bytes) -> bytes:
        write_frame(res_fd, {"relay": True}, frame)
        head, blob = read_frame(ctl_fd)
        return _frame(head, blob) if not head.get("abort") else b""

    while True:
        try:
            message, blob = read_frame(ctl_fd)
        except Exception:
            break
        op = message.get("op")
        if op == "stop":
            break
        try:
            if op == "stdin":
                outcome = run_stdin_test(
                    supervisor,
                    blob,
                    message.get("time_s"),
                    message.get("budget_s"),
                    message.get("graded"),
                    bool(message.get("shared")),
                )
                payload = outcome.stdout
            elif op == "calls":
                batch, offset = [], 0
                for call in message["calls"]:
                    args = blob[offset : offset + call["size"]]
                    offset += call["size"]
                    batch.append(
                        (
                            encode_call_request(
                                call.get("name") or "@entry", args, call.get("flags", 0), call.get("handle", 0)
                            ),
                            len(args),
                            call.get("time_s"),
                        )
                    )
                outcomes = run_calls(supervisor, entry, batch, message.get("budget_s"))
                results = [o.result or b"" for o in outcomes]
                write_frame(
                    res_fd,
                    {"outcomes": [o.call_answer(len(r)) for o, r in zip(outcomes, results)]},
                    results[0] if len(results) == 1 else b"".join(results),
                )
                continue
            elif op == "assert":
                outcome = run_tester(supervisor, _frame(message["spec"], b""), float(message["wall_s"]), relay)
                payload = outcome.result or b""
            else:
                outcome, payload = Outcome(status="sandbox", error=f"unknown operation {op!r}"), b""
        except SetupFailed as exc:
            outcome, payload = Outcome(status="sandbox", error=str(exc)), b""
        write_frame(res_fd, {"outcome": outcome.header()}, payload)
    supervisor.finish()
    _say_stopped(supervisor, res_fd)


def _say_stopped(supervisor: Supervisor, res_fd: int) -> None:
    """Isolated, PID 1 kills and reaps every other process of its PID namespace (all of the
    submission's: orphans are reparented to it), then says so. The verdict waits for this
    frame, not for PID 1's own exit: tearing down its namespaces costs milliseconds the judge
    need not wait for (the zygote reaps it, and checks its cgroup, before the slot is reused).
    Unsafe, processes can leave the session, so the judge waits for the exit as before."""
    if supervisor.isolated and os.getpid() == 1:
        supervisor.kill_everything(sweep_ipc=False)
        write_frame(res_fd, {"stopped": True})


def _frame(header: dict[str, Any], blob: bytes) -> bytes:
    head = compact_json(header).encode()
    return struct.pack("!II", len(head), len(blob)) + head + blob
