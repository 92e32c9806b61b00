"""vLLM's sleep on a CPU, where vLLM has none (its sleep mode needs the CUDA memory pool).

Between rollout and learning a trainer gives back what the engine holds: the KV cache (every
layer's view keeps its shape over a storage resized to 0, reallocated zeroed with the prefix cache
dropped) and the weights (parameter storages resized to 0 and the CPU GEMM kernels, with their
packed copies, replaced by a stub that refuses to run until a ``push_weights`` rebuilds them).
"""

from __future__ import annotations

import ctypes
from typing import Any, Iterable

from rlvr.harness.backends.vllm_engine import reset_prefix_cache


def _distinct_storages(tensors: Iterable[Any]) -> list[Any]:
    storages: dict[int, Any] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.nbytes():
            storages.setdefault(storage.data_ptr(), storage)
    return list(storages.values())


def _kv_storages(worker: Any) -> list[Any]:
    """The distinct storages under the worker's KV cache (on a CPU one int8 buffer that every
    layer's cache is a view of)."""
    return _distinct_storages(worker.model_runner.kv_caches)


def _release_storages(owner: Any, storages: list[Any]) -> int:
    """Each storage resized to 0 (every tensor on it keeps its shape, so a later copy into it
    finds it again); sizes kept on ``owner`` for ``_restore_storages``. Bytes released."""
    owner.rlvr_released = [(s, s.nbytes()) for s in storages]
    for storage, _ in owner.rlvr_released:
        storage.resize_(0)
    return sum(nbytes for _, nbytes in owner.rlvr_released)


def _restore_storages(owner: Any) -> None:
    for storage, nbytes in getattr(owner, "rlvr_released", []):
        storage.resize_(nbytes)
    owner.rlvr_released = []


def _release_kv(worker: Any) -> int:
    return _release_storages(worker, _kv_storages(worker))


def _restore_kv(worker: Any) -> None:
    _restore_storages(worker)
    for tensor in worker.model_runner.kv_caches:
        tensor.zero_()  # as allocated (torch.zeros)


def release_kv_cache(llm: Any) -> int:
    """A CPU engine's stand-in for sleep (vLLM's needs its CUDA memory pool): the KV cache's
    memory goes back to the system (storage resized to 0; every layer's view keeps its shape).
    Bytes released; ``restore_kv_cache`` before the next request."""
    return sum(llm.collective_rpc(_release_kv))


def restore_kv_cache(llm: Any) -> None:
    """The KV cache reallocated (zeroed, as at start) and the prefix cache dropped: no cached
    block may point at memory that was released."""
    llm.collective_rpc(_restore_kv)
    reset_prefix_cache(llm)


def _weights_released(*_: Any) -> Any:
    raise RuntimeError("the engine's weights were released while the learner trained; push_weights brings them back")


def _release_weights(model: Any) -> int:
    """Every parameter storage released and every CPU GEMM kernel dropped with its packed copy
    of the weight (the reload's post-load processing builds new ones)."""
    released = _release_storages(model, _distinct_storages(model.parameters()))
    for module in model.modules():
        if hasattr(module, "cpu_linear"):
            module.cpu_linear = _weights_released
    return released


def release_weights(llm: Any) -> int:
    """A CPU engine's weights given back while the learner trains (vLLM's sleep level 2 needs its
    CUDA pool): the engine refuses to run until ``restore_weights`` and a ``push_weights`` that
    overwrites them all. Bytes of parameter storage released (the kernels' packed copies come on
    top)."""
    released = sum(llm.apply_model(_release_weights))
    trim_heap()
    return released


def trim_heap() -> bool:
    """Freed heap chunks back to the OS, not only to malloc (glibc's ``malloc_trim``; without it
    the resident set keeps the released weights). False on a C library that has none (musl):
    the weights are still released to the allocator, and reused by the next allocation."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def restore_weights(llm: Any) -> None:
    """The released parameters' memory back (contents undefined) for ``push_weights`` to fill."""
    llm.apply_model(_restore_storages)
