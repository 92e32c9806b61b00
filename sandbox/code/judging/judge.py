"""The code judge: a pool worker that runs tests in sandboxes and compares outputs.

The judge holds each submission's expected outputs and is the trusted parent that compares:
the supervisor inside a sandbox only reports what the program printed or returned, and what it
observed (clock, CPU, memory events, exit status). Sandboxes come from a zygote
(``rlvr.sandbox.code.isolation.zygote``) forked at start-up, before any request, that never sees a program or
a test. Assert-style tests run in a second sandbox, the tester (``rlvr.sandbox.code.running.tester``), whose
calls the judge relays to the program's sandbox, so the program never holds the test code.

Nothing computed from an expected output enters a sandbox either: a stdin test's rules that need
it (the room its output has, the whitespace runs that still matter) are applied here, on what the
supervisor kept under limits of the submission alone (``rlvr.sandbox.code.judging.outcomes``).

Verdict reasons follow from observations: ``time_limit`` / ``memory_limit`` / ``output_limit``
from the supervisor's clock and the kernel's counters (the output's room counted here),
``runtime_error`` from an exit status or a raised exception, ``wrong_answer`` from a comparison,
including any value the judge cannot read or compare. ``sandbox_error`` is reserved for faults
the program could not cause: no isolation, a sandbox that could not start, a supervisor that
stopped answering.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
import time
from typing import Any

from rlvr.sandbox.code.isolation import box
from rlvr.sandbox.code.isolation.box import MARGIN_S, Box, SandboxDown
from rlvr.sandbox.code.isolation.child import SHARED
from rlvr.sandbox.code.judging.compare import Comparison, ResultJudge, describe_value
from rlvr.sandbox.code.judging.judge_memory import limit_own_memory
from rlvr.sandbox.code.judging.known_tests import tests_of
from rlvr.sandbox.code.judging.outcomes import outcome_reason, stdin_verdict, wall_s
from rlvr.sandbox.code.rules.languages import get_language
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.running.channels import (
    BUSY_PATIENCE,
    CODEC_BYTES_PER_S,
    CODEC_FIXED_S,
    CODEC_WALL_FACTOR,
    call_outcome,
)
from rlvr.sandbox.code.running.tester import proxied_names

#: Call tests per round trip: batches double from 1 up to this, so a program that fails early
#: has run almost nothing ahead, and one that passes pays one round trip per many calls.
MAX_BATCH = 256
ISOLATION: tuple[bool, str] = (False, "not checked")


class Submission:
    """One request: the program's sandbox, a tester sandbox if there are assert tests, and the
    tests in order."""

    def __init__(self, request: dict[str, Any]):
        self.request = request
        self.limits = Limits.from_any(request["limits"])
        self.language = get_language(request["language"])
        self.tests = request["tests"]
        self.comparison = Comparison.from_any(request.get("compare"))
        self.results = ResultJudge(self.comparison)
        self.program = Box(self.language.name, self.limits)
        self.tester: Box | None = None
        #: When the submission started (the sandbox opened, compile included): ``total_s`` is
        #: the wall clock from here, so the judge answers within it whatever the tests are.
        self.started = time.monotonic()
        self.batch = 1
        self.inflight: tuple[int, list[bytes], float] | None = None
        self.send_ahead = True
        self.sent_at = 0.0
        self.slice_s: float | None = self.request.get("yield_after_s") if self.request.get("collect") else None

    def run(self) -> dict[str, Any]:
        reply: dict[str, Any] = {"passed": 0, "total": len(self.tests), "first_failure": None}
        collect = bool(self.request.get("collect"))
        results: list[dict[str, Any]] = []
        try:
            started = self.started = time.monotonic()
            compiled = self.program.open({self.language.source: self.request["program"]}, self.request.get("fn_name"))
            if compiled.get("status") != "ok":
                reason = "time_limit" if compiled.get("status") == "tle" else "compile_error"
                return {
                    **reply,
                    "reason": reason,
                    "detail": "compiler: " + (compiled.get("stderr") or "").strip()[-500:],
                    "compile": compiled,
                    "results": [],
                }
            index = 0
            while index < len(self.tests):
                if self.slice_s is not None and time.monotonic() - started >= self.slice_s:
                    if self.inflight is None or self.inflight[0] != index:
                        reply["yielded"] = index
                        break
                    self.send_ahead = False  # take the batch in flight, then hand the rest back
                if self.remaining_s() <= 0:
                    reply.update(
                        reason=reply.get("reason") or "time_limit",
                        detail=reply.get("detail") or f"submission exceeded {self.limits.total_s:g}s",
                    )
                    reply["first_failure"] = index if reply["first_failure"] is None else reply["first_failure"]
                    break
                if self.tests[index]["kind"] == "call":
                    verdicts = self.next_calls(index)
                else:
                    verdicts = [self.run_test(self.tests[index])]
                stop = False
                for passed, reason, detail, raw in verdicts:
                    if reason == "skipped":
                        break
                    index += 1
                    if collect:
                        results.append(raw)
                        continue
                    if passed:
                        reply["passed"] += 1
                        continue
                    if reply["first_failure"] is None:
                        reply.update(
                            first_failure=index - 1,
                            reason=reason,
                            detail=f"test {index - 1}: {detail}" if detail else f"test {index - 1}",
                        )
                    if self.request.get("stop_on_fail", True):
                        stop = True
                        break
                if stop:
                    break
        except SandboxDown as exc:
            reply.update(reason="sandbox_error", detail=str(exc))
        finally:
            for box in (self.program, self.tester):
                if box is not None:
                    box.close()
        if collect:
            return {
                "results": results,
                "reason": reply.get("reason", "ok"),
                "detail": reply.get("detail", ""),
                "yielded": reply.get("yielded"),
            }
        reply.setdefault("reason", "ok")
        notes = self.isolation_notes()
        if notes and reply["reason"] != "ok":
            reply["detail"] = f"{reply.get('detail', '')} ({notes})".strip()
        return reply

    def isolation_notes(self) -> str:
        info = self.program.info
        notes = []
        if info and not info.get("cgroup") and not self.request.get("unsafe"):
            notes.append(f"no cgroup ({info.get('cgroup_note')}): memory and processes are limited per process")
        if info and not info.get("seccomp") and not self.request.get("unsafe"):
            notes.append("no system-call filter on this machine")
        return "; ".join(notes)

    def remaining_s(self) -> float:
        """What is left of ``total_s``: the sandbox holds every test and call to it."""
        return max(0.0, self.limits.total_s - (time.monotonic() - self.started))

    def patient_wall(self, time_s: float | None) -> float:
        """The longest a test may take in the sandbox: its wall clock, stretched while the
        machine starves it (``BUSY_PATIENCE``), never past the submission's total."""
        return min((1 + BUSY_PATIENCE) * wall_s(self.limits, time_s), self.remaining_s())

    def run_test(self, test: dict[str, Any]) -> tuple[bool, str, str, dict[str, Any]]:
        kind, time_s = test["kind"], test.get("time_s")
        if kind == "stdin":
            try:
                stdin = test["input"].encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return False, "bad_input", "the test's input holds a lone surrogate, which is not text", {}
            outcome, stdout = self.program.op(
                {
                    "op": "stdin",
                    "time_s": time_s,
                    "budget_s": self.remaining_s(),
                    "graded": self.graded(),
                    "shared": self.request.get("stdin_process") == "submission",
                },
                stdin,
                self.patient_wall(time_s) + MARGIN_S,
            )
            return stdin_verdict(outcome, stdout, test, self.limits, self.comparison, self.request.get("collect"))
        return self.run_assert(test)

    def graded(self) -> dict[str, Any] | None:
        """How a graded stdin test's run is read (None for a run whose output is shown, not
        compared): under LiveCodeBench's rule ``SystemExit`` is an exit. Nothing of the expected
        output goes into the sandbox: the rules that need it are applied here
        (``judged_stdout``), since a program can read its supervisor's memory."""
        if self.request.get("collect"):
            return None
        return {"system_exit": self.comparison.rule in (None, "livecodebench")}

    def _send_calls(self, start: int) -> None:
        """Send the call tests from ``start`` on (at most the current batch size, calls only)."""
        end = start
        while end < len(self.tests) and end - start < self.batch and self.tests[end]["kind"] == "call":
            end += 1
        self.batch = min(2 * self.batch, MAX_BATCH)
        args = [call_view(test)["args"] for test in self.tests[start:end]]
        # LiveCodeBench's rule calls every test on one ``Solution`` instance, as its runner does
        lcb = [(self.comparison.rule or test.get("rule")) == "livecodebench" for test in self.tests[start:end]]
        calls = [
            {"name": "@entry", "time_s": test.get("time_s"), "flags": SHARED if one else 0}
            for test, one in zip(self.tests[start:end], lcb)
        ]
        self.inflight = (start, args, self._dispatch(calls, args))
        self.sent_at = time.monotonic()

    def next_calls(self, index: int) -> list[tuple[bool, str, str, dict[str, Any]]]:
        """Verdicts of the batch of call tests that starts at ``index``. The batch after it is
        sent before these are judged, so the program computes while the judge compares (a
        batch sent ahead of a failure is simply abandoned with the sandbox)."""
        if self.inflight is not None and self.inflight[0] != index:
            self._collect(self.inflight[2])  # ran ahead of a failure: discard
            self.inflight = None
        if self.inflight is None:
            self._send_calls(index)
        start, args, wait = self.inflight  # type: ignore[misc]
        outcomes = self._collect(wait)
        self.inflight = None
        took = time.monotonic() - self.sent_at
        if self.slice_s is not None and took > self.slice_s / 4:
            # a reference run in slices: batches of about a quarter slice, so a slow
            # reference hands back its rest soon and the rest spreads over the workers
            self.batch = max(1, int(len(args) * self.slice_s / 4 / took))
        following = start + len(args)
        if self.send_ahead and following < len(self.tests) and self.tests[following]["kind"] == "call":
            self._send_calls(following)
        return self.judge_calls(self.tests[start:following], args, outcomes)

    def judge_calls(
        self, tests: list[dict[str, Any]], args: list[bytes], outcomes: list[tuple[dict[str, Any], bytes]]
    ) -> list[tuple[bool, str, str, dict[str, Any]]]:
        """Verdicts of a batch of call tests; they stop at the first call that ended the
        program's process (``skipped``)."""
        verdicts = []
        collect = bool(self.request.get("collect"))
        for test, arg, (outcome, blob) in zip(tests, args, outcomes):
            if outcome["status"] == "skipped":
                verdicts.append((False, "skipped", "", {}))
                break
            raw = (
                {**outcome, **describe_value(blob)}
                if collect and outcome["status"] == "ok"
                else dict(outcome)
                if collect
                else {}
            )
            if outcome["status"] != "ok":
                verdicts.append((False, *outcome_reason(outcome, self.limits, test.get("time_s")), raw))
            elif test.get("expected") is None and not test.get("expected_digest"):
                # only a reference run records outputs; a graded call needs an expectation
                verdicts.append((True, "ok", "", raw) if collect else (False, "bad_input", "no expected value", raw))
            else:
                view = call_view(test)
                if view["expected"] is None:
                    view = dict(view)  # the check loads the stored value into it: not kept
                try:
                    ok, why = self.results.check(view, blob)
                except (OSError, ValueError) as exc:
                    raise SandboxDown(f"the expected value is not available: {exc}") from exc
                verdicts.append((ok, "ok" if ok else "wrong_answer", why, raw))
        return verdicts

    def _dispatch(self, calls: list[dict[str, Any]], args: list[bytes]) -> float:
        """Send calls to the program's sandbox; returns how long their answers may take. The
        sandbox ends the batch when the submission's ``total_s`` runs out, so that bounds the
        wait whatever the batch holds."""
        wait = 0.0
        for call, arg in zip(calls, args):
            call["size"] = len(arg)
            codec = 2 * CODEC_FIXED_S + (len(arg) + (self.limits.result_mb << 20)) / CODEC_BYTES_PER_S
            wait += CODEC_WALL_FACTOR * codec + (1 + BUSY_PATIENCE) * wall_s(self.limits, call.get("time_s"))
        budget = self.remaining_s()
        self.program.send({"op": "calls", "calls": calls, "budget_s": budget}, b"".join(args))
        return min(wait, budget + CODEC_WALL_FACTOR * CODEC_FIXED_S) + MARGIN_S

    def calls(self, calls: list[dict[str, Any]], args: list[bytes]) -> list[tuple[dict[str, Any], bytes]]:
        """Run calls in the program's sandbox; (outcome, result bytes) for each."""
        return self._collect(self._dispatch(calls, args))

    def _collect(self, wait: float) -> list[tuple[dict[str, Any], bytes]]:
        reply, blob = self.program.receive(wait)
        out, offset = [], 0
        for answer in reply["outcomes"]:
            outcome = call_outcome(answer)
            out.append((outcome, blob[offset : offset + outcome["size"]]))
            offset += outcome["size"]
        return out

    def run_assert(self, test: dict[str, Any]) -> tuple[bool, str, str, dict[str, Any]]:
        """Run one assert test in the tester sandbox, relaying its calls to the program's."""
        if self.tester is None:
            self.tester = Box("python", self.limits)
            self.tester.open({}, None)
        setup = self.request.get("test_setup") or ""
        fn_name = self.request.get("fn_name")
        try:
            proxies = proxied_names(test["code"], setup, fn_name)
        except SyntaxError as exc:
            return False, "sandbox_error", f"the test code does not parse: {exc.msg}", {}
        budget = test.get("time_s") or self.limits.time_s
        used, failure, raised = 0.0, None, False
        spec = {"setup": setup, "code": test["code"], "proxies": proxies, "entry": fn_name}
        tester_wall = min(2 * wall_s(self.limits, budget), self.remaining_s()) + 5
        self.tester.send({"op": "assert", "spec": spec, "wall_s": tester_wall})
        while True:
            header, blob = self.tester.receive(tester_wall + MARGIN_S)
            if "outcome" in header:
                break
            try:
                request, args = _split_frame(blob)
            except ValueError:
                self.tester.send({"abort": True})
                continue
            remaining = budget - used
            if failure is not None or remaining <= 0:
                failure = failure or ("time_limit", f"the calls of this test exceeded {budget:g}s CPU")
                self.tester.send({"status": "failed", "reason": failure[0]})
                continue
            call = {
                "name": str(request.get("name", "")),
                "handle": int(request.get("handle", 0)),
                "flags": int(request.get("flags", 0)),
                "time_s": remaining,
            }
            ((outcome, result),) = self.calls([call], [args])
            used += outcome.get("cpu_ms", 0.0) / 1000
            if outcome["status"] == "ok":
                self.tester.send({"status": "value"}, result)
            elif outcome["status"] == "raised":
                raised = True
                self.tester.send({"status": "raised", "error": outcome.get("error", "")})
            else:
                failure = outcome_reason(outcome, self.limits, remaining)
                self.tester.send({"status": "failed", "reason": failure[0]})
        outcome = header["outcome"]
        raw = {**outcome, "result": None}
        if failure is not None:
            return False, failure[0], failure[1], raw
        if outcome["status"] != "ok" or not blob:
            if outcome["status"] == "sandbox":
                return False, "sandbox_error", outcome.get("error", ""), raw
            if outcome["status"] == "tle":
                return False, "time_limit", f"the test did not finish within {tester_wall:g}s", raw
            return False, "wrong_answer", "the test could not be completed on the program's answers", raw
        try:
            done, _ = _split_frame(blob)
        except ValueError:
            return False, "wrong_answer", "the test could not be completed on the program's answers", raw
        if done.get("ok"):
            return True, "ok", "", raw
        error = str(done.get("error", ""))[:200]
        if done.get("assertion"):
            return False, "wrong_answer", "assertion failed" + (f": {error[16:]}" if len(error) > 16 else ""), raw
        return False, "runtime_error" if raised else "wrong_answer", error, raw


def call_view(test: dict[str, Any]) -> dict[str, Any]:
    """A call test with its arguments and expected value as bytes, decoded from base64 once:
    a benchmark's tests stay in the judge (``known_tests``) and serve many submissions."""
    view = test.get("_bytes")
    if view is None:
        expected = test.get("expected")
        view = test["_bytes"] = {
            **test,
            "args": base64.b64decode(test["args"]),
            "expected": base64.b64decode(expected) if expected is not None else None,
        }
    return view


def _split_frame(frame: bytes) -> tuple[dict[str, Any], bytes]:
    head, size = struct.unpack_from("!II", frame)
    header = json.loads(frame[8 : 8 + head])
    if not isinstance(header, dict) or len(frame) != 8 + head + size:
        raise ValueError("bad frame")
    return header, frame[8 + head :]


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Grade one submission (or, with ``collect``, just run it and return its results)."""
    isolated, why = ISOLATION
    if not isolated and not request.get("unsafe"):
        return {
            "reason": "sandbox_error",
            "detail": f"isolation unavailable: {why}; pass unsafe=True (--unsafe) to run without it",
            "passed": 0,
        }
    try:
        tests = tests_of(request)
    except ValueError as exc:
        return {"reason": "sandbox_error", "detail": f"bad request: {exc}", "passed": 0}
    if tests is None:
        return {"need_tests": True}
    request["tests"] = tests
    try:
        submission = Submission(request)
    except (KeyError, ValueError) as exc:
        return {"reason": "sandbox_error", "detail": f"bad request: {exc}", "passed": 0}
    return submission.run()


def main(isolation: tuple[bool, str], zygote: tuple[int, Any]) -> None:
    """Serve requests with the zygote ``judge_main`` forked before this module loaded."""
    global ISOLATION
    ISOLATION = isolation
    box.ZYGOTE = zygote
    limit_own_memory()
    from rlvr.sandbox.pool import serve

    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    serve(handle, on_exit=_stop_zygote)


def _stop_zygote() -> None:
    """On shutdown, let the zygote exit and reap it, so nothing is left for init to collect."""
    pid, sock = box.ZYGOTE
    sock.close()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
