"""Grading benchmark problems with the sandbox verifiers: the one path evaluation and training share.

``grading_item`` turns (problem, completion) into the same ``sandbox`` item the reward
adapters and the reward server build, and ``EvalGrader.grade`` sends it through
``GradingService.grade``: a trainer's reward and an evaluation's grade for the same completion
come from the same function with the same settings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError
from rlvr.sandbox.service import GradingService, Item, parse_item
from rlvr.sandbox.verdict import Verdict
from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER


class EvalGrader:
    """A grading service plus the benchmark-specific preparation of gold data (EvalPlus
    expected outputs are computed once per problem, in the sandbox, and cached on disk)."""

    def __init__(
        self,
        workers: int | None = None,
        math_timeout: float = 1.0,
        code_limits: dict[str, Any] | None = None,
        test_details: bool = False,
        code_stdin_process: str = "test",
    ):
        """``test_details`` keeps the judge's failure details, which quote hidden expected values:
        for evaluation logs (``rlvr eval --test-details``), never for a trainer's rewards.
        ``code_stdin_process``: ``test`` (a fresh process per stdin test) or ``submission``
        (``rlvr.sandbox.code.verify.verify_code``)."""
        self.math_timeout = math_timeout
        self.code_limits = dict(code_limits or {})
        self.code_stdin_process = code_stdin_process
        self.service = GradingService(
            workers=workers,
            math_timeout=math_timeout,
            code_limits=self.code_limits or None,
            test_details=test_details,
            code_stdin_process=code_stdin_process,
        )
        self._gold: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        """Everything about grading that can change a verdict (goes into the fingerprint)."""
        return {
            "math_verifier": MATH_VERIFIER,
            "code_verifier": CODE_VERIFIER,
            "math_timeout_s": self.math_timeout,
            "code_limits": self.code_limits,
            # only when not the default, so the fingerprints of earlier results stay valid
            **({"code_stdin_process": self.code_stdin_process} if self.code_stdin_process != "test" else {}),
        }

    def gold(self, problem: Problem) -> dict[str, Any]:
        with self._lock:
            if problem.id in self._gold:
                return self._gold[problem.id]
        gold = resolve_gold(problem, self.service)
        if problem.kind == "code" and self.code_limits:
            gold["limits"] = {**self.code_limits, **(gold.get("limits") or {})}
        if problem.kind == "code":
            from rlvr.sandbox.code.rules.testcases import BadTests, prepare_tests

            try:
                gold["tests"] = prepare_tests(gold["tests"], gold.get("fn_name"))  # serialised once, sent by digest
            except BadTests:
                pass  # graded as sent: every verdict then says what is wrong with the tests
        with self._lock:
            return self._gold.setdefault(problem.id, gold)

    def item(self, problem: Problem, completion: str, index: int = 0) -> Item:
        return grading_item(problem, completion, index, self.gold(problem))

    def prepare(self, problems: Sequence[Problem]) -> None:
        """Resolve the gold of many problems at once (EvalPlus expected outputs are computed
        on every judge in parallel, not one problem after another)."""
        todo = list({p.id: p for p in problems if p.id not in self._gold}.values())
        if len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.service.code.workers) as pool:
                list(pool.map(self.gold, todo))
        elif todo:
            self.gold(todo[0])

    def grade(self, pairs: Sequence[tuple[Problem, str]]) -> list[Verdict]:
        """Grade in order. Gold is resolved on ``workers`` threads (EvalPlus references run on
        every judge at once when they are not cached) while the completions of the problems
        already resolved are graded: the judges start on the first problem instead of waiting
        for the caller to prepare the last (HumanEval+'s cached gold is ~1 s of the caller's
        CPU)."""
        todo = list({p.id: p for p, _ in pairs if p.id not in self._gold}.values())
        with ThreadPoolExecutor(max_workers=self.service.code.workers) as pool:
            resolving = {p.id: pool.submit(self.gold, p) for p in todo}

            def items() -> Iterator[Item]:
                for index, (problem, completion) in enumerate(pairs):
                    future = resolving.get(problem.id)
                    gold = future.result() if future is not None else self.gold(problem)
                    yield grading_item(problem, completion, index, gold)

            try:
                return self.service.grade(items())
            finally:
                for future in resolving.values():
                    future.cancel()

    def same_answer(self, problem: Problem, a: str, b: str) -> bool:
        """Are two extracted math answers equal under the problem's grading policy? (Used to
        group votes for maj@k with the verifier's own notion of equivalence.)"""
        if a == b:
            return True
        options = {k: v for k, v in problem.gold.items() if k in ("policy", "answer_type", "tolerance")}
        item = parse_item({"kind": "math", "completion": f"\\boxed{{{a}}}", "answer": b, **options})
        return self.service.grade([item])[0].correct

    def close(self) -> None:
        self.service.close()


def grading_item(problem: Problem, completion: str, index: int = 0, gold: dict[str, Any] | None = None) -> Item:
    """The sandbox item for one completion of one problem."""
    payload = gold if gold is not None else problem.gold
    if "differential" in payload:
        raise ValueError(f"{problem.id}: resolve the EvalPlus gold first (EvalGrader.gold)")
    return parse_item({"id": f"{problem.id}#{index}", "kind": problem.kind, "completion": completion, **payload}, index)


def resolve_gold(problem: Problem, service: GradingService) -> dict[str, Any]:
    """The gold payload ready for the verifier: EvalPlus rows get their expected outputs by
    running the canonical solution in the sandbox (cached on disk by input hash)."""
    gold = dict(problem.gold)
    spec = gold.pop("differential", None)
    if spec is None:
        return gold
    from rlvr.sandbox.code.judging.reference import ReferenceFailed, evalplus_tests

    try:
        tests, total_s = evalplus_tests(
            spec["reference"], spec["inputs"], gold["fn_name"], spec.get("groups"), spec.get("oracle"), service.code
        )
    except ReferenceFailed as exc:
        raise UserError(
            f"{problem.id}: the reference solution failed in this sandbox ({exc}); report it with `rlvr --version`"
        ) from exc
    gold["tests"] = tests
    limits = dict(gold.get("limits") or {})
    limits.setdefault("total_s", total_s)
    gold["limits"] = limits
    return gold
