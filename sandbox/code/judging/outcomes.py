"""What a test's outcome in the sandbox means: its verdict reason and detail, and for a stdin
test the judge's side of its output rules (``rlvr.sandbox.code.running.output``), applied here, outside the
sandbox, because they need the expected output."""

from __future__ import annotations

from typing import Any

from rlvr.sandbox.code.judging.compare import Comparison, stdout_matches
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.running.channels import TOTAL_LIMIT_NOTE
from rlvr.sandbox.code.running.output import judged_expected, judged_stdout

REASONS = {
    "re": "runtime_error",
    "raised": "runtime_error",
    "tle": "time_limit",
    "mle": "memory_limit",
    "ole": "output_limit",
    "bad_value": "wrong_answer",
    "no_answer": "wrong_answer",
    "sandbox": "sandbox_error",
}


def wall_s(limits: Limits, time_s: float | None) -> float:
    return (time_s or limits.time_s) * limits.wall_factor + limits.wall_grace_s


def outcome_reason(outcome: dict[str, Any], limits: Limits, time_s: float | None) -> tuple[str, str]:
    """Reason and detail of a test that did not finish normally."""
    status = outcome["status"]
    if status == "tle":
        notes = outcome.get("notes") or []
        if TOTAL_LIMIT_NOTE in notes:
            return "time_limit", f"submission exceeded its total of {limits.total_s:g}s"
        if "cpu time limit" in notes:
            return "time_limit", f"exceeded {time_s or limits.time_s:g}s of CPU time"
        if "wall clock limit" in notes:
            return "time_limit", f"exceeded {wall_s(limits, time_s):g}s of wall-clock time (sleeping or waiting)"
        return "time_limit", f"exceeded {time_s or limits.time_s:g}s CPU or {wall_s(limits, time_s):g}s wall clock"
    if status == "mle":
        return "memory_limit", f"exceeded {limits.memory_mb} MiB"
    if status == "ole":
        return "output_limit", outcome.get("error") or f"printed more than {limits.output_kb} KiB"
    if status in ("raised", "bad_value", "no_answer"):
        return REASONS[status], (outcome.get("error") or "")[:200]
    if status == "sandbox":
        return "sandbox_error", outcome.get("error") or "sandbox fault"
    tail = (outcome.get("stderr") or "").strip().splitlines()[-1:] or [
        f"exit status {outcome.get('exit_code')}"
        if outcome.get("signal") is None
        else f"killed by signal {outcome['signal']}"
    ]
    return "runtime_error", tail[0][:200]


def stdin_verdict(
    outcome: dict[str, Any], stdout: bytes, test: dict[str, Any], limits: Limits, comparison: Comparison, collect: bool
) -> tuple[bool, str, str, dict[str, Any]]:
    """(passed, reason, detail, raw outcome) of a stdin test. A graded test's stdout came back
    under the submission's limits only; its room and whitespace form under the expected output
    are applied here (a program over its room is ``output_limit`` whatever it did next, as if
    it had been stopped there)."""
    if not collect:
        stdout, over = judged_stdout(stdout, test["output"], limits.output_kb, limits.result_mb)
        if over and outcome["status"] != "sandbox":
            outcome = {**outcome, "status": "ole", "error": ""}
    text = stdout.decode("utf-8", "replace")
    raw = {**outcome, "stdout": text}
    if outcome["status"] != "ok":
        return (False, *outcome_reason(outcome, limits, test.get("time_s")), raw)
    ok, why = stdout_matches(
        text, judged_expected(test["output"]), test.get("atol", comparison.atol), test.get("rtol", comparison.rtol)
    )
    return ok, "ok" if ok else "wrong_answer", why, raw
