"""Perturbing a vLLM engine's weights in place, for RandOpt / CoRP populations on a GPU.

The noise is drawn exactly as on the hf path (``trainers.perturb``: per Hugging Face tensor, a
generator seeded with the component's seed, on the tensor's device, in ``noise_dtype``), added
to an exact GPU copy of the checkpoint's tensors, and pushed into the engine with the model's own
``load_weights`` (which maps Hugging Face names onto vLLM's fused layers); restoring pushes the
exact base back. Deviation, labelled: the released RandOpt/CoRP workers draw noise over vLLM's
own fused tensors; drawing it over the checkpoint's tensors instead makes the merged checkpoint
that ``save_consolidated`` writes (with ``device: cuda``) exactly the model that was evaluated.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import torch

from harness.backends.vllm_engine import require_vllm
from harness.benchmarks.problems import Problem
from trainers.perturb import NOISE_DTYPES, Component, merge_components, tensor_noise
from trainers.rollout import PromptCache


def _checksum(model: torch.nn.Module) -> float:
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


class VLLMPerturbedGenerator:
    """Greedy generation from base + spec with one vLLM engine (same interface as the hf one)."""

    def __init__(
        self,
        model_path: str,
        template: str,
        instruction_of: dict[str, str],
        max_tokens: int,
        noise_dtype: str = "bfloat16",
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.8,
    ):
        from harness.templates import load_template

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.vllm = require_vllm()
        self.llm = self.vllm.LLM(
            model=model_path, dtype=dtype, seed=42, gpu_memory_utilization=gpu_memory_utilization, enforce_eager=True
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.template = load_template(template)
        self.instruction_of, self.max_tokens = instruction_of, max_tokens
        self.noise_dtype = NOISE_DTYPES[noise_dtype]
        from transformers import AutoModelForCausalLM

        checkpoint = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        self.base = {name: t.detach().to("cuda") for name, t in checkpoint.named_parameters()}  # as the hf Perturber
        del checkpoint
        self.base_checksum = self.checksum()
        self.prompt = PromptCache(self.tokenizer, self.template, instruction_of)

    def _push(self, tensors: list[tuple[str, torch.Tensor]]) -> None:
        self.llm.apply_model(lambda model: model.load_weights(tensors))
        self.llm.reset_prefix_cache()

    @torch.no_grad()
    def weights(self, spec: Sequence[Component]) -> list[tuple[str, torch.Tensor]]:
        """base + Σ w σ ε(seed) per checkpoint tensor (fp32 accumulation, one cast)."""
        spec = merge_components(spec)
        out = []
        for name, base in self.base.items():
            delta = torch.zeros(base.shape, dtype=torch.float32, device=base.device)
            for c in spec:
                delta.add_(
                    tensor_noise(c.seed, base.shape, base.device, self.noise_dtype).float(), alpha=c.weight * c.sigma
                )
            out.append((name, base + delta.to(base.dtype)))
        return out

    def apply(self, spec: Sequence[Component]) -> None:
        self._push(self.weights(spec))

    def restore(self) -> None:
        self._push(list(self.base.items()))

    def checksum(self) -> float:
        return self.llm.apply_model(_checksum)[0]

    def is_base(self) -> bool:
        return self.checksum() == self.base_checksum

    def generate(self, spec: Sequence[Component], problems: Sequence[Problem]) -> list[str]:
        self.apply(spec)
        try:
            params = self.vllm.SamplingParams(
                temperature=0.0,
                max_tokens=self.max_tokens,
                seed=42,
                stop=list(self.template.stop) or None,
                include_stop_str_in_output=self.template.include_stop,
            )
            outputs: Any = self.llm.generate(
                [{"prompt_token_ids": self.prompt(p)} for p in problems], params, use_tqdm=False
            )
            return [o.outputs[0].text for o in outputs]
        finally:
            self.restore()
