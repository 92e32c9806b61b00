"""Public code verifier: ``verify_code`` and ``verify_code_batch``.

The program is extracted here (last fenced block), tests are normalised to three kinds
(``stdin``, ``call``, ``assert``), and the submission goes to a warm sandboxing judge in the pool.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandbox.code.compare import ORACLES, encode_args
from sandbox.code.extract import defines, extract_program
from sandbox.code.languages import get_language
from sandbox.code.limits import Limits
from sandbox.pool import WorkerCrashed, WorkerPool, WorkerTimeout
from sandbox.verdict import Verdict
from sandbox.version import CODE_VERIFIER

MAX_PROGRAM_CHARS = 512_000
COLLECT_BATCH = 100
MAX_EXTRACTED_CHARS = 2000
#: The judge starts with only these variables: nothing a program could find in memory is secret.
JUDGE_ENV_KEYS = ("PATH", "LANG", "PYTHONPATH", "RLVR_SANDBOX_ISOLATION")


class BadTests(ValueError):
    """The tests themselves cannot be read (a dataset problem)."""


def normalize_tests(tests: Any, fn_name: str | None = None) -> list[dict[str, Any]]:
    """Accept LiveCodeBench rows (``input``/``output``/``testtype``), call rows (``args`` and
    ``expected``) and assert rows; return the judge's form."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as exc:
            raise BadTests(f"tests are not JSON: {exc.msg}") from exc
    if isinstance(tests, Mapping) and "inputs" in tests and "outputs" in tests:
        kind = "functional" if tests.get("fn_name") else "stdin"
        tests = [{"input": i, "output": o, "testtype": kind} for i, o in zip(tests["inputs"], tests["outputs"])]
    if not isinstance(tests, list) or not tests:
        raise BadTests("tests must be a non-empty list")
    out = []
    for number, test in enumerate(tests):
        if not isinstance(test, Mapping):
            raise BadTests(f"test {number} is not an object")
        kind = test.get("testtype") or test.get("kind") or ("functional" if "args" in test or "expected_json" in test else "stdin")
        if kind == "stdin":
            if not isinstance(test.get("input", ""), str) or not isinstance(test.get("output"), str):
                raise BadTests(f"test {number}: stdin tests need string 'input' and 'output'")
            out.append({"kind": "stdin", "input": test.get("input", ""), "output": test["output"]})
        elif kind in ("functional", "call"):
            if not fn_name:
                raise BadTests("functional tests need fn_name")
            try:
                if "args" in test:
                    args_json = json.dumps(encode_args(list(test["args"])))
                else:
                    lines = [line for line in str(test["input"]).split("\n") if line.strip()]
                    args_json = "[" + ",".join(_checked_json(line) for line in lines) + "]"
                if "expected_json" in test:
                    expected_json = _checked_json(test["expected_json"])
                elif "expected" in test:
                    expected_json = json.dumps(test["expected"])
                else:
                    expected_json = _checked_json(test["output"])
            except (KeyError, TypeError, ValueError) as exc:
                raise BadTests(f"test {number}: functional input/output must be JSON ({exc})") from exc
            out.append({"kind": "call", "args_json": args_json, "expected_json": expected_json})
        elif kind == "assert":
            code = test.get("code") or test.get("input")
            if not isinstance(code, str):
                raise BadTests(f"test {number}: assert tests need 'code'")
            out.append({"kind": "assert", "code": code})
        else:
            raise BadTests(f"test {number}: unknown testtype {kind!r} (stdin, functional, assert)")
        if test.get("time_s") is not None:
            out[-1]["time_s"] = float(test["time_s"])
    return out


def _checked_json(text: str) -> str:
    """Validate JSON without converting numbers (integers may exceed Python's 4300-digit
    conversion limit; the judge decodes them with the limit lifted)."""
    json.loads(text, parse_int=str, parse_float=str, parse_constant=str)
    return text.strip()


def _verdict(reason: str, start: float, program: str | None, detail: str = "", passed: int = 0, total: int = 0, first_failure: int | None = None, partial: bool = False, elapsed_ms: float | None = None) -> Verdict:
    correct = reason == "ok" and passed == total and total > 0
    reward = 1.0 if correct else (passed / total if partial and total else 0.0)
    extracted = program if program is None or len(program) <= MAX_EXTRACTED_CHARS else program[:MAX_EXTRACTED_CHARS] + "..."
    return Verdict(
        correct=correct,
        reward=reward,
        reason=reason,
        extracted=extracted,
        elapsed_ms=round(elapsed_ms if elapsed_ms is not None else (time.perf_counter() - start) * 1000, 3),
        verifier=CODE_VERIFIER,
        detail=detail,
        passed=passed,
        total=total,
        first_failure=first_failure,
    )


def with_prelude(prelude: str, program: str, language: str) -> str:
    """``prelude + program``: the imports and helpers a benchmark's own harness supplies (e.g.
    LiveCodeBench's ``from typing import *`` block, LeetCode's ``ListNode``). Python
    ``from __future__`` lines must stay first, so the prelude goes after them."""
    head = ""
    if language == "python":
        lines = program.split("\n")
        cut = 0
        for number, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("from __future__ import"):
                cut = number + 1
            elif stripped and not stripped.startswith("#"):
                break
        head, program = "\n".join(lines[:cut]) + ("\n" if cut else ""), "\n".join(lines[cut:])
    return head + prelude.rstrip("\n") + "\n" + program


def judge_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in JUDGE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(root), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class CodeGrader:
    """Grades programs with a warm pool of ``workers`` sandboxing judges. Thread-safe."""

    def __init__(self, workers: int | None = None, limits: Limits | Mapping[str, Any] | None = None, unsafe: bool = False):
        self.workers = workers or min(4, os.cpu_count() or 1)
        self.limits = Limits.from_any(limits)
        self.unsafe = unsafe
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is not None and self._pool.inherited:
                self._pool = None  # forked: the parent's workers are not ours to use
            if self._pool is None:
                self._pool = WorkerPool("sandbox.code.judge", self.workers, env=judge_env())
            return self._pool

    def warm_up(self) -> None:
        self.pool.warm_up()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def prepare(self, completion: Any, tests: Any, *, fn_name: str | None = None, starter_code: str | None = None, language: str = "python", limits: Any = None, partial: bool = False, unsafe: bool | None = None, stop_on_fail: bool | None = None, program: str | None = None, oracle: str = "exact", prelude: str | None = None, postlude: str | None = None) -> tuple[Verdict | None, dict[str, Any] | None, str | None]:
        start = time.perf_counter()
        try:
            if oracle not in ORACLES:
                raise ValueError(f"unknown oracle {oracle!r}; choose from {ORACLES}")
            lang = get_language(language)
            resolved = Limits.from_any(limits) if limits is not None else self.limits
            normalized = normalize_tests(tests, fn_name)
        except (BadTests, ValueError, TypeError) as exc:
            return Verdict.bad_input(str(exc), CODE_VERIFIER), None, None
        if program is None:
            if not isinstance(completion, str):
                return _verdict("no_code", start, None, "completion is not a string", total=len(normalized)), None, None
            program = extract_program(completion, lang)
            if program is None and starter_code and lang.name == "python":
                program = extract_program(starter_code.rstrip() + "\n" + completion, lang)
        if program is None or not program.strip():
            return _verdict("no_code", start, None, "no program found", total=len(normalized)), None, None
        if len(program) > MAX_PROGRAM_CHARS:
            return _verdict("compile_error", start, program, f"program longer than {MAX_PROGRAM_CHARS} characters", total=len(normalized)), None, program
        if lang.name == "python":
            if fn_name and starter_code and not defines(program, fn_name) and not defines(program, "Solution"):
                program = starter_code.rstrip() + "\n" + program
        shown = program
        if prelude:
            program = with_prelude(prelude, program, lang.name)
        if postlude:
            program = program.rstrip("\n") + "\n" + postlude
        if lang.name == "python":
            try:
                compile(program, "solution.py", "exec", dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                return _verdict("compile_error", start, shown, f"{type(exc).__name__}: {exc}"[:300], total=len(normalized)), None, shown
        if any(t["kind"] in ("call", "assert") for t in normalized) and not lang.functional:
            return Verdict.bad_input(f"{lang.name} supports stdin tests only", CODE_VERIFIER), None, shown
        request = {
            "language": lang.name,
            "program": program,
            "tests": normalized,
            "fn_name": fn_name,
            "limits": resolved.to_dict(),
            "stop_on_fail": (not partial) if stop_on_fail is None else stop_on_fail,
            "unsafe": self.unsafe if unsafe is None else unsafe,
            "oracle": oracle,
        }
        return None, request, shown

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout = request["limits"]["total_s"] + request["limits"]["compile_time_s"] + 30
        try:
            return self.pool.call(request, timeout)
        except WorkerTimeout:
            return {"reason": "sandbox_error", "detail": "judge did not answer in time; restarted", "passed": 0}
        except WorkerCrashed as exc:
            return {"reason": "sandbox_error", "detail": f"judge crashed: {exc}", "passed": 0}

    def _finish(self, response: dict[str, Any], request: dict[str, Any], program: str | None, start: float, partial: bool, prepared_ms: float = 0.0) -> Verdict:
        """``elapsed_ms`` is preparation plus the judge's round trip (not queueing or start-up)."""
        elapsed = prepared_ms + response["_elapsed_ms"] if "_elapsed_ms" in response else None
        return _verdict(
            response.get("reason", "sandbox_error"),
            start,
            program,
            response.get("detail", ""),
            response.get("passed", 0),
            len(request["tests"]),
            response.get("first_failure"),
            partial,
            elapsed,
        )

    def verify(self, completion: str, tests: Any, **options: Any) -> Verdict:
        start = time.perf_counter()
        partial = bool(options.get("partial", False))
        done, request, program = self.prepare(completion, tests, **options)
        if done is not None:
            return done
        assert request is not None
        prepared_ms = (time.perf_counter() - start) * 1000
        return self._finish(self._run(request), request, program, start, partial, prepared_ms)

    def verify_batch(self, items: Iterable[Mapping[str, Any]], **options: Any) -> list[Verdict]:
        """Grade ``{"completion", "tests", "fn_name"?, "starter_code"?, ...}`` items in order."""
        items = list(items)
        results: list[Verdict | None] = [None] * len(items)
        jobs = []
        for index, item in enumerate(items):
            start = time.perf_counter()
            merged = {**options, **{k: item[k] for k in ("fn_name", "starter_code", "language", "limits", "partial", "program", "oracle", "prelude", "postlude") if k in item and item[k] is not None}}
            if "tests" not in item:
                results[index] = Verdict.bad_input("missing field 'tests'", CODE_VERIFIER)
                continue
            done, request, program = self.prepare(item.get("completion"), item["tests"], **merged)
            if done is not None:
                results[index] = done
            else:
                jobs.append((index, request, program, start, bool(merged.get("partial")), (time.perf_counter() - start) * 1000))
        if jobs:
            with ThreadPoolExecutor(max_workers=self.workers) as executor:
                responses = list(executor.map(lambda job: self._run(job[1]), jobs))
            for (index, request, program, start, partial, prepared_ms), response in zip(jobs, responses):
                results[index] = self._finish(response, request, program, start, partial, prepared_ms)
        return [r for r in results if r is not None]

    def run_program(self, program: str, stdin: str = "", language: str = "python", limits: Any = None) -> dict[str, Any]:
        """Run a program once on ``stdin`` in the sandbox and report what happened (no grading):
        ``{"compile": {...} | None, "run": {"status", "stdout", "stderr", "exit_code", "signal",
        "cpu_ms", "wall_ms"} | None, "reason", "detail"}``. Backs the SandboxFusion endpoint."""
        done, request, _ = self.prepare(None, [{"input": stdin, "output": ""}], language=language, limits=limits, program=program, stop_on_fail=False)
        if request is None:
            assert done is not None
            return {"compile": {"status": "error", "stderr": done.detail} if done.reason == "compile_error" else None, "run": None, "reason": done.reason, "detail": done.detail}
        request["collect"] = True
        response = self._run(request)
        results = response.get("results") or []
        return {"compile": response.get("compile"), "run": results[0] if results else None, "reason": response.get("reason", "sandbox_error"), "detail": response.get("detail", "")}

    def run_collect(self, program: str, tests: list[dict[str, Any]], fn_name: str | None, language: str = "python", limits: Any = None) -> list[dict[str, Any]]:
        """Run a trusted program on test inputs and return raw outcomes (no comparison)."""
        done, request, _ = self.prepare(None, tests, fn_name=fn_name, language=language, limits=limits, program=program, stop_on_fail=False)
        if request is None:
            raise BadTests(f"cannot run the reference program: {done.reason if done else ''} {done.detail if done else ''}")
        results: list[dict[str, Any]] = []
        for start in range(0, len(request["tests"]), COLLECT_BATCH):
            batch = {**request, "tests": request["tests"][start : start + COLLECT_BATCH], "collect": True}
            response = self._run(batch)
            if "results" not in response:
                raise RuntimeError(f"reference run failed: {response.get('detail')}")
            results.extend(response["results"])
        return results


_default: CodeGrader | None = None
_default_lock = threading.Lock()


def default_code_grader() -> CodeGrader:
    global _default
    with _default_lock:
        if _default is None:
            _default = CodeGrader()
            atexit.register(_default.close)
        return _default


def verify_code(completion: str, tests: Any, *, fn_name: str | None = None, starter_code: str | None = None, language: str = "python", limits: Any = None, partial: bool = False, unsafe: bool | None = None, oracle: str = "exact", prelude: str | None = None, postlude: str | None = None) -> Verdict:
    """Grade a completion's program against tests in the sandbox.

    ``tests``: LiveCodeBench rows ``{"input", "output", "testtype": "stdin"|"functional"}``
    (functional inputs are one JSON value per line), ``{"args", "expected"}`` rows, or
    ``{"testtype": "assert", "code"}`` rows. ``limits``: a ``Limits`` or a dict of its fields.
    ``partial``: reward is the pass fraction (all tests run) instead of all-or-nothing.
    ``oracle``: ``exact`` (default), ``set``, ``not_none`` or ``poly_root`` for functional tests.
    ``prelude`` / ``postlude``: code placed before / after the program (the imports, helpers
    and adapters a benchmark's own harness supplies, e.g. LeetCode's ``ListNode``).
    """
    return default_code_grader().verify(
        completion, tests, fn_name=fn_name, starter_code=starter_code, language=language, limits=limits, partial=partial, unsafe=unsafe, oracle=oracle, prelude=prelude, postlude=postlude
    )


def verify_code_batch(items: Iterable[Mapping[str, Any]], **options: Any) -> list[Verdict]:
    return default_code_grader().verify_batch(items, **options)

