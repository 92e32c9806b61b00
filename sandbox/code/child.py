"""The test child: the process that drops privileges, applies rlimits and runs the untrusted
program (or, for Python, calls its entry point / runs its asserts), reporting through pipes.

Split from the supervisor (``sandbox.code.runner``), which forks it for every test.
"""
from __future__ import annotations

import fcntl
import io
import json
import os
import sys
import types
from typing import Any

from sandbox.code.isolation import ResourceLimits, apply_rlimits, drop_privileges
from sandbox.wire import read_message, write_message

EXIT_MEMORY = 97
EXIT_NOT_JSON = 98
EXIT_BAD_ENTRY = 99
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


# ---------------------------------------------------------------------------------------------
# The test child (untrusted once the program starts)
# ---------------------------------------------------------------------------------------------
def enter_child(fds: dict[int, int], uid: int | None, limits: ResourceLimits, workdir: str) -> None:
    """Become the sandboxed process: own session, fds 0.. only, limits, unprivileged uid."""
    os.setsid()
    parked = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 256) for target, source in fds.items()}
    for target, source in parked.items():
        os.dup2(source, target)
    keep = max(fds) + 1
    os.closerange(keep, 65536)
    os.chdir(workdir)
    apply_rlimits(limits)
    if uid is not None:
        drop_privileges(uid)
    os.environ.clear()
    os.environ.update(SANDBOX_ENV)
    os.environ["HOME"] = os.environ["TMPDIR"] = workdir


def python_streams() -> None:
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="replace")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8", errors="replace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


_COMPILED: dict[str, Any] = {}


def compile_program(path: str) -> None:
    """Parse a Python file once in the supervisor (parsing runs nothing), so each test child
    only executes the code object instead of re-reading and re-compiling the source."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        _COMPILED[path] = compile(fh.read(), path, "exec", dont_inherit=True)


def _run_python_script(path: str, run_name: str) -> dict[str, Any]:
    """Execute the program as a module named ``run_name`` (in the sandboxed child)."""
    namespace: dict[str, Any] = {"__name__": run_name, "__file__": path, "__builtins__": __builtins__}
    code = _COMPILED.get(path)
    if code is None:
        compile_program(path)
        code = _COMPILED[path]
    types.FunctionType(code, namespace)()
    return namespace


def python_main(path: str) -> None:
    """Run a stdin program as ``__main__``; exceptions are runtime errors."""
    import traceback

    code = 0
    try:
        _run_python_script(path, "__main__")
    except MemoryError:
        code = EXIT_MEMORY
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    _flush_and_exit(code)


def decode_args(value: Any) -> Any:
    """Inverse of ``encode_args``: rebuild tuples, sets, complex numbers and special floats."""
    if isinstance(value, list):
        return [decode_args(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (key, inner), = value.items()
            if key == "__tuple__":
                return tuple(decode_args(v) for v in inner)
            if key == "__set__":
                return {decode_args(v) for v in inner}
            if key == "__complex__":
                return complex(inner[0], inner[1])
            if key == "__float__":
                return float(inner)
            if key == "__dict__":
                return {decode_args(k): decode_args(v) for k, v in inner}
        return {k: decode_args(v) for k, v in value.items()}
    return value


def encode_value(value: Any, depth: int = 0) -> Any:
    """JSON-safe form of a return value; raises TypeError for anything else (never trusted)."""
    if depth > 200:
        raise TypeError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return {"__float__": repr(value)}
        return value
    if isinstance(value, (list, tuple)):
        return [encode_value(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode_value(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode_value(v, depth + 1) for k, v in value.items()}
        return {"__dict__": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, complex):
        return {"__complex__": [value.real, value.imag]}
    # Anything else (a regex match, an object with a custom __eq__) travels as an opaque marker:
    # it equals nothing, so no method the program defines takes part in the comparison.
    return {"__object__": type(value).__name__}


def python_calls(path: str, entry: dict[str, Any], args_fd: int, result_fd: int) -> None:
    """Load the program once, then answer calls: JSON args in, tagged JSON result out."""
    import traceback

    try:
        namespace = _run_python_script(path, "__solution__")
        fn = _resolve_entry(namespace, entry)
    except MemoryError:
        _flush_and_exit(EXIT_MEMORY)
    except SystemExit:
        _flush_and_exit(EXIT_BAD_ENTRY)
    except BaseException:
        traceback.print_exc()
        _flush_and_exit(1)
    while True:
        try:
            request = read_message(args_fd)
        except Exception:
            _flush_and_exit(0)
        try:
            value = fn(*decode_args(json.loads(request["args_json"])))
        except MemoryError:
            _flush_and_exit(EXIT_MEMORY)
        except SystemExit:
            _flush_and_exit(1)
        except BaseException:
            traceback.print_exc()
            _flush_and_exit(1)
        try:
            text = json.dumps(encode_value(value), allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            print(f"rlvr: {exc}", file=sys.stderr)
            _flush_and_exit(EXIT_NOT_JSON)
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        write_message(result_fd, {"result": text})


def _resolve_entry(namespace: dict[str, Any], entry: dict[str, Any]):
    name = entry["fn_name"]
    cls = namespace.get("Solution")
    if isinstance(cls, type) and hasattr(cls, name):
        return getattr(cls(), name)
    fn = namespace.get(name)
    if callable(fn):
        return fn
    print(f"rlvr: no function or Solution method named {name!r}", file=sys.stderr)
    _flush_and_exit(EXIT_BAD_ENTRY)


def python_asserts(path: str, nonce: str, result_fd: int) -> None:
    """Run program + appended asserts; success must be *reported*, exiting early is not enough."""
    import traceback

    code = 0
    try:
        _run_python_script(path, "__main__")
        write_message(result_fd, {"result": nonce})
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:
        traceback.print_exc()
        code = 1
    _flush_and_exit(code)
