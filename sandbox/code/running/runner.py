"""Inside the sandbox: the supervisor (PID 1 of the submission's namespaces).

The supervisor is our code, running as root inside fresh namespaces and a chroot. For each test
it forks a child (``rlvr.sandbox.code.isolation.child``) that joins the sandbox's cgroup, drops to the
sandbox's uid, applies rlimits and the system-call filter, and runs the program. The supervisor
feeds input without ever blocking on it, drains output with caps, enforces the wall clock and
the CPU budget (read from the cgroup, children and threads included), and afterwards kills
every other process in the namespace (``kill(-1)`` from PID 1 reaches exactly those), reaps
them and gives the next test an empty ``/tmp``. Every verdict reason it reports comes from what
it observed: its own clock, the kernel's usage and out-of-memory counters, the exit status. It
never sees expected outputs; it reports raw outputs to the judge outside.
"""

from __future__ import annotations

import fcntl
import os
import resource
import select
import signal
import time
from typing import Any, Callable

from rlvr.sandbox.code.isolation.child import (
    enter_child,
    python_main,
    python_streams,
)
from rlvr.sandbox.code.isolation.ipc import remove_ipc_objects
from rlvr.sandbox.code.isolation.primitives import (
    PROGRAM_DIR,
    SCRATCH_DIR,
    ResourceLimits,
    fresh_scratch,
    read_bytes,
)
from rlvr.sandbox.code.rules.languages import Language
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.running.channels import (
    BUSY_PATIENCE,
    TOTAL_LIMIT_NOTE,
    Feed,
    Outcome,
    hard_patience,
)
from rlvr.sandbox.code.running.output import SANDBOX_RUN, Capped, Sink, StrippedLines, sandbox_cap, tail
from rlvr.sandbox.code.running.pump import PIPE_BYTES, Child, SetupFailed, pump

READY_WAIT_S = 10.0
F_SETPIPE_SZ = 1031


class Supervisor:
    """Runs one submission's tests inside the sandbox (PID 1 when isolated)."""

    def __init__(
        self,
        language: Language,
        limits: Limits,
        uid: int | None,
        isolated: bool,
        workdir: str,
        cgroup: Any,
        use_seccomp: bool,
    ):
        self.language, self.limits, self.uid, self.isolated = language, limits, uid, isolated
        self.cgroup, self.use_seccomp = cgroup, use_seccomp
        self.prog_dir = PROGRAM_DIR if isolated else os.path.join(workdir, "prog")
        self.scratch = SCRATCH_DIR if isolated else os.path.join(workdir, "tmp")
        self.call_child: Child | None = None
        #: The per-submission stdin runner (``stdin_process="submission"``), started on first use.
        self.stdin_child: Child | None = None
        #: The sandbox's CPU when the call child's last batch ended (None: something else ran
        #: since, or there is no call child): where its next call's clock starts.
        self.calls_cpu: float | None = None
        #: Something ran in ``/tmp`` since it was last replaced.
        self.scratch_dirty = False

    # -- process plumbing ----------------------------------------------------------------------
    def resource_limits(self, step: str, time_s: float | None = None) -> ResourceLimits:
        lim = self.limits
        memory = None if self.cgroup is not None else lim.memory_mb << 20
        if step == "compile":
            return ResourceLimits(
                lim.compile_time_s,
                None if self.cgroup is not None else lim.compile_memory_mb << 20,
                max(lim.processes, 16),
                max(lim.open_files, 64),
                lim.file_kb << 10,
            )
        # A call or tester child lives for many calls: the CPU rlimit is the submission's
        # budget (a backstop); each call is held to its own budget by the supervisor.
        cpu = lim.total_s if step in ("calls", "tester", "runner") else (time_s or lim.time_s)
        return ResourceLimits(cpu, memory, lim.processes, lim.open_files, lim.file_kb << 10)

    def spawn(
        self, target: Callable[[], None], step: str = "test", time_s: float | None = None, channels: bool = False
    ) -> Child:
        if step != "runner" and self.stdin_child is not None:
            self.stop_runner()  # nothing it left running may share the sandbox with another process
        self._fresh_scratch()
        pipes = {name: os.pipe() for name in ("stdin", "stdout", "stderr")}
        extra = [os.pipe(), os.pipe()] if channels else []
        for r, _ in [pipes["stdout"], *extra]:
            try:
                fcntl.fcntl(r, F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                pass
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ready_r)
                if self.cgroup is not None:
                    self.cgroup.join_program()
                fds = {0: pipes["stdin"][0], 1: pipes["stdout"][1], 2: pipes["stderr"][1]}
                if channels:
                    fds[3], fds[4] = extra[0][0], extra[1][1]
                enter_child(fds, self.uid, self.resource_limits(step, time_s), self.scratch, ready_w, self.use_seccomp)
            except BaseException:
                os._exit(125)
            try:
                target()
            except BaseException:
                pass
            os._exit(125)
        os.close(ready_w)
        for name, (r, w) in pipes.items():
            os.close(r if name == "stdin" else w)
        if channels:
            os.close(extra[0][0])
            os.close(extra[1][1])
        child = Child(
            pid,
            os.pidfd_open(pid),
            time.monotonic(),
            {
                "stdin": pipes["stdin"][1],
                "stdout": pipes["stdout"][0],
                "stderr": pipes["stderr"][0],
                "to_child": extra[0][1] if channels else None,
                "from_child": extra[1][0] if channels else None,
            },
        )
        for key in ("stdin", "to_child"):
            if child.fds[key] is not None:
                os.set_blocking(child.fds[key], False)
        ready = select.select([ready_r], [], [], READY_WAIT_S)[0] and os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        if not ready:
            self.close_child(child)
            self.kill_everything(child)
            raise SetupFailed(f"the {step} process could not enter the sandbox")
        child.start = time.monotonic()
        return child

    def close_child(self, child: Child) -> None:
        for key, fd in child.fds.items():
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                child.fds[key] = None
        if child.pidfd >= 0:
            os.close(child.pidfd)
            child.pidfd = -1

    def kill_everything(self, child: Child | None = None, sweep_ipc: bool = True) -> None:
        """Kill every process of this submission and reap them all (no survivors, no zombies).
        ``sweep_ipc=False`` at PID 1's end: its IPC namespace goes with it."""
        if self.isolated and os.getpid() == 1:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif child is not None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        if self.isolated and os.getpid() == 1 and sweep_ipc:
            remove_ipc_objects()  # this namespace's System V objects are all the program's
        if self.call_child is not None and self.call_child is not child and self.isolated:
            self.close_child(self.call_child)
            self.call_child = None
        if self.stdin_child is not None and self.stdin_child is not child and self.isolated:
            self.close_child(self.stdin_child)
            self.stdin_child = None

    def cpu_s(self, child: Child) -> float:
        """CPU seconds the sandbox's programs used so far: the cgroup's count (every process
        and thread) less the supervisor's own, or, without a cgroup, the child's (kernel ticks)."""
        if self.cgroup is not None:
            own = resource.getrusage(resource.RUSAGE_SELF)
            return self.cgroup.cpu_ns() / 1e9 - (own.ru_utime + own.ru_stime)
        return child.cpu_s if child.exited else tree_cpu_s(child.pid)

    def reap(self, child: Child) -> bool:
        """Has ``child`` exited? Collects its status and usage once it has, and on every call
        the zombies of processes the program left behind (``reap_orphans``)."""
        self.reap_orphans(child)
        return child.exited or self._collect(child)

    def _collect(self, child: Child) -> bool:
        """``wait4`` without blocking: True (status and usage recorded) once ``child`` exited."""
        try:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        except ChildProcessError:
            child.exited = True
            return True
        if pid == 0:
            return False
        child.exited, child.status = True, status
        child.cpu_s = max(0.0, usage.ru_utime + usage.ru_stime - child.cpu_base)
        child.max_rss_kb = usage.ru_maxrss
        return True

    def reap_orphans(self, child: Child | None = None) -> None:
        """Collect the zombies of orphans (processes whose parent exited: reparented to PID 1,
        or unsafe to this subreaper) as an init does, while tests run and between them. Left
        until ``kill_everything``, each would hold one of the sandbox's ``processes`` until
        the test ends, and in the stdin runner until the submission ends: a program that
        leaves one orphan per test would find ``fork`` failing after about thirty tests, a
        verdict of our bookkeeping, not of the program. A child this supervisor tracks
        (``child``, the call child, the stdin runner) is collected into its record, status and
        usage, as ``reap`` does. At most ``2 * processes`` (64 at least) per call, so a program
        making zombies as fast as this reaps them cannot hold the supervisor from its clocks:
        the rest are taken on its next pass, at most 20 ms later."""
        for _ in range(max(64, 2 * self.limits.processes)):
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            tracked = [c for c in (child, self.call_child, self.stdin_child) if c is not None and c.pid == info.si_pid]
            if tracked and not tracked[0].exited:
                self._collect(tracked[0])
                continue
            try:
                os.waitpid(info.si_pid, os.WNOHANG)
            except ChildProcessError:
                return

    def classify(self, child: Child, outcome: Outcome, cpu_limit_s: float, cpu_before: float, oom_before: int) -> None:
        """Turn what was observed into ok / re / tle / mle (ole and wall-clock tle are set by
        ``pump``). Never from what the program printed or which exit code it chose."""
        outcome.wall_ms = (time.monotonic() - child.start) * 1000
        if not child.exited:
            self.reap(child)
        outcome.cpu_ms = max(self.cpu_s(child) - cpu_before, child.cpu_s) * 1000
        outcome.max_rss_kb = child.max_rss_kb
        if child.exited:
            if os.WIFSIGNALED(child.status):
                outcome.signal = os.WTERMSIG(child.status)
            else:
                outcome.exit_code = os.WEXITSTATUS(child.status)
        if outcome.status in ("ole", "tle"):
            return
        # The kernel enforces RLIMIT_CPU on tick-sampled time, a little ahead of the precise count:
        # SIGXCPU with (almost) the budget used is the limit firing, not a signal the program chose.
        rlimit_fired = outcome.signal == signal.SIGXCPU and outcome.cpu_ms >= 0.9 * max(1.0, cpu_limit_s) * 1000
        if outcome.cpu_ms >= cpu_limit_s * 1000 or rlimit_fired:
            outcome.status = "tle"
            outcome.notes.append("cpu time limit")
        elif self.cgroup is not None and self.cgroup.oom_kills() > oom_before:
            outcome.status = "mle"
        elif (
            self.cgroup is None
            and outcome.signal is not None
            and outcome.max_rss_kb >= 0.9 * self.limits.memory_mb * 1024
        ):
            outcome.status = "mle"
        elif outcome.signal is not None or (outcome.exit_code or 0) != 0:
            outcome.status = "re"
        else:
            outcome.status = "ok"

    def counters(self) -> tuple[float, int]:
        if self.cgroup is None:
            return 0.0, 0
        own = resource.getrusage(resource.RUSAGE_SELF)
        return self.cgroup.cpu_ns() / 1e9 - (own.ru_utime + own.ru_stime), self.cgroup.oom_kills()

    def reset_scratch(self) -> None:
        """Mark ``/tmp`` used: the next process starts in an empty one (replaced by ``spawn``
        just before it forks, so a sandbox's last test does not pay for a replacement nobody
        uses; no process of the sandbox runs in between)."""
        self.scratch_dirty = True

    def _fresh_scratch(self) -> None:
        if not self.scratch_dirty:
            return
        if self.isolated:
            fresh_scratch(self.limits.scratch_mb, self.limits.scratch_files)
        else:
            import shutil  # unsafe mode only: not loaded into the zygote (it brings bz2 and lzma)

            shutil.rmtree(self.scratch, ignore_errors=True)
            os.makedirs(self.scratch, mode=0o777)
        self.scratch_dirty = False

    def run_process(
        self,
        target: Callable[[], None],
        step: str,
        time_s: float,
        wall_s: float,
        stdin: bytes = b"",
        reset: bool = True,
        budget_s: float | None = None,
        stdout: Sink | None = None,
    ) -> Outcome:
        """One process from start to exit: a stdin test or the compiler. ``budget_s``: what is
        left of the submission's ``total_s``; the process never runs past it. ``stdout``: what
        is kept of its output (by default the end of it only)."""
        outcome = Outcome()
        self.calls_cpu = None  # this process's CPU is its own, not the next call's
        cpu_before, oom_before = self.counters()
        child = self.spawn(target, step=step, time_s=time_s)
        if self.cgroup is None:
            cpu_before = 0.0
        hard_end = child.start + budget_s if budget_s is not None else float("inf")
        pump(
            child,
            outcome,
            stdout or tail(),
            tail(),
            self.reap,
            self.cpu_s,
            lambda: min(child.start + wall_s, hard_end),
            lambda: cpu_before + time_s,
            Feed(stdin),
            patience=lambda: hard_patience(BUSY_PATIENCE * wall_s, child.start + wall_s, hard_end),
        )
        if outcome.status == "tle" and time.monotonic() >= hard_end:
            outcome.notes.append(TOTAL_LIMIT_NOTE)
        self.classify(child, outcome, time_s, cpu_before, oom_before)
        self.close_child(child)
        self.kill_everything(child)
        if reset:
            self.reset_scratch()
        return outcome

    # -- steps ---------------------------------------------------------------------------------
    def compile(self) -> Outcome:
        argv = [
            a.format(src=os.path.join(self.prog_dir, self.language.source), out=os.path.join(self.scratch, "main"))
            for a in self.language.compile or ()
        ]
        if self.cgroup is not None:
            self.cgroup.set_memory(self.limits.compile_memory_mb << 20)
        try:
            outcome = self.run_process(
                lambda: os.execv(argv[0], argv),
                "compile",
                self.limits.compile_time_s,
                self.limits.compile_time_s * 1.5 + 1,
                b"",
                reset=False,
            )
        finally:
            if self.cgroup is not None:
                self.cgroup.set_memory(self.limits.memory_mb << 20)
        return outcome

    def wall_s(self, time_s: float | None) -> float:
        return (time_s or self.limits.time_s) * self.limits.wall_factor + self.limits.wall_grace_s

    def run_stdin(
        self,
        stdin: bytes,
        time_s: float | None,
        budget_s: float | None = None,
        graded: dict[str, Any] | None = None,
    ) -> Outcome:
        """One stdin test in a fresh process. ``graded`` (a test whose output is compared, not
        shown): stdout is kept as the comparison reads it (``StrippedLines`` under limits of the
        submission alone; the judge applies the expected output's own outside), and with
        ``system_exit`` a Python ``SystemExit`` ends the program as a normal exit does, as in
        LiveCodeBench's runner. Without it, stdout is kept raw up to ``output_kb``."""
        path = os.path.join(self.prog_dir, self.language.source)
        system_exit = bool(graded and graded.get("system_exit"))
        if self.language.warm:
            target = lambda: (python_streams(self.isolated), python_main(path, system_exit))  # noqa: E731
        else:
            argv = [a.format(bin=os.path.join(self.prog_dir, "main")) for a in self.language.run]
            target = lambda: os.execv(argv[0], argv)  # noqa: E731
        limit = time_s or self.limits.time_s
        return self.run_process(
            target, "test", limit, self.wall_s(time_s), stdin, budget_s=budget_s, stdout=self.kept_stdout(graded)
        )

    def kept_stdout(self, graded: dict[str, Any] | None) -> Sink:
        if graded is not None:
            return StrippedLines(sandbox_cap(self.limits.output_kb, self.limits.result_mb), SANDBOX_RUN)
        return Capped(self.limits.output_kb << 10)

    def stop_runner(self) -> None:
        """End the stdin runner and everything it started; the next process gets a fresh ``/tmp``."""
        runner, self.stdin_child = self.stdin_child, None
        if runner is not None:
            self.close_child(runner)
            self.kill_everything(runner)
            self.reset_scratch()

    def finish(self) -> None:
        children = [child for child in (self.call_child, self.stdin_child) if child is not None]
        for child in children:
            self.close_child(child)
        for child in children:
            self.kill_everything(child)
        self.call_child = self.stdin_child = None


def tree_cpu_s(pid: int) -> float:
    """A live process's CPU so far, its reaped children's included, as ``wait4`` will count it
    (``/proc``, clock ticks; ``rlvr.sandbox.wire.process_cpu_s`` counts the process alone);
    0 when it cannot be read."""
    try:
        fields = read_bytes(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
