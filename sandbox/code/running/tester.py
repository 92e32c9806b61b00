"""Assert-style tests, run where the program cannot reach them.

An MBPP assert list or a HumanEval ``check(candidate)`` is test code, not data: run in the
program's process, the program can read it (and its expected values) from memory or disk, walk
the stack to the harness's completion marker, or return an object whose ``__eq__`` is always
true. Here the test code runs in a *second* sandbox (the tester), with every name it needs from
the program bound to a proxy. Calling a proxy sends the arguments (typed encoding) through the
judge to the program's sandbox, which calls the real function there and sends back the encoded
result; the tester decodes it into plain built-in values, so the test's own ``==``, ``abs`` or
``set()`` never runs program code. Objects the program returns that are not plain values come
back as remote handles: methods can be called on them, but they equal nothing.

What crosses is faithful to running in one process for what such tests do: positional and
keyword arguments (user classes defined by the test's setup code travel by their attributes),
return values, exceptions by type and message (a test can expect ``ValueError``; a
``StopIteration`` becomes a ``RuntimeError``, as PEP 479 has it for generators), and in-place
changes to list, dict, set and bytearray arguments (written back after the call). Not carried:
identity of returned objects, mutation of nested objects inside other objects, and module-level
values of the program that are not callables.

Runs as the tester child (fds 3 in, 4 out: ``rlvr.sandbox.wire`` frames).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys
from typing import Any

from rlvr.sandbox.code.isolation.child import ENTRY, HANDLES, WRITEBACK, run_code
from rlvr.sandbox.code.judging.decoding import Decoder
from rlvr.sandbox.code.running.values import Encoder
from rlvr.sandbox.wire import read_frame, write_frame

IN_FD, OUT_FD = 3, 4
_MUTABLE = (list, dict, set, bytearray)


class ProgramFailed(BaseException):
    """The program's side of a call ended the test (time, memory, output, crash). A
    ``BaseException``, so a test's ``except Exception`` cannot swallow it."""


class RemoteObject:
    """A non-plain object that lives in the program's sandbox."""

    def __init__(self, number: int, type_name: str):
        self._number, self._type = number, type_name

    def __getattr__(self, name: str) -> "Remote":
        if name.startswith("__"):
            raise AttributeError(name)
        return Remote(name, self._number)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Remote("", self._number)(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return other is self

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<remote {self._type} object>"


class Remote:
    """A callable of the program, called in the program's sandbox."""

    def __init__(self, name: str, handle: int = 0):
        self._name, self._handle = name, handle

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        writeback = any(type(a) in _MUTABLE for a in args)
        blob = Encoder(instances=True).encode((args, kwargs))
        flags = HANDLES | (WRITEBACK if writeback else 0)
        write_frame(OUT_FD, {"op": "call", "name": self._name, "handle": self._handle, "flags": flags}, blob)
        header, payload = read_frame(IN_FD)
        status = header.get("status")
        if status == "value":
            value = Decoder(handles=RemoteObject).decode(payload)
            if writeback:
                value, after = value
                for before, new in zip(args, after):
                    _write_back(before, new)
            return value
        if status == "raised":
            raise _exception(header.get("error", ""))
        raise ProgramFailed(header.get("reason", "runtime_error"))

    def __repr__(self) -> str:
        return f"<remote function {self._name}>"


def _write_back(before: Any, new: Any) -> None:
    if type(before) is not type(new):
        return
    if isinstance(before, (list, bytearray)):
        before[:] = new
    elif isinstance(before, (dict, set)):
        before.clear()
        before.update(new)


#: Exceptions that end an iteration, not a call: one of them escaping the program's function
#: would silently end a ``map``, ``filter`` or generator in the test (``all(map(lambda x: f(x)
#: == ..., xs))`` passes for an ``f`` that only raises it). As PEP 479 does for generators,
#: such an exception crossing the call becomes a ``RuntimeError``.
ITERATION_ENDS = ("StopIteration", "StopAsyncIteration")


def _exception(text: str) -> BaseException:
    """Rebuild the program's exception as a built-in type of the same name, so ``except
    ValueError`` in a test behaves as it would in one process (``ITERATION_ENDS`` excepted)."""
    name, _, message = text.partition(": ")
    if name in ITERATION_ENDS:
        return RuntimeError(f"the program raised {name} (PEP 479: an iteration's end cannot escape a call)")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except BaseException:
            pass
    return RuntimeError(text)


def free_names(code: str) -> set[str]:
    """Names the test code reads but never binds (candidates for proxies)."""
    tree = ast.parse(code)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound - set(dir(builtins))


def proxied_names(code: str, setup: str, entry: str | None) -> list[str]:
    """What the program must provide: the entry point, and every free name of the test code
    that the trusted setup code does not define."""
    provided = set() if not setup.strip() else {n for n in _top_level_names(setup)}
    names = free_names(code) - provided
    if entry:
        names.add(entry)
    return sorted(names)


def _top_level_names(code: str) -> set[str]:
    names = set()
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def python_tester() -> None:
    """Run one test: the setup code, then the test code with proxies; report how it ended."""
    import os

    header, _ = read_frame(IN_FD)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        if header.get("setup"):
            run_code(compile(header["setup"], "test_setup.py", "exec", dont_inherit=True), namespace)
        for name in header["proxies"]:
            if name != header.get("entry") and name in sys.stdlib_module_names:
                namespace[name] = importlib.import_module(name)  # ``math.isclose`` in an assert
            else:
                namespace[name] = Remote(ENTRY if name == header.get("entry") else name)
        run_code(compile(header["code"], "test.py", "exec", dont_inherit=True), namespace)
        result = {"op": "done", "ok": True}
    except ProgramFailed:  # the judge knows why (it sent the failure) and reports that itself
        result = {"op": "done", "ok": False, "error": "the program failed during the test"}
    except BaseException as exc:
        try:
            text = f"{type(exc).__name__}: {exc}"
        except BaseException:
            text = type(exc).__name__
        result = {"op": "done", "ok": False, "error": text[:300], "assertion": isinstance(exc, AssertionError)}
    write_frame(OUT_FD, result)
    os._exit(0)
