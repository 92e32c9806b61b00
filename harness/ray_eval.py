"""``rlvr eval --ray``: generation sharded over Ray actors, one engine each; the driver writes.

Each ``EngineActor`` holds one backend (``hf`` on its CPU share or one GPU, ``vllm`` on one GPU
per actor) and generates whole chunks, the same chunks in the same order as a single-process
run, so with per-sample seeds the samples are the same. Grading and the run directory stay with
the driver: one ordinary run directory, resumable like any other. A chunk whose actor or node
dies is generated again on a restarted or another actor (``rlvr.sandbox.serving.ray_dispatch``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

from rlvr.harness.backends.base import Generation, GenerationRequest, SamplingParams
from rlvr.harness.backends.registry import backend_names, backend_spec, make_backend
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.sandbox.serving.ray_dispatch import DispatchStats, kill_actors, ordered_map, start_actors


class EngineActor:
    """One generation backend on one Ray worker (wrapped with ``ray.remote`` below)."""

    def __init__(self, cfg: dict[str, Any], model_path: str, threads: int | None):
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.backend = make_backend(EvalConfig(**cfg), model_path)

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Generation]:
        return self.backend.generate(requests, params)

    def close(self) -> None:
        self.backend.close()


class RayEngines:
    """``actors`` engines on the cluster (default: one per GPU, or per ``cpus_per_actor`` CPUs)."""

    def __init__(self, cfg: EvalConfig, model_path: str):
        from rlvr.sandbox.serving.ray_grading import RayUnavailable, connect

        backend = backend_spec(cfg.backend)
        if not backend.local:
            raise UserError(
                f"--ray shards local engines ({', '.join(backend_names(local_only=True))}); the {cfg.backend} "
                "backend is already remote"
            )
        try:
            connect(cfg.ray)
        except RayUnavailable as exc:
            raise UserError(str(exc)) from exc
        import ray

        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if backend.ray_needs_gpu and not gpus and cfg.device != "cpu":
            raise UserError(f"--backend {cfg.backend} --ray needs GPUs in the Ray cluster (or --device cpu)")
        on_gpu = gpus > 0 and cfg.device != "cpu"
        cpus = float(cfg.ray_cpus_per_actor)
        count = cfg.ray_actors or (gpus if on_gpu else max(1, int(resources.get("CPU", 1) // cpus)))
        resources: dict[str, Any] = {"num_cpus": cpus, **({"num_gpus": 1} if on_gpu else {})}
        self.actors = start_actors(EngineActor, count, resources, asdict(cfg), model_path, max(1, int(cpus)))
        self.stats = DispatchStats()

    def generate_chunks(
        self, chunks: Sequence[list[GenerationRequest]], params: SamplingParams
    ) -> Iterator[list[Generation]]:
        yield from ordered_map(self.actors, "generate", [(c, params) for c in chunks], 2, self.stats)

    def close(self) -> None:
        kill_actors(self.actors)
        self.actors = []
