"""Inside the sandbox: the supervisor (PID 1 of the submission's namespaces); the test child it
forks is ``sandbox.code.child``.

The supervisor is our code, running as root inside fresh namespaces and a chroot. For each test
it forks a child that drops to an unprivileged uid, applies rlimits and runs the program; it
feeds stdin, drains stdout/stderr with caps, enforces the wall clock, and afterwards kills
every other process in the namespace (``kill(-1)`` from PID 1 reaches exactly those) and reaps
them. It never sees expected outputs: it reports raw outputs to the judge outside.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox.code.child import (EXIT_BAD_ENTRY, EXIT_MEMORY, EXIT_NOT_JSON, compile_program, enter_child, python_asserts, python_calls, python_main,
                                python_streams)
from sandbox.code.isolation import ResourceLimits
from sandbox.code.languages import Language
from sandbox.code.limits import Limits
from sandbox.wire import read_message, write_message

STDERR_TAIL = 2000
MAX_RESULT_BYTES = 64 << 20
WORKDIR = "/tmp"


@dataclass
class Outcome:
    """What happened when one test ran (no judgement: the judge compares outside)."""

    status: str = "ok"
    stdout: bytes = b""
    stderr: bytes = b""
    result: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    cpu_ms: float = 0.0
    wall_ms: float = 0.0
    max_rss_kb: int = 0
    notes: list[str] = field(default_factory=list)

    def to_message(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "stdout": self.stdout.decode("utf-8", "replace"),
            "stderr": self.stderr[-STDERR_TAIL:].decode("utf-8", "replace"),
            "result": self.result,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "cpu_ms": round(self.cpu_ms, 2),
            "wall_ms": round(self.wall_ms, 2),
            "max_rss_kb": self.max_rss_kb,
        }


# ---------------------------------------------------------------------------------------------
# The supervisor
# ---------------------------------------------------------------------------------------------
class Supervisor:
    """Runs one submission's tests inside the sandbox (PID 1 when isolated)."""

    def __init__(self, language: Language, limits: Limits, uid: int | None, isolated: bool, workdir: str = WORKDIR):
        self.language = language
        self.limits = limits
        self.uid = uid
        self.isolated = isolated
        self.workdir = workdir
        self.call_child: dict[str, Any] | None = None

    def test_limits(self, step: str = "test", time_s: float | None = None) -> ResourceLimits:
        lim = self.limits
        if step == "compile":
            return ResourceLimits(lim.compile_time_s, lim.compile_memory_mb << 20, max(lim.processes, 16), max(lim.open_files, 64), lim.file_kb << 10)
        # A call child answers many calls: its CPU budget is the submission's; each call is held
        # to ``time_s`` by the wall clock and by its own CPU delta.
        cpu = lim.total_s if step == "calls" else (time_s or lim.time_s)
        return ResourceLimits(cpu, lim.memory_mb << 20, lim.processes, lim.open_files, lim.file_kb << 10)

    # -- process plumbing ----------------------------------------------------------------------
    def spawn(self, target, extra_fds: int = 0, step: str = "test", time_s: float | None = None) -> dict[str, Any]:
        pipes = {name: os.pipe() for name in ("stdin", "stdout", "stderr")}
        extra = [os.pipe() for _ in range(extra_fds)]
        pid = os.fork()
        if pid == 0:
            try:
                fds = {0: pipes["stdin"][0], 1: pipes["stdout"][1], 2: pipes["stderr"][1]}
                for k, (r, w) in enumerate(extra):
                    fds[3 + k] = r if k == 0 else w
                enter_child(fds, self.uid, self.test_limits(step, time_s), self.workdir)
                target()
            except BaseException:
                pass
            os._exit(125)
        for name, (r, w) in pipes.items():
            os.close(r if name == "stdin" else w)
        for k, (r, w) in enumerate(extra):
            os.close(r if k == 0 else w)
        child = {
            "pid": pid,
            "stdin": pipes["stdin"][1],
            "stdout": pipes["stdout"][0],
            "stderr": pipes["stderr"][0],
            "to_child": extra[0][1] if extra_fds else None,
            "from_child": extra[1][0] if extra_fds > 1 else None,
            "start": time.monotonic(),
            "pidfd": os.pidfd_open(pid),
        }
        return child

    def close_child(self, child: dict[str, Any]) -> None:
        for key in ("stdin", "stdout", "stderr", "to_child", "from_child", "pidfd"):
            fd = child.get(key)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                child[key] = None

    def kill_everything(self, child: dict[str, Any] | None = None) -> None:
        """Kill every process of this submission and reap them all (no survivors, no zombies)."""
        if self.isolated and os.getpid() == 1:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif child is not None:
            try:
                os.killpg(child["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == 0:
                break

    def pump(self, child: dict[str, Any], outcome: Outcome, deadline: float, stdin_data: bytes = b"", want_message: bool = False) -> dict[str, Any] | None:
        """Move bytes until the child exits (or, with ``want_message``, answers), with caps."""
        cap = self.limits.output_kb * 1024
        pending = memoryview(stdin_data)
        if not stdin_data and child["stdin"] is not None:
            os.close(child["stdin"])
            child["stdin"] = None
        out = bytearray(outcome.stdout)
        err = bytearray(outcome.stderr)
        err_total = 0
        message_buf = bytearray()
        exited_at = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                outcome.status = "tle"
                outcome.notes.append("wall clock limit")
                break
            reads = [fd for fd in (child["stdout"], child["stderr"], child.get("from_child")) if fd is not None]
            writes = [child["stdin"]] if child["stdin"] is not None and pending else []
            if exited_at is None:
                done = self._reap(child, outcome)
                if done:
                    exited_at = now
            if exited_at is not None and (not reads or now - exited_at > 0.05):
                break
            watch = reads + ([child["pidfd"]] if exited_at is None and child.get("pidfd") is not None else [])
            timeout = min(deadline - now, 0.05 if exited_at is None else 0.01)
            try:
                r_ready, w_ready, _ = select.select(watch, writes, [], max(timeout, 0))
            except InterruptedError:
                continue
            r_ready = [fd for fd in r_ready if fd != child.get("pidfd")]
            for fd in w_ready:
                try:
                    written = os.write(fd, pending[: 1 << 16])
                    pending = pending[written:]
                except (BrokenPipeError, OSError):
                    pending = memoryview(b"")
                if not pending:
                    os.close(child["stdin"])
                    child["stdin"] = None
            for fd in r_ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                key = "stdout" if fd == child["stdout"] else "stderr" if fd == child["stderr"] else "from_child"
                if not chunk:
                    os.close(fd)
                    child[key] = None
                    continue
                if key == "stdout":
                    out += chunk
                    if len(out) > cap:
                        outcome.status = "ole"
                        outcome.notes.append("stdout limit")
                        del out[cap:]
                        outcome.stdout, outcome.stderr = bytes(out), bytes(err)
                        return None
                elif key == "stderr":
                    err_total += len(chunk)
                    err += chunk
                    if len(err) > 4 * STDERR_TAIL:
                        del err[: len(err) - STDERR_TAIL]
                    if err_total > cap:
                        outcome.status = "ole"
                        outcome.notes.append("stderr limit")
                        outcome.stdout, outcome.stderr = bytes(out), bytes(err)
                        return None
                else:
                    message_buf += chunk
                    if len(message_buf) >= 4 and int.from_bytes(message_buf[:4], "big") > MAX_RESULT_BYTES:
                        outcome.status = "ole"
                        outcome.notes.append("return value too large")
                        outcome.stdout, outcome.stderr = bytes(out), bytes(err)
                        return None
                    message = _complete_message(message_buf)
                    if message is not None and want_message:
                        outcome.stdout, outcome.stderr = bytes(out), bytes(err)
                        return message
                    if message is not None:
                        outcome.result = message.get("result")
                        del message_buf[:]
        outcome.stdout, outcome.stderr = bytes(out), bytes(err)
        return None

    def _reap(self, child: dict[str, Any], outcome: Outcome) -> bool:
        if child.get("exited"):
            return True
        try:
            pid, status, usage = os.wait4(child["pid"], os.WNOHANG)
        except ChildProcessError:
            child["exited"] = True
            return True
        if pid == 0:
            return False
        child["exited"] = True
        outcome.cpu_ms += (usage.ru_utime + usage.ru_stime) * 1000
        outcome.max_rss_kb = max(outcome.max_rss_kb, usage.ru_maxrss)
        if os.WIFSIGNALED(status):
            outcome.signal = os.WTERMSIG(status)
        else:
            outcome.exit_code = os.WEXITSTATUS(status)
        return True

    def classify(self, child: dict[str, Any], outcome: Outcome, cpu_limit_s: float) -> None:
        """Turn exit status and usage into ok / re / tle / mle (ole and wall tle are set by pump)."""
        outcome.wall_ms = (time.monotonic() - child["start"]) * 1000
        if outcome.status in ("ole", "tle"):
            return
        if not child.get("exited"):
            self._reap(child, outcome)
        memory_kb = self.limits.memory_mb * 1024
        if outcome.signal in (signal.SIGXCPU,) or (outcome.signal == signal.SIGKILL and outcome.cpu_ms >= cpu_limit_s * 1000 * 0.95):
            outcome.status = "tle"
        elif outcome.exit_code == EXIT_MEMORY or b"std::bad_alloc" in outcome.stderr or (outcome.signal is not None and outcome.max_rss_kb >= 0.9 * memory_kb):
            outcome.status = "mle"
        elif outcome.exit_code == EXIT_NOT_JSON:
            outcome.status = "not_json"
        elif outcome.exit_code == EXIT_BAD_ENTRY:
            outcome.status = "bad_entry"
        elif outcome.signal is not None or (outcome.exit_code or 0) != 0:
            outcome.status = "re"
        else:
            outcome.status = "ok"

    # -- steps --------------------------------------------------------------------------------
    def compile(self, source_path: str) -> Outcome:
        outcome = Outcome()
        argv = list(self.language.compile or ())

        def target() -> None:
            os.execv(argv[0], argv)

        child = self.spawn(target, step="compile")
        self.pump(child, outcome, time.monotonic() + self.limits.compile_time_s * 1.5 + 1)
        self.classify(child, outcome, self.limits.compile_time_s)
        self.close_child(child)
        self.kill_everything(child)
        return outcome

    def wall_s(self, time_s: float | None) -> float:
        return (time_s or self.limits.time_s) * self.limits.wall_factor + self.limits.wall_grace_s

    def run_stdin(self, path: str, stdin: str, time_s: float | None = None) -> Outcome:
        outcome = Outcome()
        if self.language.warm:
            target = lambda: (python_streams(), python_main(path))  # noqa: E731
        else:
            argv = list(self.language.run)

            def target() -> None:
                os.execv(os.path.join(self.workdir, argv[0][2:]) if argv[0].startswith("./") else argv[0], argv)

        child = self.spawn(target, time_s=time_s)
        self.pump(child, outcome, child["start"] + self.wall_s(time_s), stdin.encode("utf-8", "surrogateescape"))
        self.classify(child, outcome, time_s or self.limits.time_s)
        self.close_child(child)
        self.kill_everything(child)
        return outcome

    def run_call(self, path: str, entry: dict[str, Any], args_json: str, time_s: float | None = None) -> Outcome:
        """One call in the long-lived call child (started on first use, restarted after a failure)."""
        outcome = Outcome()
        if self.call_child is None:
            self.call_child = self.spawn(lambda: (python_streams(), python_calls(path, entry, 3, 4)), extra_fds=2, step="calls")
        child = self.call_child
        start = time.monotonic()
        cpu_before = _self_cpu_ms(child["pid"])
        try:
            write_message(child["to_child"], {"args_json": args_json})
        except (BrokenPipeError, OSError):
            pass
        message = self.pump(child, outcome, start + self.wall_s(time_s), want_message=True)
        outcome.wall_ms = (time.monotonic() - start) * 1000
        if message is not None:
            outcome.result = message.get("result")
            outcome.cpu_ms = _self_cpu_ms(child["pid"]) - cpu_before
            outcome.status = "tle" if outcome.cpu_ms > (time_s or self.limits.time_s) * 1000 else "ok"
            if outcome.status == "ok":
                return outcome
            outcome.notes.append("cpu time limit")
            self.close_child(child)
            self.kill_everything(child)
            self.call_child = None
            return outcome
        if outcome.status not in ("ole", "tle"):
            self.classify(child, outcome, time_s or self.limits.time_s)
            if outcome.status == "ok":
                outcome.status = "re"
                outcome.notes.append("exited without answering")
        self.close_child(child)
        self.kill_everything(child)
        self.call_child = None
        return outcome

    def run_asserts(self, path: str, nonce: str) -> Outcome:
        outcome = Outcome()
        child = self.spawn(lambda: (python_streams(), python_asserts(path, nonce, 4)), extra_fds=2)
        os.close(child["to_child"])
        child["to_child"] = None
        self.pump(child, outcome, child["start"] + self.limits.wall_s)
        self.classify(child, outcome, self.limits.time_s)
        self.close_child(child)
        self.kill_everything(child)
        return outcome

    def finish(self) -> None:
        if self.call_child is not None:
            self.close_child(self.call_child)
            self.kill_everything(self.call_child)
            self.call_child = None


def _complete_message(buf: bytearray) -> dict[str, Any] | None:
    if len(buf) < 4:
        return None
    size = int.from_bytes(buf[:4], "big")
    if len(buf) < 4 + size:
        return None
    try:
        return json.loads(bytes(buf[4 : 4 + size]))
    except ValueError:
        return {"result": None}


def _self_cpu_ms(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) * 1000 / ticks
    except (OSError, IndexError, ValueError):
        return 0.0


# ---------------------------------------------------------------------------------------------
# Supervisor main loop: messages from the judge
# ---------------------------------------------------------------------------------------------
def serve_submission(ctl_fd: int, res_fd: int, setup: dict[str, Any], language: Language, uid: int | None, isolated: bool, workdir: str) -> None:
    """PID 1's loop: write the program, compile it, then run the tests the judge sends."""
    limits = Limits.from_any(setup["limits"])
    supervisor = Supervisor(language, limits, uid, isolated, workdir)
    for name, content in setup["files"].items():
        path = os.path.join(workdir, name)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(content)
        os.chmod(path, 0o644)
    for name in [m for m in sys.modules if m.split(".")[0] in ("sandbox", "harness", "trainers")]:
        del sys.modules[name]
    source = os.path.join(workdir, language.source)
    if language.warm:
        for name in setup["files"]:
            if name.endswith(".py"):
                compile_program(os.path.join(workdir, name))
    if language.compile:
        compiled = supervisor.compile(source)
        write_message(res_fd, {"compile": compiled.to_message()})
        if compiled.status != "ok":
            return
    else:
        write_message(res_fd, {"compile": {"status": "ok"}})
    entry = setup.get("entry") or {}
    while True:
        try:
            message = read_message(ctl_fd)
        except Exception:
            break
        if message.get("stop"):
            break
        kind = message["kind"]
        time_s = message.get("time_s")
        if kind == "stdin":
            outcome = supervisor.run_stdin(source, message.get("input", ""), time_s)
        elif kind == "call":
            outcome = supervisor.run_call(source, entry, message["args_json"], time_s)
        elif kind == "assert":
            outcome = supervisor.run_asserts(os.path.join(workdir, message["file"]), message["nonce"])
        else:
            outcome = Outcome(status="sandbox", notes=[f"unknown test kind {kind!r}"])
        write_message(res_fd, {"outcome": outcome.to_message()})
    supervisor.finish()
