"""The one result type every verifier returns.

A verdict is more than a bool: RL needs to tell "the model was wrong" apart from "the grader
could not decide", so unverifiable samples can be masked instead of being taught as wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MATH_REASONS = ("ok", "wrong_answer", "no_answer", "unparseable", "timeout", "grader_error")
#: A request the grader could not read (bad JSON, missing fields); used by files and servers.
BAD_INPUT = "bad_input"
CODE_REASONS = (
    "ok",
    "wrong_answer",
    "time_limit",
    "memory_limit",
    "output_limit",
    "runtime_error",
    "compile_error",
    "no_code",
    "sandbox_error",
)
#: Outcomes that say nothing about the model's answer; trainers may mask them.
UNVERIFIABLE_REASONS = frozenset({"timeout", "grader_error", "sandbox_error", BAD_INPUT})
#: The detail of a code item the service never ran: it waited for a judge until its request's
#: deadline. Waiting is never the program's time, so the verdict is maskable (``sandbox_error``).
NOT_RUN = "not run: no judge was free before the request deadline; send the item again"
#: The detail of a code item that held its judge past its whole budget (``total_s`` + grace).
OVERRUN = "ran past its total_s budget and was cut off"
#: Details the service writes itself; they say nothing about the tests, so redaction keeps them.
SERVICE_DETAILS = frozenset({NOT_RUN, OVERRUN})


@dataclass(frozen=True)
class Verdict:
    """Outcome of grading one completion.

    ``reason`` is ``ok`` exactly when ``correct`` is true. ``detail`` names the rule that
    decided (e.g. ``boxed``, ``hedging: 4 distinct boxed answers``) so a verdict can be audited.
    Code verdicts also fill ``passed``/``total``/``first_failure``.
    """

    correct: bool
    reward: float
    reason: str
    extracted: str | None = None
    elapsed_ms: float = 0.0
    verifier: str = ""
    detail: str = ""
    passed: int | None = None
    total: int | None = None
    first_failure: int | None = None

    @property
    def verifiable(self) -> bool:
        """False when the grader, not the model, failed (timeout, grader or sandbox error)."""
        return self.reason not in UNVERIFIABLE_REASONS

    @classmethod
    def bad_input(cls, detail: str, verifier: str = "") -> "Verdict":
        return cls(False, 0.0, BAD_INPUT, None, 0.0, verifier, detail)

    def to_dict(self) -> dict[str, Any]:
        # built by hand: ``dataclasses.asdict`` deep-copies and cost more than grading a short item
        out = {
            "correct": self.correct,
            "reward": self.reward,
            "reason": self.reason,
            "extracted": self.extracted,
            "elapsed_ms": self.elapsed_ms,
            "verifier": self.verifier,
            "detail": self.detail,
        }
        if self.passed is not None:
            out.update(passed=self.passed, total=self.total, first_failure=self.first_failure)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})


def generic_detail(verdict: Verdict) -> str:
    """A detail built from the structured fields only (reason, first failing test, counts)."""
    parts = [verdict.reason]
    if verdict.first_failure is not None:
        parts.append(f"first failing test {verdict.first_failure}")
    if verdict.total:
        parts.append(f"{verdict.passed}/{verdict.total} tests passed")
    return "; ".join(parts)


def redact(verdict: Verdict) -> Verdict:
    """The verdict as a reward path may show it: ``detail`` replaced by ``generic_detail``.

    A failure's detail can quote hidden test data (``test 3: expected 7, got 0``, an assert's
    source line in a traceback, a gold answer in a parse error); a feedback loop, multi-turn RL
    or an exported dataset would then learn the hidden tests. Nothing here parses the text: a
    detail made of the reason and counts cannot leak, whatever the judge wrote. Pure and
    idempotent, so every layer of a reward path may apply it.
    """
    if verdict.detail in SERVICE_DETAILS or verdict.detail == generic_detail(verdict):
        return verdict
    return replace(verdict, detail=generic_detail(verdict))
