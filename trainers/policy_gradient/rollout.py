"""Rollouts: G completions per prompt from the current policy, graded by the sandbox verifier.

Generation uses the harness's per-sample-seeded sampler (``rlvr.harness.backends.hf_sampling``) on
the policy itself (CPU or GPU); the vLLM engine in ``rlvr.trainers.policy_gradient.vllm_rollout`` (CPU or GPU) can take
its place. Each sample's seed is derived from (run seed, step, prompt, sample index), so a
rollout never depends on RNG state and a resumed run regenerates exactly what it would have.
Rewards come from ``rlvr.harness.grading.EvalGrader`` — the function ``rlvr eval`` grades with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from rlvr.harness.backends.base import sample_seed
from rlvr.harness.backends.hf import encode_prompt, eos_token_ids
from rlvr.harness.backends.hf_sampling import sample_batch
from rlvr.harness.benchmarks.problems import Problem
from rlvr.sandbox.grader import Grader
from rlvr.sandbox.verdict import Verdict
from rlvr.trainers.policy_gradient.live_progress import report_rollout


class PromptCache:
    """Token ids of each problem's rendered prompt (template + instruction), encoded once."""

    def __init__(self, tokenizer: Any, template: Any, instruction_of: dict[str, str], max_length: int | None = None):
        self.tokenizer, self.template, self.instruction_of = tokenizer, template, instruction_of
        self.max_length = max_length  # longer prompts keep their last max_length tokens (verl's left truncation)
        self._ids: dict[str, list[int]] = {}

    def __call__(self, problem: Problem) -> list[int]:
        from rlvr.harness.templates import render

        if problem.id not in self._ids:
            rendered = render(self.template, problem.question, self.instruction_of.get(problem.benchmark, ""))
            ids = encode_prompt(self.tokenizer, rendered)[1]
            self._ids[problem.id] = ids[-self.max_length :] if self.max_length else ids
        return self._ids[problem.id]


@dataclass
class Group:
    """G samples of one prompt with their verdicts."""

    problem: Problem
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    texts: list[str]
    truncated: list[bool]
    correct: list[bool]
    reasons: list[str] = field(default_factory=list)
    #: the sampler's log-prob of every sampled token, per completion (``backend: vllm``; None with hf)
    sampler_logp: list[list[float]] | None = None

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.correct)


class HFRollout:
    """Samples with the training model (switched to eval mode while generating)."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        template: Any,
        instruction_of: dict[str, str],
        max_tokens: int,
        temperature: float,
        top_p: float,
        batch_size: int,
        seed: int,
        prompt_max_length: int | None = None,
    ):
        self.model, self.tokenizer, self.template = model, tokenizer, template
        self.instruction_of = instruction_of
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.batch_size, self.seed = batch_size, seed
        self.eos = eos_token_ids(model, tokenizer)
        self.prompt = PromptCache(tokenizer, template, instruction_of, prompt_max_length)

    def sample(
        self, problems: Sequence[Problem], group_size: int, step: int
    ) -> list[tuple[list[int], list[list[int]], list[str], list[bool]]]:
        """Per problem: (prompt ids, completion ids per sample, texts, truncated flags)."""
        requests = [(p, j) for p in problems for j in range(group_size)]
        prompts = [self.prompt(p) for p, _ in requests]
        seeds = [sample_seed(self.seed, f"step{step}:{p.id}", j) for p, j in requests]
        was_training = self.model.training
        self.model.eval()
        rows: list = []
        report_rollout(0, len(requests), 0)
        try:
            for start in range(0, len(requests), self.batch_size):
                chunk = slice(start, start + self.batch_size)
                rows += sample_batch(
                    self.model,
                    prompts[chunk],
                    seeds[chunk],
                    [self.max_tokens] * len(prompts[chunk]),
                    self.eos,
                    self.tokenizer.pad_token_id,
                    self.temperature,
                    self.top_p,
                    self.template.stop,
                    lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
                )
                report_rollout(len(rows), len(requests), sum(len(r.token_ids) for r in rows))
        finally:
            self.model.train(was_training)
        out = []
        for index, problem in enumerate(problems):
            mine = rows[index * group_size : (index + 1) * group_size]
            texts = [self._text(r) for r in mine]
            out.append(
                (
                    prompts[index * group_size],
                    [r.token_ids for r in mine],
                    texts,
                    [r.finish_reason == "length" for r in mine],
                )
            )
        return out

    def _text(self, row: Any) -> str:
        text = self.tokenizer.decode(row.token_ids, skip_special_tokens=True)
        if row.stop_text is not None and (cut := text.find(row.stop_text)) != -1:
            text = text[: cut + len(row.stop_text)] if self.template.include_stop else text[:cut]
        return text


class RolloutWorker:
    """Generate and grade groups; counts generations and times each phase. With ``logprobs``
    the sampler also returns its log-prob of every sampled token (the vLLM sampler does), which
    the groups carry for the sampler-learner mismatch metrics and truncated importance sampling."""

    def __init__(
        self, sampler: Any, grader: Grader[tuple[Problem, str], Verdict], group_size: int, logprobs: bool = False
    ):
        self.sampler, self.grader, self.group_size, self.logprobs = sampler, grader, group_size, logprobs
        self.generations = 0
        self.seconds = {"generate": 0.0, "score": 0.0}

    def __call__(self, problems: Sequence[Problem], step: int) -> list[Group]:
        if not problems:
            return []
        t0 = time.perf_counter()
        if self.logprobs:
            sampled = self.sampler.sample(problems, self.group_size, step, logprobs=True)
        else:
            sampled = self.sampler.sample(problems, self.group_size, step)
        self.seconds["generate"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        pairs = [(p, text) for p, row in zip(problems, sampled) for text in row[2]]
        verdicts = self.grader.grade(pairs)
        self.seconds["score"] += time.perf_counter() - t0
        groups = []
        for index, (problem, row) in enumerate(zip(problems, sampled)):
            prompt_ids, completions, texts, truncated = row[:4]
            mine = verdicts[index * self.group_size : (index + 1) * self.group_size]
            groups.append(
                Group(
                    problem,
                    prompt_ids,
                    completions,
                    texts,
                    truncated,
                    [bool(v.correct) for v in mine],
                    [v.reason for v in mine],
                    row[4] if self.logprobs else None,
                )
            )
        self.generations += len(pairs)
        return groups

    def take_times(self) -> dict[str, float]:
        times, self.seconds = self.seconds, {"generate": 0.0, "score": 0.0}
        return times
