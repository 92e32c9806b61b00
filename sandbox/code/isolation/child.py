"""The test child: the process that joins the sandbox's cgroup, drops privileges, applies
rlimits and the system-call filter, then runs the untrusted program (or, for Python, serves
calls of its entry point), reporting through pipes.

Forked by the supervisor (``rlvr.sandbox.code.running.runner``) for every test (with
``stdin_process="submission"``, once for a submission's stdin tests: ``python_stdin_runner``).
Nothing this process writes is believed: the supervisor reads its exit status, its usage and the
cgroup's counters itself,
and parses the call channel as untrusted bytes. The only message that precedes the program is
the one-byte "ready" on a descriptor that is closed before the program's first instruction: a
child that dies before it is a sandbox fault, one that dies after it is the program's.

Call channel, child to supervisor: ``L`` once (the program's module code has run; that counts
as the program's time, like a test), then per call ``S`` (arguments decoded, the call starts),
``R`` (the call returned or raised; both written with the answer's first bytes), then ``V`` and
the encoded value in chunks (4-byte length + bytes each, a zero length ends it), ``E`` + length
+ exception text, or ``X`` + length + why the value could not be encoded. The markers only frame
the protocol: the call's clock runs from the moment the child may take the request to its
complete answer, decoding the arguments and encoding the result included, since the program's
code can run during both (a class its arguments are rebuilt into, a profile hook, a replaced
function of this module).
"""

from __future__ import annotations

import builtins
import fcntl
import importlib
import io
import os
import struct
import sys
import types
from typing import Any

from rlvr.sandbox.code.isolation import seccomp
from rlvr.sandbox.code.isolation.primitives import SITE_DIR, ResourceLimits, apply_rlimits, drop_privileges
from rlvr.sandbox.code.judging.decoding import Decoder
from rlvr.sandbox.code.running.values import Encoder, Unencodable
from rlvr.sandbox.wire import write_all

SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
#: The working directory this process's environment was last made the sandbox's for
#: (``sandbox_environment``): the zygote does it once, and a test child forked from it (whose
#: supervisor never changes the environment) need not rebuild it.
_ENVIRONMENT_FOR: str | None = None


def sandbox_environment(workdir: str) -> None:
    """Make this process's environment exactly ``SANDBOX_ENV``, ``HOME`` and ``TMPDIR`` at
    ``workdir``: nothing of the host's (credentials, paths) reaches a program."""
    global _ENVIRONMENT_FOR
    os.environ.clear()
    os.environ.update(SANDBOX_ENV)
    os.environ["HOME"] = os.environ["TMPDIR"] = workdir
    _ENVIRONMENT_FOR = workdir


CALL_ARGS_FD, CALL_RESULT_FD = 3, 4
#: The per-submission stdin runner's channels: inputs in, ``D`` + exit status out.
STDIN_RUNNER_FD, STDIN_DONE_FD = 3, 4
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
#: Request flags (supervisor to call child). ``SHARED``: the entry is a method of one
#: ``Solution`` instance made on first use and kept for every later call (LiveCodeBench's
#: runner makes one per problem); without it each call gets a fresh instance.
WRITEBACK, HANDLES, SHARED = 1, 2, 4
ENTRY = "@entry"


# ---------------------------------------------------------------------------------------------
# Becoming the sandboxed process
# ---------------------------------------------------------------------------------------------
def enter_child(
    fds: dict[int, int], uid: int | None, limits: ResourceLimits, workdir: str, ready_fd: int, use_seccomp: bool
) -> None:
    """Own session, fds 0.. only, limits, unprivileged uid, filter; then tell the supervisor
    the sandbox holds (``ready``) and close that descriptor. (The child is already in the
    sandbox's cgroup: it inherits the supervisor's.)"""
    os.setsid()
    fds = {**fds, max(fds) + 1: ready_fd}
    parked = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 256) for target, source in fds.items()}
    for target, source in parked.items():
        os.dup2(source, target)
    ready = max(fds)
    os.closerange(ready + 1, 65536)
    os.chdir(workdir)
    try:  # the out-of-memory killer takes this process before the supervisor
        adj = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(adj, b"1000")
        finally:
            os.close(adj)
    except OSError:
        pass
    apply_rlimits(limits)
    if uid is not None:
        drop_privileges(uid)
    if _ENVIRONMENT_FOR != workdir:
        sandbox_environment(workdir)
    if use_seccomp:
        seccomp.install()
    os.write(ready, b"1")
    os.close(ready)


def python_streams(isolated: bool = True) -> None:
    """Fresh standard streams over fds 0-2, no digit cap on ``int``/``str`` conversion, and an
    import path of the standard library plus the allowed packages (``/site``) only."""
    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="replace"
    )
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="replace"
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8", errors="replace", line_buffering=True
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    if isolated and sys.path[-1:] != [SITE_DIR]:
        sandbox_import_path()


#: The sandbox's import path when the zygote found it in the root template (``plan_import_path``).
_PLANNED_PATH: list[str] | None = None


def plan_import_path(root: str) -> None:
    """Once in the zygote, after its last import: find which import directories exist in the
    root template at ``root`` (every sandbox sees that template) and drop the import caches of
    the host's view, so that no PID 1 repeats either."""
    global _PLANNED_PATH
    _PLANNED_PATH = [p for p in sys.path if p and os.path.isdir(root + p)] + [SITE_DIR]
    importlib.invalidate_caches()


def sandbox_import_path() -> None:
    """The standard library's directories that exist in the sandbox, then ``/site``, with the
    import caches of the host's view dropped (by ``plan_import_path`` in the zygote, or here).
    PID 1 does it once; its test children inherit it."""
    if _PLANNED_PATH is not None:
        sys.path[:] = _PLANNED_PATH
        return
    sys.path[:] = [p for p in sys.path if p and os.path.isdir(p)] + [SITE_DIR]
    importlib.invalidate_caches()


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


_COMPILED: dict[str, Any] = {}
#: The one ``Solution`` instance of a call child's ``SHARED`` calls.
_SHARED: list[Any] = []


def compile_program(path: str) -> None:
    """Parse a Python file once in the supervisor (parsing runs nothing), so each test child
    only executes the code object instead of re-reading and re-compiling the source."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)  # the supervisor's own process: long literals compile
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        _COMPILED[path] = compile(fh.read(), path, "exec", dont_inherit=True)


def run_code(code: Any, namespace: dict[str, Any]) -> dict[str, Any]:
    """Execute a code object in ``namespace`` (in a sandboxed child only)."""
    types.FunctionType(code, namespace)()
    return namespace


def _run_python_script(path: str, run_name: str) -> dict[str, Any]:
    code = _COMPILED.get(path)
    if code is None:
        compile_program(path)
        code = _COMPILED[path]
    return run_code(code, {"__name__": run_name, "__file__": path, "__builtins__": builtins})


def python_main(path: str, system_exit_ends: bool = False) -> None:
    """Run a stdin program as ``__main__``; exceptions are runtime errors. ``system_exit_ends``:
    ``SystemExit`` (``exit(1)``, ``sys.exit(main())``) ends the program like falling off its
    end, whatever its code, as LiveCodeBench's runner catches it; what was printed is the
    answer. Only that exception: any other one, and ``os._exit`` with a non-zero status, is
    still a runtime error."""
    _flush_and_exit(_run_main(lambda: _run_python_script(path, "__main__"), system_exit_ends))


def _run_main(run: Any, system_exit_ends: bool) -> int:
    """Run the program once (``run()``); the exit code a process ending there would have."""
    import traceback

    code = 0
    try:
        run()
    except SystemExit as exc:
        if not system_exit_ends:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


def exit_status(code: int) -> int:
    """The status a process gets from ``os._exit(code)``: its low byte, or 125 (the spawn
    wrapper's) for a code ``_exit`` refuses."""
    return code & 0xFF if -(1 << 31) <= code < (1 << 31) else 125


def python_stdin_runner(path: str, system_exit_ends: bool = False) -> None:
    """The per-submission stdin runner (``stdin_process="submission"``): run the program once
    per test in this one process, as LiveCodeBench's runner and EvalPlus do, instead of a fresh
    process per test. Each test's input (fd 3: 8-byte length + bytes) becomes fd 0 (a memory
    file, so ``open(0)`` and ``os.read(0, ...)`` see it and its end), fds 1 and 2 and the
    standard streams are restored, the module runs in a fresh namespace, which is then cleared
    and collected (its memory is not carried into the next test); then ``D`` + the exit status
    it would have had goes to fd 4. What the program changes outside its namespace (modules,
    builtins, ``/tmp``, threads) stays for the submission's later tests: the weaker guarantee."""
    import gc

    saved = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (1, 2, STDIN_RUNNER_FD, STDIN_DONE_FD)}
    code = _COMPILED.get(path)
    if code is None:
        compile_program(path)
        code = _COMPILED[path]
    while True:
        try:
            (size,) = _U64.unpack(_read_exact(saved[STDIN_RUNNER_FD], 8))
            data = _read_exact(saved[STDIN_RUNNER_FD], size) if size else b""
        except EOFError:
            _flush_and_exit(0)  # the supervisor closed the channel: the submission is over
        except OSError:
            _flush_and_exit(125)
        for fd in (1, 2):  # the program may have closed them (``with open(1, "w")``)
            os.dup2(saved[fd], fd)
        memory = os.memfd_create("stdin", 0)
        _send(memory, data)
        del data
        os.lseek(memory, 0, os.SEEK_SET)
        if memory != 0:  # 0 itself when the program closed fd 0 (``open(0)`` does)
            os.dup2(memory, 0)
            os.close(memory)
        python_streams(isolated=False)
        namespace: dict[str, Any] = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
        status = exit_status(_run_main(lambda: run_code(code, namespace), system_exit_ends))
        namespace.clear()
        gc.collect()
        gc.freeze()  # what survives (imported modules) is not scanned again by the next test's collection
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        _send(saved[STDIN_DONE_FD], b"D" + bytes([status]))


# ---------------------------------------------------------------------------------------------
# The call server
# ---------------------------------------------------------------------------------------------
def _read_exact(fd: int, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def encode_call_request(name: str, args: bytes, flags: int = 0, handle: int = 0) -> bytes:
    """Supervisor side: ``[len][flags][handle][name length][name][encoded (args, kwargs)]``."""
    raw = name.encode()
    body = struct.pack("!BIH", flags, handle, len(raw)) + raw + args
    return _U32.pack(len(body)) + body


def _resolve(
    namespace: dict[str, Any], entry: str | None, name: str, handle: int, handles: dict[int, Any], flags: int = 0
) -> Any:
    if handle:
        target = handles[handle]
        return getattr(target, name) if name else target
    if name == ENTRY:
        if not entry:
            raise NameError("no entry point was named")
        cls = namespace.get("Solution")
        if isinstance(cls, type) and hasattr(cls, entry):
            if not flags & SHARED:
                return getattr(cls(), entry)
            if not _SHARED or _SHARED[0] is not cls:
                _SHARED[:] = [cls, cls()]
            return getattr(_SHARED[1], entry)
        name = entry
    if name not in namespace or not callable(namespace[name]):
        raise NameError(f"no function or Solution method named {name!r}")
    return namespace[name]


def python_calls(path: str, entry: str | None, max_result_bytes: int) -> None:
    """Load the program once, then answer calls until the supervisor closes the channel."""
    import traceback

    try:
        namespace = _run_python_script(path, "__solution__")
    except BaseException:
        traceback.print_exc()
        _flush_and_exit(1)
    _send(CALL_RESULT_FD, b"L")  # the program's module code has run: calls may start

    def instance(type_name: str, attrs: dict[str, Any]) -> Any:
        cls = namespace.get(type_name)
        if not isinstance(cls, type):
            raise NameError(f"the tests pass a {type_name} but the program defines no such class")
        obj = cls.__new__(cls)
        obj.__dict__.update(attrs)
        return obj

    handles: dict[int, Any] = {}
    out = CALL_RESULT_FD
    requests = io.BufferedReader(io.FileIO(CALL_ARGS_FD, "r", closefd=False), 1 << 20)
    decoder = Decoder(instances=instance)
    while True:
        try:
            head = requests.read(4)
            if len(head) < 4:
                raise EOFError
            (size,) = _U32.unpack(head)
            body = requests.read(size)
            if len(body) < size:
                raise EOFError
        except (EOFError, OSError):
            _flush_and_exit(0)
        flags, handle, name_len = struct.unpack_from("!BIH", body)
        name = body[7 : 7 + name_len].decode()
        try:
            args, kwargs = decoder.decode(body[7 + name_len :])
        except BaseException as exc:
            _send(out, b"SR" + _message(b"E", exc))
            continue
        # The program's code may run anywhere in here (a class the arguments are rebuilt into,
        # its constructor, a replaced sys.stdout's flush, a hook): all of it on the call's clock.
        # ``S`` and ``R`` go out with the answer's first bytes: one write per call.
        try:
            value = _resolve(namespace, entry, name, handle, handles, flags)(*args, **kwargs)
        except BaseException as exc:
            _send(out, b"SR" + _message(b"E", exc))
            continue
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        started = [False]

        def chunk(data: bytes) -> None:
            if not data:
                return  # a zero length ends the value
            head = (b"" if started[0] else b"SRV") + _U32.pack(len(data))
            started[0] = True
            write_all(out, [head, data])

        try:
            encoder = Encoder(max_result_bytes, handles=handles if flags & HANDLES else None, sink=chunk)
            rest = encoder.encode((value, tuple(args)) if flags & WRITEBACK else value)
        except (Unencodable, RecursionError, MemoryError, OverflowError, ValueError, TypeError) as exc:
            if started[0]:
                _flush_and_exit(1)  # half a value is on the channel: end this child
            _send(out, b"SR" + _message(b"X", exc))
            continue
        tail = _U32.pack(0)
        if started[0]:
            write_all(out, [_U32.pack(len(rest)), rest, tail] if rest else [tail])
        else:
            _send(out, b"SRV" + _U32.pack(len(rest)) + rest + tail if rest else b"SRV" + tail)


def _message(kind: bytes, exc: BaseException) -> bytes:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = type(exc).__name__
    raw = text[:500].encode("utf-8", "replace")
    return kind + _U32.pack(len(raw)) + raw
