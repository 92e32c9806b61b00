"""The generation backends by name: what each needs, how it enters a fingerprint, how it is built.

``--backend`` (eval, ablations), ``backend:`` (trainers) and every choice that depends on the
backend read it from here, so a backend is described once instead of in a string comparison per
caller. Building one imports its module only then (``hf`` needs transformers, ``vllm`` vLLM,
``openai`` httpx), so naming or describing a backend costs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from rlvr.harness.backends.base import Backend
from rlvr.harness.errors import UserError
from rlvr.harness.fingerprint import package_version


class BackendSettings(Protocol):
    """The settings a backend is built from (``EvalConfig`` holds them all)."""

    backend: str
    dtype: str
    device: str
    seed: int
    batch_size: int
    max_model_len: int | None
    gpu_memory_utilization: float | None
    kv_cache_gb: float
    base_url: str | None
    api_key_env: str
    concurrency: int


@dataclass(frozen=True)
class BackendSpec:
    """One backend as the rest of the code needs to know it."""

    name: str
    #: runs the model in this process from local weights; else a server's: the model is named,
    #: not hashed, has no embedded default and is not sharded over Ray
    local: bool
    #: generates in an engine of its own beside any training copy of the weights: its own KV cache
    #: (``gpu_memory_utilization``, ``kv_cache_gb``), numerics and sampled log-probabilities
    separate_engine: bool
    #: on Ray, a device other than ``cpu`` means one GPU per actor (no falling back to CPUs)
    ray_needs_gpu: bool
    #: packages whose versions a summary records beside torch, transformers and numpy
    packages: tuple[str, ...]
    #: ``(dtype, device) -> {backend, version, dtype, device}`` as it enters the fingerprint,
    #: computed without loading any model
    describe: Callable[[str, str], dict[str, Any]]
    #: samples handed to ``generate`` at once (the unit of resumption and of progress)
    chunk_size: Callable[[BackendSettings], int]
    #: fails before anything is written when the backend cannot run here; the device it will use
    #: when that is only known by asking the backend (vLLM's build)
    preflight: Callable[[BackendSettings], str | None]
    #: ``(settings, model path or served model id) -> Backend``
    build: Callable[[BackendSettings, str], Backend]


def auto_device(device: str) -> str:
    """``auto`` resolved the way the local backends resolve it: CUDA when visible, else the CPU."""
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _describe_hf(dtype: str, device: str) -> dict[str, Any]:
    device = auto_device(device)
    resolved = dtype if dtype != "auto" else ("bfloat16" if device.startswith("cuda") else "float32")
    resolved = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(resolved, resolved)
    version = f"transformers {package_version('transformers')}, torch {package_version('torch')}"
    return {"backend": "hf", "version": version, "dtype": resolved, "device": device.split(":")[0]}


def _build_hf(cfg: BackendSettings, model_path: str) -> Backend:
    from rlvr.harness.backends.hf import HFBackend

    return HFBackend(model_path, cfg.dtype, cfg.device, cfg.batch_size, cfg.max_model_len)


def _describe_vllm(dtype: str, device: str) -> dict[str, Any]:
    from rlvr.harness.backends.vllm_engine import engine_dtype, vllm_version

    device = auto_device(device).split(":")[0]
    return {
        "backend": "vllm",
        "version": f"vllm {vllm_version()}",
        "dtype": engine_dtype(dtype, device),
        "device": device,
    }


def _preflight_vllm(cfg: BackendSettings) -> str | None:
    from rlvr.harness.backends.vllm_engine import require_vllm

    return require_vllm(cfg.device)[1]


def _build_vllm(cfg: BackendSettings, model_path: str) -> Backend:
    from rlvr.harness.backends.vllm_engine import VLLMBackend
    from rlvr.harness.setting_blocks import gpu_memory_share

    return VLLMBackend(
        model_path,
        cfg.dtype,
        cfg.seed,
        cfg.max_model_len,
        gpu_memory_share(cfg.gpu_memory_utilization, beside_learner=False),
        device=cfg.device,
        kv_cache_gb=cfg.kv_cache_gb,
    )


def _preflight_openai(cfg: BackendSettings) -> str | None:
    if not cfg.base_url:
        raise UserError("the openai backend needs --base-url (e.g. http://localhost:8000/v1)")
    return None


def _build_openai(cfg: BackendSettings, model_path: str) -> Backend:
    from rlvr.harness.backends.openai_api import OpenAIBackend

    return OpenAIBackend(model_path, cfg.base_url, os.environ.get(cfg.api_key_env), cfg.concurrency)


BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "hf",
            local=True,
            separate_engine=False,
            ray_needs_gpu=False,
            packages=(),
            describe=_describe_hf,
            chunk_size=lambda cfg: cfg.batch_size,
            preflight=lambda cfg: None,
            build=_build_hf,
        ),
        BackendSpec(
            "vllm",
            local=True,
            separate_engine=True,
            ray_needs_gpu=True,
            packages=("vllm",),
            describe=_describe_vllm,
            chunk_size=lambda cfg: max(256, cfg.batch_size),
            preflight=_preflight_vllm,
            build=_build_vllm,
        ),
        BackendSpec(
            "openai",
            local=False,
            separate_engine=False,
            ray_needs_gpu=False,
            packages=("httpx",),
            describe=lambda dtype, device: {
                "backend": "openai",
                "version": "openai-compatible",
                "dtype": "server",
                "device": "remote",
            },
            chunk_size=lambda cfg: 4 * cfg.concurrency,
            preflight=_preflight_openai,
            build=_build_openai,
        ),
    )
}


def backend_names(local_only: bool = False) -> tuple[str, ...]:
    """Every backend's name (``local_only``: those that run the model in this process)."""
    return tuple(name for name, spec in BACKENDS.items() if spec.local or not local_only)


def backend_spec(name: str) -> BackendSpec:
    """The backend called ``name``; one line naming the others when there is none."""
    if name not in BACKENDS:
        raise UserError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def separate_engine(name: str) -> bool:
    """Does backend ``name`` generate in an engine of its own? False for names it does not know
    (the trainers' population modes, or a name its config has yet to refuse)."""
    return name in BACKENDS and BACKENDS[name].separate_engine


def make_backend(cfg: BackendSettings, model_path: str) -> Backend:
    """The backend ``cfg.backend`` names, loaded with ``model_path``."""
    return backend_spec(cfg.backend).build(cfg, model_path)
