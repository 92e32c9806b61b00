"""Scoring perturbed models: greedy generation from base + spec, graded by the sandbox verifier.

One ``PopulationScorer`` holds the model once, its exact base copy (``Perturber``) and the
grader. ``score_many`` evaluates a list of specs on a list of problems either in this process
or, with ``workers > 1``, across spawned worker processes that each hold one model copy and
only generate (grading stays here, with the one grader every run uses), or with
``backend="ray"`` across Ray actors that each hold one model copy (``RayGenerator``). Decoding is greedy, as
in both papers, so a spec's outcomes are a pure function of (base weights, spec, problems).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from rlvr.harness.backends.registry import separate_engine
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.grading import EvalGrader
from rlvr.trainers.populations.journal import GenerationJournal, generation_key
from rlvr.trainers.populations.perturb import Component, Perturber, spec_from_json, spec_to_json


@dataclass
class Scored:
    """Per-problem outcomes of one model on one problem list (same order)."""

    correct: np.ndarray
    extracted: list[str | None]
    reasons: list[str]
    texts: list[str]

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean()) if len(self.correct) else 0.0


class _Generator:
    """Greedy generation with a perturbable model (lives in the parent or in a worker)."""

    def __init__(
        self,
        model_path: str,
        template: str,
        instruction_of: dict[str, str],
        max_tokens: int,
        batch_size: int,
        noise_dtype: str,
        noise_cache_gb: float,
        dtype: str = "auto",
        device: str = "auto",
    ):
        from rlvr.harness.backends.hf import load_model
        from rlvr.harness.templates import load_template
        from rlvr.trainers.policy_gradient.rollout import HFRollout

        self.model, self.tokenizer, self.device = load_model(model_path, dtype, device)
        self.model.requires_grad_(False)
        self.perturber = Perturber(self.model, noise_dtype, noise_cache_gb)
        self.rollout = HFRollout(
            self.model,
            self.tokenizer,
            load_template(template),
            instruction_of,
            max_tokens,
            0.0,
            1.0,
            batch_size,
            seed=42,
        )

    def generate(self, spec: Sequence[Component], problems: Sequence[Problem]) -> list[str]:
        self.perturber.apply(spec)
        try:
            return [texts[0] for _, _, texts, _ in self.rollout.sample(problems, 1, step=0)]
        finally:
            self.perturber.restore()


class RayGenerator(_Generator):
    """A ``_Generator`` as a Ray actor: its own model copy, specs applied in place and restored."""

    def __init__(self, args: tuple, threads: int):
        torch.set_num_threads(threads)
        super().__init__(*args)

    def generate_json(self, spec_json: dict[str, Any], problems: list[Problem]) -> list[str]:
        return self.generate(spec_from_json(spec_json), problems)


def ray_generators(args: tuple, actors: int) -> list[Any]:
    """``actors`` generators on the Ray cluster (``RAY_ADDRESS``, a cluster here, else a local one;
    ``actors`` <= 1 means one per cluster CPU)."""
    import ray
    from rlvr.sandbox.serving.ray_dispatch import start_actors
    from rlvr.sandbox.serving.ray_grading import connect

    connect(None)
    count = actors if actors > 1 else max(1, int(ray.cluster_resources().get("CPU", 1)))
    return start_actors(RayGenerator, count, {"num_cpus": 1}, args, 1)


_WORKER: _Generator | None = None


def _init_worker(args: tuple, threads: int) -> None:
    global _WORKER
    torch.set_num_threads(threads)
    _WORKER = _Generator(*args)


def _worker_generate(spec_json: dict[str, Any], problems: list[Problem]) -> list[str]:
    assert _WORKER is not None
    return _WORKER.generate(spec_from_json(spec_json), problems)


class PopulationScorer:
    """Evaluate base + spec on problems; counts generations (one greedy pass per problem)."""

    def __init__(
        self,
        model_path: str,
        template: str,
        instruction_of: dict[str, str],
        max_tokens: int,
        batch_size: int = 32,
        noise_dtype: str = "bfloat16",
        noise_cache_gb: float = 0.0,
        workers: int = 1,
        dtype: str = "auto",
        device: str = "auto",
        backend: str = "hf",
    ):
        self.noise_dtype = noise_dtype
        if separate_engine(backend):
            from rlvr.trainers.populations.vllm_weights import VLLMPerturbedGenerator

            self.local: Any = VLLMPerturbedGenerator(
                model_path, template, instruction_of, max_tokens, noise_dtype, noise_cache_gb, dtype, device
            )
            workers = 1
        else:
            self.local = _Generator(
                model_path, template, instruction_of, max_tokens, batch_size, noise_dtype, noise_cache_gb, dtype, device
            )
        self.grader = EvalGrader()
        self.generations = 0
        #: The run directory's generation journal (``run_search`` sets it); None generates everything.
        self.journal: GenerationJournal | None = None
        self.pool: ProcessPoolExecutor | None = None
        args = (model_path, template, instruction_of, max_tokens, batch_size, noise_dtype, 0.0, dtype, device)
        self.ray_actors = ray_generators(args, workers) if backend == "ray" else []
        if workers > 1 and backend != "ray":
            threads = max(1, (os.cpu_count() or 1) // workers)
            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=get_context("spawn"),
                initializer=_init_worker,
                initargs=(args, threads),
            )

    @property
    def noise_device(self) -> str:
        """The device type the noise is drawn on (that of the perturbed weights): ``cpu``, ``cuda``..."""
        return self.local.perturber.noise_device

    @property
    def noise_draws(self) -> int | None:
        """Full-model noise draws in this process (hf backend), for cost accounting."""
        perturber = getattr(self.local, "perturber", None)
        return perturber.draws if isinstance(perturber, Perturber) else None

    def grade(self, problems: Sequence[Problem], texts: Sequence[str]) -> Scored:
        verdicts = self.grader.grade(list(zip(problems, texts)))
        return Scored(
            np.array([bool(v.correct) for v in verdicts]),
            [v.extracted for v in verdicts],
            [v.reason for v in verdicts],
            list(texts),
        )

    def score(self, spec: Sequence[Component], problems: Sequence[Problem]) -> Scored:
        return self.score_many([spec], problems)[0]

    def score_many(self, specs: Sequence[Sequence[Component]], problems: Sequence[Problem]) -> list[Scored]:
        """Outcomes of base + spec for every spec. Specs are always applied to the original base
        (a moved centre is part of the spec), so every process computes identical weights.
        Completions already in the run's journal are replayed, not generated again."""
        problems = list(problems)
        ids = [p.id for p in problems]
        keys = [generation_key(s, ids) for s in specs]
        texts: dict[str, list[str]] = {}
        if self.journal is not None:
            texts = {k: hit for k in set(keys) if (hit := self.journal.lookup(k)) is not None}
        pending = {k: s for k, s in zip(keys, specs) if k not in texts}  # equal keys: one spec, generated once
        for key, (generated, seconds) in zip(pending, self._generate(list(pending.values()), problems)):
            texts[key] = generated
            if self.journal is not None:
                self.journal.record(key, generated, seconds)
        self.generations += len(specs) * len(problems)
        return [self.grade(problems, texts[k]) for k in keys]

    def _generate(
        self, specs: Sequence[Sequence[Component]], problems: list[Problem]
    ) -> Iterator[tuple[list[str], float]]:
        """(completions, seconds) per spec, in order, each yielded as soon as it exists (in this
        process: one by one, so a kill loses at most the spec being generated)."""
        t0 = time.perf_counter()
        if self.ray_actors and len(specs) > 1:
            from rlvr.sandbox.serving.ray_dispatch import ordered_map

            payloads = [(spec_to_json(s, "", self.noise_dtype), problems) for s in specs]
            batch = list(ordered_map(self.ray_actors, "generate_json", payloads, in_flight=1))
        elif self.pool is not None and len(specs) > 1:
            jobs = [self.pool.submit(_worker_generate, spec_to_json(s, "", self.noise_dtype), problems) for s in specs]
            batch = [job.result() for job in jobs]
        else:
            for spec in specs:
                yield self.local.generate(spec, problems), time.perf_counter() - t0
                t0 = time.perf_counter()
            return
        each = (time.perf_counter() - t0) / max(1, len(specs))
        for texts in batch:
            yield texts, each

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        if self.ray_actors:
            from rlvr.sandbox.serving.ray_dispatch import kill_actors

            kill_actors(self.ray_actors)
        self.grader.close()
