"""The ``vllm`` backend: vLLM's offline engine on a CUDA GPU.

The import is guarded: without vLLM or a GPU the run stops with one line saying what to do.
Each sample is its own request with its own seed (vLLM's per-request generator), matching the
``hf`` backend's per-sample reproducibility.
"""

from __future__ import annotations

from typing import Any

from harness.backends.base import Generation, GenerationRequest, SamplingParams
from harness.backends.hf import encode_prompt
from harness.errors import UserError


def require_vllm() -> Any:
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    try:
        import vllm
    except ImportError as exc:
        raise UserError(
            "the vllm backend needs vLLM on a CUDA GPU machine (pip install 'rlvr[vllm]'); on CPU use --backend hf"
        ) from exc
    if not gpu:
        raise UserError("the vllm backend needs a CUDA GPU and none is visible; use --backend hf on this machine")
    return vllm


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
    ):
        vllm = require_vllm()
        self._vllm = vllm
        kwargs: dict[str, Any] = {
            "model": model_path,
            "dtype": {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(dtype, dtype),
            "seed": seed,
            "gpu_memory_utilization": gpu_memory_utilization,
            "tensor_parallel_size": tensor_parallel_size,
            "enforce_eager": enforce_eager,
        }
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.dtype = str(self.llm.llm_engine.model_config.dtype).replace("torch.", "")

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Generation]:
        encoded = [encode_prompt(self.tokenizer, r.prompt) for r in requests]
        sampling = [
            self._vllm.SamplingParams(
                n=1,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=params.max_tokens,
                seed=r.seed,
                stop=list(params.stop) or None,
                include_stop_str_in_output=params.include_stop,
            )
            for r in requests
        ]
        # Token ids, not text: vLLM then sees exactly what the hf backend feeds the model.
        outputs = self.llm.generate([{"prompt_token_ids": ids} for _, ids in encoded], sampling, use_tqdm=False)
        results = []
        for (text, _), output in zip(encoded, outputs):
            sample = output.outputs[0]
            finish = "length" if sample.finish_reason == "length" else "stop"
            results.append(
                Generation(
                    text,
                    sample.text,
                    finish,
                    len(sample.token_ids),
                    len(output.prompt_token_ids or []),
                    list(sample.token_ids),
                )
            )
        return results

    def close(self) -> None:
        self.llm = None
