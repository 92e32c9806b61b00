"""Where an evaluation's generated samples go: graded on a thread of their own, then logged.

Generation never waits on grading, and every sample that was graded is on disk before the next
batch, so a crash or Ctrl-C keeps it (``rlvr eval`` resumes from the log).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from rlvr.harness.backends.base import GenerationRequest
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.grading import EvalGrader
from rlvr.harness.progress import EvalProgress
from rlvr.harness.results import SampleLog
from rlvr.harness.templates import Template


class GradingSink:
    """A thread that grades generated samples as they arrive and appends each record to the
    sample log (made durable before the next batch), so a crash or Ctrl-C keeps every sample
    that was graded. Samples waiting when the run stops are graded and written by ``close``."""

    _STOP = object()

    def __init__(self, grader: EvalGrader, log: SampleLog, meter: EvalProgress, template: Template, timings: dict):
        self.grader, self.log, self.meter, self.template, self.timings = grader, log, meter, template, timings
        self.queue: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="rlvr-grading", daemon=True)
        self.thread.start()

    def put(self, item: tuple, request: GenerationRequest, generation: Any) -> None:
        if self.error is not None:
            raise RuntimeError("grading failed") from self.error
        self.queue.put((item, request, generation))

    def _work(self) -> None:
        stopping = False
        while not stopping:
            batch = [self.queue.get()]
            while True:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            stopping = any(entry is self._STOP for entry in batch)
            batch = [entry for entry in batch if entry is not self._STOP]
            if not batch or self.error is not None:
                continue
            try:
                self._grade(batch)
            except BaseException as exc:  # reported to the generating thread by put / close
                self.error = exc

    def _grade(self, batch: list) -> None:
        t0 = time.time()
        verdicts = self.grader.grade([(problem, g.text) for (_, problem, _), _, g in batch])
        self.timings["grading_s"] += time.time() - t0
        records = []
        for ((run, problem, j), request, g), v in zip(batch, verdicts):
            records.append(sample_record(run.name, problem, j, request.seed, self.template, g, v))
            self.timings["tokens_generated"] += g.n_tokens or 0
        self.log.write(records)
        for record in records:
            self.meter.graded(record["benchmark"], record["correct"], record["n_tokens"])

    def close(self) -> None:
        self.queue.put(self._STOP)
        try:
            self.thread.join()
        finally:
            self.log.close()
        if self.error is not None:
            raise self.error


def sample_record(
    benchmark: str, problem: Problem, sample_idx: int, seed: int, template: Template, generation: Any, verdict: Any
) -> dict[str, Any]:
    """One line of ``samples.jsonl``: what was asked, what came back and how it was graded (the
    record ``rlvr show``, ``regrade``, ``export`` and the summaries read)."""
    return {
        "id": problem.id,
        "benchmark": benchmark,
        "sample_idx": sample_idx,
        "seed": seed,
        "template": template.name,
        "prompt": generation.prompt,
        "completion": generation.text,
        "extracted": verdict.extracted,
        # the math gold (not secret; code tests stay out of the log, as the verifiers' details do)
        "gold": str(problem.gold.get("answer")) if problem.kind == "math" and "answer" in problem.gold else None,
        "correct": bool(verdict.correct),
        "reward": verdict.reward,
        "reason": verdict.reason,
        "detail": verdict.detail,
        "finish_reason": generation.finish_reason,
        "n_tokens": generation.n_tokens,
        "n_prompt_tokens": generation.n_prompt_tokens,
        "verifier": verdict.verifier,
    }
