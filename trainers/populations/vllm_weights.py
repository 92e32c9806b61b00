"""Perturbing a vLLM engine's weights in place, for RandOpt / CoRP populations (GPU or CPU).

The perturbed weights are computed exactly as on the hf path: a host copy of the checkpoint
(transformers, same dtype and device) is perturbed by the same ``Perturber`` (same noise, same
fp32 accumulation, same optional noise cache), and its tensors are pushed into the engine with
vLLM's in-place reload (``rlvr.harness.backends.vllm_engine.push_weights``, which maps Hugging Face
names onto vLLM's fused layers, re-runs its post-load processing and drops the prefix cache).
Restoring pushes the exact base back. So a spec scored here is the very model the hf path and
``save_consolidated`` build; only the generation kernels differ.
Deviation, labelled: the released RandOpt/CoRP workers draw noise over vLLM's own fused tensors.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from rlvr.harness.backends.vllm_engine import engine_max_len, push_weights, require_vllm, start_engine, token_budget
from rlvr.harness.benchmarks.problems import Problem
from rlvr.trainers.policy_gradient.rollout import PromptCache
from rlvr.trainers.populations.perturb import Component, Perturber


class VLLMPerturbedGenerator:
    """Greedy generation from base + spec with one in-process vLLM engine (the hf generator's interface)."""

    def __init__(
        self,
        model_path: str,
        template: str,
        instruction_of: dict[str, str],
        max_tokens: int,
        noise_dtype: str = "bfloat16",
        noise_cache_gb: float = 0.0,
        dtype: str = "auto",
        device: str = "auto",
        kv_cache_gb: float | None = None,
        gpu_memory_utilization: float = 0.6,
    ):
        from rlvr.harness.backends.hf import dtype_name, load_model
        from rlvr.harness.templates import load_template

        self.vllm, self.device = require_vllm(device)
        self.model, self.tokenizer, _ = load_model(model_path, dtype, self.device)
        self.model.requires_grad_(False)
        self.perturber = Perturber(self.model, noise_dtype, noise_cache_gb)
        self.llm = start_engine(
            model_path,
            dtype=dtype_name(self.model),
            seed=42,
            device=self.device,
            kv_cache_gb=kv_cache_gb,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=True,
        )
        self.template = load_template(template)
        self.max_tokens, self.max_len = max_tokens, engine_max_len(self.llm)
        self.prompt = PromptCache(self.tokenizer, self.template, instruction_of)

    def _push(self) -> None:
        push_weights(self.llm, self.perturber.params)

    def apply(self, spec: Sequence[Component]) -> None:
        self.perturber.apply(spec)
        self._push()

    def restore(self) -> None:
        self.perturber.restore()
        self._push()

    def greedy(self, problems: Sequence[Problem], logprobs: bool = False) -> list[Any]:
        """vLLM's completion outputs for the current weights (token ids, text, log-probs if asked)."""
        prompts = [self.prompt(p) for p in problems]
        params = [
            self.vllm.SamplingParams(
                temperature=0.0,
                max_tokens=token_budget(self.max_tokens, len(ids), self.max_len),
                seed=42,
                stop=list(self.template.stop) or None,
                include_stop_str_in_output=self.template.include_stop,
                logprobs=0 if logprobs else None,
            )
            for ids in prompts
        ]
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
        return [o.outputs[0] for o in outputs]

    @torch.no_grad()
    def generate(self, spec: Sequence[Component], problems: Sequence[Problem]) -> list[str]:
        self.apply(spec)
        try:
            return [o.text for o in self.greedy(problems)]
        finally:
            self.restore()
