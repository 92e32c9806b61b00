"""What a fresh forked interpreter per stdin test costs at the least, and where a test process's
own CPU goes, step by step (issue 41: why a further stdin test is not halved).

Three measurements, in a process holding what a judge's zygote holds (the sandbox's modules and the
zygote's preloads, frozen for the garbage collector), each test a trivial program over a pipe:

* ``fork``: the supervisor forks each test itself (as PID 1 does); page faults and CPU of the
  supervisor and of the test process;
* ``helper``: a helper forked once clones each test with ``CLONE_PARENT`` (the test is still the
  supervisor's child, so it reaps it and reads its usage), so the supervisor's own pages are never
  write-protected by a test's fork: the design of a "test zygote";
* ``setup``: the test process enters the sandbox before the program, once through the sandbox's
  own ``enter_child`` (Python) and once through the same steps written in C (compiled here with the
  system's C compiler, called through ``ctypes``), then makes its standard streams
  (``python_streams``): what a test process costs with its setup in a native helper, the lever
  left for "overhead halved" (issue 41);
* ``steps``: the test process runs the sandbox's own steps (``enter_child``'s, then
  ``python_streams``) before the program; faults and CPU of each.

    python benchmarks/fork_floor.py                 # as root (the steps drop privileges)
    python benchmarks/fork_floor.py --tests 2000

No namespace, cgroup or mount is made: these are the costs of the processes alone.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import functools
import gc
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rlvr.sandbox.code.isolation.zygote  # noqa: E402,F401  (what a judge's zygote loads, as judge_main forks it)
from rlvr.sandbox.code.isolation import seccomp  # noqa: E402
from rlvr.sandbox.code.isolation.child import enter_child, python_streams, sandbox_environment  # noqa: E402
from rlvr.sandbox.code.isolation.primitives import ResourceLimits, apply_rlimits, drop_privileges  # noqa: E402
from rlvr.sandbox.code.isolation.zygote import PRELOAD  # noqa: E402

PROGRAM = compile("print(sum(range(10)))", "main.py", "exec")
EXPECTED = b"45\n"
LIMITS = ResourceLimits(cpu_s=2, memory_bytes=None, processes=32, open_files=64, file_bytes=1 << 20)
SANDBOX_UID = 65000
CLONE_PARENT, SIGCHLD, NR_CLONE = 0x00008000, 17, 56
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
PRCTL = LIBC.prctl
PRCTL.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]


def cpu_s() -> float:
    return time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)


def run_program(out_fd: int) -> None:
    os.dup2(out_fd, 1)
    os.close(out_fd)
    exec(PROGRAM, {"__name__": "__main__"})
    sys.stdout.flush()
    os._exit(0)


def one_test(spawn: Callable[[int], int]) -> float:
    """Spawn a test writing to a fresh pipe, read it to the end, reap it; its CPU seconds."""
    r, w = os.pipe()
    pid = spawn(w)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    if status != 0 or out != EXPECTED:
        raise SystemExit(f"a test went wrong: status {status}, output {out[:200]!r}")
    return usage.ru_utime + usage.ru_stime


def forked(w: int) -> int:
    pid = os.fork()
    if pid == 0:
        run_program(w)
    return pid


#: ``enter_child``'s steps in its order, in C: the test process's setup as a native helper would
#: do it (no interpreter objects touched). Descriptors: 0 ``in_fd``, 1 and 2 ``out_fd``, 3 the
#: ready pipe, which gets ``1`` and is closed last; returns the failing step's number, 0 when all held.
NATIVE_SETUP = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int limit(int resource, unsigned long soft, unsigned long hard) {
    struct rlimit r = {soft, hard};
    return setrlimit(resource, &r);
}

int enter_sandbox(int in_fd, int out_fd, int ready_fd, int uid, unsigned long cpu_s, unsigned long processes,
                  unsigned long open_files, unsigned long file_bytes, const char *workdir, const void *filter) {
    int moves[4][2] = {{0, in_fd}, {1, out_fd}, {2, out_fd}, {3, ready_fd}}, parked[4];
    if (setsid() < 0) return 1;
    for (int i = 0; i < 4; i++)
        if ((parked[i] = fcntl(moves[i][1], F_DUPFD, 256)) < 0) return 2;
    for (int i = 0; i < 4; i++)
        if (dup2(parked[i], moves[i][0]) < 0) return 2;
    if (syscall(SYS_close_range, 4U, ~0U, 0) != 0) return 2;
    if (chdir(workdir) != 0) return 3;
    int adj = open("/proc/self/oom_score_adj", O_WRONLY);
    if (adj >= 0) { /* best effort, as in enter_child */
        if (write(adj, "1000", 4) != 4) {}
        close(adj);
    }
    if (limit(RLIMIT_CPU, cpu_s, cpu_s + 1) || limit(RLIMIT_NPROC, processes, processes) ||
        limit(RLIMIT_NOFILE, open_files, open_files) || limit(RLIMIT_FSIZE, file_bytes, file_bytes) ||
        limit(RLIMIT_CORE, 0, 0)) return 4;
    if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) return 5;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || getuid() == 0 || geteuid() == 0) return 5;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, filter, 0, 0)) return 6;
    if (write(3, "1", 1) != 1) return 7;
    close(3);
    return 0;
}
"""


def build_native_setup(directory: str) -> Callable[..., int] | None:
    """Compile ``NATIVE_SETUP`` with the system's C compiler; None (with a note) without one.
    Spawned with ``posix_spawnp``: ``subprocess`` would load ``threading``, whose after-fork hook
    then runs in every test process (~90 more faults each, a process no sandbox forks)."""
    source, library = os.path.join(directory, "setup.c"), os.path.join(directory, "setup.so")
    Path(source).write_text(NATIVE_SETUP)
    argv = ["cc", "-O2", "-shared", "-fPIC", "-o", library, source]
    try:
        _, status = os.waitpid(os.posix_spawnp(argv[0], argv, os.environ), 0)
    except FileNotFoundError:
        status = -1
    if status != 0:
        print("no working C compiler (cc): the native setup is not measured")
        return None
    enter = ctypes.CDLL(library).enter_sandbox
    enter.argtypes = [ctypes.c_int] * 4 + [ctypes.c_ulong] * 4 + [ctypes.c_char_p, ctypes.c_void_p]
    enter.restype = ctypes.c_int
    return enter


def set_up(w: int, workdir: str, native: Callable[[int, int, int], int] | None) -> int:
    """Fork a test that enters the sandbox (``enter_child``, or ``native(in_fd, out_fd, ready_fd)``:
    the same steps in C, everything else bound before any fork), makes its standard streams and
    runs the program; wait for its ready byte, as PID 1 does."""
    null = os.open(os.devnull, os.O_RDONLY)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if native is None:
                enter_child({0: null, 1: w, 2: w}, SANDBOX_UID, LIMITS, workdir, ready_w, True)
            elif native(null, w, ready_w) != 0:
                os._exit(125)
        except BaseException:
            os._exit(125)
        python_streams(False)
        exec(PROGRAM, {"__name__": "__main__"})
        sys.stdout.flush()
        os._exit(0)
    os.close(null)
    os.close(ready_w)
    ready = os.read(ready_r, 1)
    os.close(ready_r)
    if ready != b"1":
        raise SystemExit(f"a test process could not enter the sandbox ({'C' if native else 'enter_child'})")
    return pid


class Helper:
    """A process forked once that clones each test with ``CLONE_PARENT`` on request (the pipe's
    write end passed over a Unix socket)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            self.serve(theirs)
        theirs.close()
        self.sock = ours

    @staticmethod
    def serve(sock: socket.socket) -> None:
        api = ctypes.pythonapi
        while True:
            message, fds, _, _ = socket.recv_fds(sock, 16, 1)
            if not message:
                os._exit(0)
            api.PyOS_BeforeFork()
            pid = LIBC.syscall(NR_CLONE, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
            if pid == 0:
                api.PyOS_AfterFork_Child()
                sock.close()
                run_program(fds[0])
            api.PyOS_AfterFork_Parent()
            os.close(fds[0])
            sock.send(int(pid).to_bytes(4, "little"))

    def spawn(self, w: int) -> int:
        socket.send_fds(self.sock, [b"x"], [w])
        return int.from_bytes(self.sock.recv(4), "little")

    def usage(self) -> tuple[int, float]:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.sock.close()
        os.waitpid(self.pid, 0)


def per_test(spawn: Callable[[int], int], tests: int, helper: Helper | None = None) -> dict[str, float]:
    """Mean faults and CPU-ms per test of the supervisor, the tests and the helper."""
    for _ in range(30):
        one_test(spawn)
    own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    helper0 = helper.usage() if helper else (0, 0.0)
    start = time.perf_counter()
    for _ in range(tests):
        one_test(spawn)
    wall = time.perf_counter() - start
    own1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    helper1 = helper.usage() if helper else (0, 0.0)
    return {
        "supervisor faults": (own1.ru_minflt - own0.ru_minflt) / tests,
        "test faults": (kids1.ru_minflt - kids0.ru_minflt) / tests,
        "helper faults": (helper1[0] - helper0[0]) / tests,
        "supervisor CPU-ms": 1e3 * (own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime) / tests,
        "test CPU-ms": 1e3 * (kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) / tests,
        "helper CPU-ms": 1e3 * (helper1[1] - helper0[1]) / tests,
        "wall ms": 1e3 * wall / tests,
    }


def sandbox_steps(workdir: str, tests: int) -> dict[str, tuple[float, float]]:
    """Median faults and CPU-µs of each of the test process's steps. They are
    ``child.enter_child``'s steps written out in its order (calling it would time them as one),
    so a change to ``enter_child`` belongs here too."""
    rows: dict[str, list[tuple[int, float]]] = {}
    for _ in range(tests):
        out_r, out_w = os.pipe()
        log_r, log_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            marks: list[tuple[str, int, float]] = []

            def mark(name: str) -> None:
                marks.append((name, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, cpu_s()))

            mark("fork's return")
            os.setsid()
            mark("setsid")
            fds = {0: os.open("/dev/null", os.O_RDONLY), 1: out_w, 2: out_w, 3: log_w}
            parked = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 256) for target, source in fds.items()}
            for target, source in parked.items():
                os.dup2(source, target)
            os.closerange(4, 65536)
            mark("descriptors")
            os.chdir(workdir)
            adj = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(adj, b"1000")
            os.close(adj)
            mark("chdir, oom_score_adj")
            apply_rlimits(LIMITS)
            mark("rlimits")
            drop_privileges(SANDBOX_UID)
            mark("privilege drop")
            seccomp.install()
            mark("seccomp filter")
            python_streams(False)
            mark("python_streams")
            exec(PROGRAM, {"__name__": "__main__"})
            sys.stdout.flush()
            mark("program")
            os.write(3, json.dumps(marks).encode())
            os._exit(0)
        os.close(out_w)
        os.close(log_w)
        while os.read(out_r, 4096):
            pass
        log = b""
        while chunk := os.read(log_r, 65536):
            log += chunk
        os.close(out_r)
        os.close(log_r)
        os.waitpid(pid, 0)
        marks = json.loads(log)
        rows.setdefault(marks[0][0], []).append((marks[0][1], 0.0))
        for (_, faults0, cpu0), (name, faults1, cpu1) in zip(marks, marks[1:]):
            rows.setdefault(name, []).append((faults1 - faults0, (cpu1 - cpu0) * 1e6))
    return {
        name: (statistics.median(f for f, _ in values), statistics.median(c for _, c in values))
        for name, values in rows.items()
    }


def filter_attach_us(program: Callable[[], None], tests: int) -> float:
    """Median CPU-µs of attaching a filter (``program`` installs it) in a fresh child."""
    times = []
    for _ in range(tests):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            PRCTL(38, 1, None, 0, 0)  # PR_SET_NO_NEW_PRIVS, as before our filter
            start = cpu_s()
            program()
            os.write(w, repr((cpu_s() - start) * 1e6).encode())
            os._exit(0)
        os.close(w)
        times.append(float(os.read(r, 64)))
        os.close(r)
        os.waitpid(pid, 0)
    return statistics.median(times)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


#: One instruction, allow everything (BPF_RET|BPF_K, SECCOMP_RET_ALLOW), built before any fork.
_ALLOW = (_SockFilter * 1)(_SockFilter(0x06, 0, 0, 0x7FFF0000))
_ALLOW_PROG = _SockFprog(1, _ALLOW)
_ALLOW_ADDRESS = ctypes.addressof(_ALLOW_PROG)


def one_instruction_filter() -> None:
    """Attach a filter of one instruction: what attaching costs by itself."""
    if PRCTL(22, 2, _ALLOW_ADDRESS, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=1000, help="tests per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="the spawners measured in turn this many times")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the sandbox's steps drop privileges")
    for name in PRELOAD:
        __import__(name)
    workdir = tempfile.mkdtemp(prefix="rlvr-fork-floor-")
    build_dir = tempfile.mkdtemp(prefix="rlvr-fork-floor-c-")
    try:
        os.chmod(workdir, 0o777)
        sandbox_environment(workdir)  # as the zygote does once; the test process only checks it
        measure(args.tests, args.rounds, workdir, build_native_setup(build_dir))
    finally:
        for directory in (workdir, build_dir):  # (no shutil: the zygote does not load it)
            for name in os.listdir(directory):
                os.unlink(os.path.join(directory, name))
            os.rmdir(directory)


def measure(tests: int, rounds: int, workdir: str, enter: Callable[..., int] | None) -> None:
    spawners: dict[str, Callable[[int], int] | None] = {
        "fork": forked,
        "helper": None,  # a fresh helper's spawn in each round
        "setup py": functools.partial(set_up, workdir=workdir, native=None),
    }
    if enter is not None:
        raw_workdir, cpu_s = workdir.encode(), max(1, int(LIMITS.cpu_s + 0.999))  # apply_rlimits' rounding
        limits = (SANDBOX_UID, cpu_s, LIMITS.processes, LIMITS.open_files, LIMITS.file_bytes, raw_workdir)
        native = lambda i, o, r: enter(i, o, r, *limits, seccomp._FPROG_ADDRESS)  # noqa: E731
        spawners["setup C"] = functools.partial(set_up, workdir=workdir, native=native)
    gc.collect()
    gc.freeze()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"per trivial test, {tests} tests, a supervisor of {peak_mib} MiB peak RSS")
    for round_ in range(1, rounds + 1):
        for label, spawn in spawners.items():
            helper = Helper() if spawn is None else None
            numbers = per_test(helper.spawn if helper else spawn, tests, helper)
            if helper:
                helper.close()
            print(f"  round {round_} {label:8s} " + ", ".join(f"{k} {v:.2f}" for k, v in numbers.items()))
    print("the test process's steps (medians), as the sandbox runs them, before the program:")
    for name, (faults, cpu_us) in sandbox_steps(workdir, tests // 2).items():
        print(f"  {name:22s} {faults:6.0f} faults {cpu_us:8.1f} CPU-µs")
    ours = filter_attach_us(seccomp.install, tests // 4)
    one = filter_attach_us(one_instruction_filter, tests // 4)
    print(f"attaching a filter: ours {ours:.1f} CPU-µs, one of a single instruction {one:.1f} CPU-µs")


if __name__ == "__main__":
    main()
