"""Public code verifier: ``verify_code`` and ``verify_code_batch``.

The program is extracted here (last fenced block), tests are normalised to three kinds
(``stdin``, ``call``, ``assert``), and the submission goes to a warm sandboxing judge in the pool.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.sandbox.code.judging.compare import Comparison
from rlvr.sandbox.code.judging.launch import PACKAGE_ROOT, judge_env
from rlvr.sandbox.code.rules.extract import check_python_syntax, defines, extract_program, with_prelude
from rlvr.sandbox.code.rules.languages import get_language
from rlvr.sandbox.code.rules.limits import Limits, stdin_process_of
from rlvr.sandbox.code.rules.testcases import BadTests, PreparedTests, check_expectations, normalize_tests
from rlvr.sandbox.pool import WorkerCrashed, WorkerPool, WorkerTimeout
from rlvr.sandbox.process_wide import ProcessWide
from rlvr.sandbox.verdict import Verdict
from rlvr.sandbox.version import CODE_VERIFIER

MAX_PROGRAM_CHARS = 512_000
#: A reference run's batch: this many calls or this many argument bytes per request.
COLLECT_CALLS = 2000
COLLECT_BYTES = 8 << 20
#: A reference run's judge hands back the calls it has not started after this many seconds.
COLLECT_SLICE_S = 2.0
MAX_EXTRACTED_CHARS = 2000
#: Per-item options a grading request may carry (the service and the adapters pass these on).
OPTIONS = (
    "fn_name",
    "starter_code",
    "language",
    "limits",
    "partial",
    "program",
    "oracle",
    "compare",
    "prelude",
    "postlude",
    "test_setup",
    "stdin_process",
)


def _verdict(
    reason: str,
    start: float,
    program: str | None,
    detail: str = "",
    passed: int = 0,
    total: int = 0,
    first_failure: int | None = None,
    partial: bool = False,
    elapsed_ms: float | None = None,
) -> Verdict:
    correct = reason == "ok" and passed == total and total > 0
    reward = 1.0 if correct else (passed / total if partial and total else 0.0)
    extracted = (
        program if program is None or len(program) <= MAX_EXTRACTED_CHARS else program[:MAX_EXTRACTED_CHARS] + "..."
    )
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


class CodeGrader:
    """Grades programs with a warm pool of ``workers`` sandboxing judges. Thread-safe.

    ``verify(completion, tests, **options)`` grades one program (the options of ``verify_code``),
    ``verify_batch(items)`` many; ``close()`` stops the judges, as leaving a ``with CodeGrader()
    as grader:`` block does."""

    def __init__(
        self,
        workers: int | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        unsafe: bool = False,
        stdin_process: str = "test",
    ):
        self.workers = workers or min(4, os.cpu_count() or 1)
        self.limits = Limits.from_any(limits)
        self.unsafe = unsafe
        self.stdin_process = stdin_process_of(stdin_process)
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is not None and self._pool.inherited:
                self._pool = None  # forked: the parent's workers are not ours to use
            if self._pool is None:
                self._pool = WorkerPool(
                    "rlvr.sandbox.code.judging.judge_main", self.workers, env=judge_env(), cwd=PACKAGE_ROOT
                )
            return self._pool

    def warm_up(self) -> None:
        self.pool.warm_up()

    def close(self) -> None:
        """Stop the judge processes (a later call starts them again)."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def __enter__(self) -> "CodeGrader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def prepare(
        self,
        completion: Any,
        tests: Any,
        *,
        fn_name: str | None = None,
        starter_code: str | None = None,
        language: str = "python",
        limits: Any = None,
        partial: bool = False,
        unsafe: bool | None = None,
        stop_on_fail: bool | None = None,
        program: str | None = None,
        oracle: str | None = None,
        compare: Any = None,
        prelude: str | None = None,
        postlude: str | None = None,
        test_setup: str | None = None,
        collect: bool = False,
        stdin_process: str | None = None,
    ) -> tuple[Verdict | None, dict[str, Any] | None, str | None]:
        """The judge's request for one item, or the verdict it gets without running
        (``bad_input``, ``no_code``, ``compile_error``). ``collect``: the tests are inputs only
        (a trusted reference is run to record its outputs), so no expectation is required."""
        start = time.perf_counter()
        try:
            comparison = Comparison.from_any(compare, oracle)
            per_stdin = self.stdin_process if stdin_process is None else stdin_process_of(stdin_process)
            lang = get_language(language)
            resolved = Limits.from_any(limits) if limits is not None else self.limits
            normalized = normalize_tests(tests, fn_name)
            if not collect:
                check_expectations(normalized)
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
            return (
                _verdict(
                    "compile_error",
                    start,
                    program,
                    f"program longer than {MAX_PROGRAM_CHARS} characters",
                    total=len(normalized),
                ),
                None,
                program,
            )
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
                check_python_syntax(program)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                return (
                    _verdict(
                        "compile_error", start, shown, f"{type(exc).__name__}: {exc}"[:300], total=len(normalized)
                    ),
                    None,
                    shown,
                )
        if any(t["kind"] in ("call", "assert") for t in normalized) and not lang.functional:
            return Verdict.bad_input(f"{lang.name} supports stdin tests only", CODE_VERIFIER), None, shown
        request = {
            "language": lang.name,
            "program": program,
            "tests": normalized,
            "n_tests": len(normalized),
            "fn_name": fn_name,
            "limits": resolved.to_dict(),
            "stop_on_fail": (not partial) if stop_on_fail is None else stop_on_fail,
            "unsafe": self.unsafe if unsafe is None else unsafe,
            "stdin_process": per_stdin,
            "compare": {
                "rule": comparison.rule,
                "oracle": comparison.oracle,
                "atol": comparison.atol,
                "rtol": comparison.rtol,
            },
            "test_setup": test_setup if test_setup is not None else (prelude or ""),
        }
        if isinstance(tests, PreparedTests):
            del request["tests"]  # sent by digest; in full only to a judge that lacks them
            request["tests_ref"], request["_tests_text"] = tests.digest, tests.text
            if tests.blob is not None:
                request["tests_blob"] = tests.blob
        return None, request, shown

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        """The judge enforces every limit itself; this deadline only catches a judge that hangs
        (then the verdict is ``sandbox_error``, never the program's fault)."""
        limits = request["limits"]
        timeout = 2 * limits["total_s"] + 1.5 * limits["compile_time_s"] + request["n_tests"] * 0.1 + 60
        text = request.pop("_tests_text", None)
        try:
            response = self.pool.call(request, timeout)
            if response.get("need_tests") and text is not None:
                response = self.pool.call({**request, "tests_text": text}, timeout)
            return response
        except WorkerTimeout:
            return {"reason": "sandbox_error", "detail": "judge did not answer in time; restarted", "passed": 0}
        except WorkerCrashed as exc:
            return {"reason": "sandbox_error", "detail": f"judge crashed: {exc}", "passed": 0}

    def _finish(
        self,
        response: dict[str, Any],
        request: dict[str, Any],
        program: str | None,
        start: float,
        partial: bool,
        prepared_ms: float = 0.0,
    ) -> Verdict:
        """``elapsed_ms`` is preparation plus the judge's round trip (not queueing or start-up)."""
        elapsed = prepared_ms + response["_elapsed_ms"] if "_elapsed_ms" in response else None
        return _verdict(
            response.get("reason", "sandbox_error"),
            start,
            program,
            response.get("detail", ""),
            response.get("passed", 0),
            request["n_tests"],
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
        """Grade ``{"completion", "tests", "fn_name"?, "starter_code"?, ...}`` items in order.
        Each item goes to a judge as soon as it is prepared, so the judges work while the
        later items (and whatever produces them, when ``items`` is a generator) are read."""
        results: list[Verdict | None] = []
        jobs = []
        with ThreadPoolExecutor(max_workers=self.workers) as executor:
            try:
                for index, item in enumerate(items):
                    results.append(None)
                    start = time.perf_counter()
                    merged = {**options, **{k: item[k] for k in OPTIONS if k in item and item[k] is not None}}
                    if "tests" not in item:
                        results[index] = Verdict.bad_input("missing field 'tests'", CODE_VERIFIER)
                        continue
                    done, request, program = self.prepare(item.get("completion"), item["tests"], **merged)
                    if done is not None:
                        results[index] = done
                        continue
                    prepared_ms = (time.perf_counter() - start) * 1000
                    response = executor.submit(self._run, request)
                    jobs.append((index, response, request, program, start, bool(merged.get("partial")), prepared_ms))
                for index, response, request, program, start, partial, prepared_ms in jobs:
                    results[index] = self._finish(response.result(), request, program, start, partial, prepared_ms)
            except BaseException:
                # An error while reading the items (a reference that failed) or an interrupt:
                # grade nothing more; only the items already with a judge finish.
                executor.shutdown(wait=False, cancel_futures=True)
                raise
        return [r for r in results if r is not None]

    def run_program(
        self, program: str, stdin: str = "", language: str = "python", limits: Any = None
    ) -> dict[str, Any]:
        """Run a program once on ``stdin`` in the sandbox and report what happened (no grading):
        ``{"compile": {...} | None, "run": {"status", "stdout", "stderr", "exit_code", "signal",
        "cpu_ms", "wall_ms"} | None, "reason", "detail"}``. Backs the SandboxFusion endpoint."""
        done, request, _ = self.prepare(
            None,
            [{"input": stdin, "output": ""}],
            language=language,
            limits=limits,
            program=program,
            stop_on_fail=False,
        )
        if request is None:
            assert done is not None
            return {
                "compile": {"status": "error", "stderr": done.detail} if done.reason == "compile_error" else None,
                "run": None,
                "reason": done.reason,
                "detail": done.detail,
            }
        request["collect"] = True
        response = self._run(request)
        results = response.get("results") or []
        return {
            "compile": response.get("compile"),
            "run": results[0] if results else None,
            "reason": response.get("reason", "sandbox_error"),
            "detail": response.get("detail", ""),
        }

    def run_collect(self, program: str, inputs: list[str], fn_name: str, limits: Any = None) -> list[dict[str, Any]]:
        """Call a trusted program's ``fn_name`` on each encoded argument list (``call_args``)
        and return the raw outcomes (``status``, ``result``: base64 of the encoded value,
        ``wall_ms``, ``cpu_ms``), no comparison. Batches run on the pool's judges in parallel."""
        tests = [{"args_encoded": args, "testtype": "functional"} for args in inputs]
        done, request, _ = self.prepare(
            None, tests, fn_name=fn_name, limits=limits, program=program, stop_on_fail=False, collect=True
        )
        if request is None:
            raise BadTests(
                f"cannot run the reference program: {done.reason if done else ''} {done.detail if done else ''}"
            )
        batches, current, size = [], [], 0
        for test in request["tests"]:
            if current and (len(current) >= COLLECT_CALLS or size + len(test["args"]) > COLLECT_BYTES):
                batches.append(current)
                current, size = [], 0
            current.append(test)
            size += len(test["args"])
        with ThreadPoolExecutor(max_workers=self.workers) as executor:
            parts = list(executor.map(lambda batch: self._collect_part(request, batch), batches + [current]))
        return [result for part in parts for result in part]

    def _collect_part(self, request: dict[str, Any], tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run ``tests`` of a reference; a judge hands back what is left after ``COLLECT_SLICE_S``,
        and the rest is split over the workers, so one slow reference (Mbpp/599 runs for ~28 s)
        does not leave the other judges idle at the end of a cold run."""
        response = self._run({**request, "tests": tests, "collect": True, "yield_after_s": COLLECT_SLICE_S})
        if "results" not in response:
            raise RuntimeError(f"reference run failed: {response.get('detail')}")
        done = response["results"]
        rest = tests[len(done) :]
        if response.get("yielded") is None or not rest:
            return done
        size = -(-len(rest) // self.workers)
        pieces = [rest[i : i + size] for i in range(0, len(rest), size)]
        with ThreadPoolExecutor(max_workers=len(pieces)) as executor:
            return done + [
                result
                for part in executor.map(lambda piece: self._collect_part(request, piece), pieces)
                for result in part
            ]


_default = ProcessWide(lambda: CodeGrader())


def default_code_grader() -> CodeGrader:
    """The process-wide grader used by ``verify_code`` (created on first use)."""
    return _default.get()


def verify_code(
    completion: str,
    tests: Any,
    *,
    fn_name: str | None = None,
    starter_code: str | None = None,
    language: str = "python",
    limits: Any = None,
    partial: bool = False,
    unsafe: bool | None = None,
    compare: Any = None,
    oracle: str | None = None,
    prelude: str | None = None,
    postlude: str | None = None,
    test_setup: str | None = None,
    stdin_process: str | None = None,
) -> Verdict:
    """Grade a completion's program against tests in the sandbox.

    ``tests``: LiveCodeBench rows ``{"input", "output", "testtype": "stdin"|"functional"}``
    (functional inputs are one JSON value per line), ``{"args", "expected"}`` rows, or
    ``{"testtype": "assert", "code"}`` rows. ``limits``: a ``Limits`` or a dict of its fields.
    ``partial``: reward is the pass fraction (all tests run) instead of all-or-nothing.
    ``compare``: the comparison rule (``python``, ``livecodebench``, ``evalplus``, ``close``) or
    ``{"rule", "oracle", "atol", "rtol"}``; by default each test format's own benchmark rule.
    ``oracle``: ``set``, ``not_none``, ``find_zero`` (and EvalPlus's own, with its rule).
    ``prelude`` / ``postlude``: code placed before / after the program (the imports, helpers
    and adapters a benchmark's own harness supplies, e.g. LeetCode's ``ListNode``).
    ``test_setup``: trusted code assert tests run with (helpers, classes), in their own sandbox;
    defaults to ``prelude``. ``stdin_process``: ``test`` (the default: a fresh process for every
    stdin test) or ``submission`` (Python only: one process runs all of a submission's stdin
    tests, as LiveCodeBench's runner does; state a program leaves outside its own namespace is
    shared between its tests, never between submissions).
    """
    return default_code_grader().verify(
        completion,
        tests,
        fn_name=fn_name,
        starter_code=starter_code,
        language=language,
        limits=limits,
        partial=partial,
        unsafe=unsafe,
        compare=compare,
        oracle=oracle,
        prelude=prelude,
        postlude=postlude,
        test_setup=test_setup,
        stdin_process=stdin_process,
    )


def verify_code_batch(items: Iterable[Mapping[str, Any]], **options: Any) -> list[Verdict]:
    return default_code_grader().verify_batch(items, **options)
