"""Rollouts from a vLLM engine colocated with the learner on one GPU (``backend: vllm``).

The engine starts from the run's base checkpoint and receives the learner's weights after every
policy update (``sync``), in process, through ``LLM.apply_model`` → the model's own
``load_weights`` (which maps Hugging Face names onto vLLM's fused layers), then drops its prefix
cache so no KV entry computed with the old weights survives. ``prompt_logprobs`` lets a check
confirm that generation uses the new weights: vLLM's log-probs of given tokens must match the
learner's (``benchmarks/gpu_check_train.py``). Each sample has its own seed, as in the hf path.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import torch

from harness.backends.base import sample_seed
from harness.backends.vllm_engine import require_vllm
from harness.benchmarks.problems import Problem
from trainers.rollout import PromptCache


class VLLMRollout:
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        template: Any,
        instruction_of: dict[str, str],
        cfg: Any,
        gpu_memory_utilization: float = 0.35,
    ):
        from harness.models import resolve_model

        os.environ.setdefault(
            "VLLM_ENABLE_V1_MULTIPROCESSING", "0"
        )  # engine in this process: weights pass by reference
        self.vllm = require_vllm()
        self.tokenizer, self.template, self.instruction_of, self.cfg = tokenizer, template, instruction_of, cfg
        dtype = str(next(model.parameters()).dtype).replace("torch.", "")
        self.llm = self.vllm.LLM(
            model=resolve_model(cfg.model)[0],
            dtype=dtype,
            seed=cfg.seed,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=True,
            max_model_len=4096,
        )
        self.prompt = PromptCache(tokenizer, template, instruction_of)
        self.sync(model)  # a resumed run's weights, not the base checkpoint's

    def sample(
        self, problems: Sequence[Problem], group_size: int, step: int
    ) -> list[tuple[list[int], list[list[int]], list[str], list[bool]]]:
        params = [
            self.vllm.SamplingParams(
                n=1,
                temperature=self.cfg.temperature,
                top_p=self.cfg.top_p,
                max_tokens=self.cfg.max_tokens,
                seed=sample_seed(self.cfg.seed, f"step{step}:{p.id}", j),
                stop=list(self.template.stop) or None,
                include_stop_str_in_output=self.template.include_stop,
            )
            for p in problems
            for j in range(group_size)
        ]
        requests = [{"prompt_token_ids": self.prompt(p)} for p in problems for _ in range(group_size)]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        out = []
        for index, problem in enumerate(problems):
            mine = [o.outputs[0] for o in outputs[index * group_size : (index + 1) * group_size]]
            out.append(
                (
                    self.prompt(problem),
                    [list(s.token_ids) for s in mine],
                    [s.text for s in mine],
                    [s.finish_reason == "length" for s in mine],
                )
            )
        return out

    @torch.no_grad()
    def sync(self, model: torch.nn.Module) -> None:
        weights = [(name, p.detach()) for name, p in model.state_dict().items()]
        self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights))
        self.llm.reset_prefix_cache()

    def token_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """vLLM's log-probs of ``completion_ids`` after ``prompt_ids`` (for the sync check)."""
        params = self.vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        output = self.llm.generate([{"prompt_token_ids": prompt_ids + completion_ids}], params, use_tqdm=False)[0]
        rows = output.prompt_logprobs[len(prompt_ids) :]
        return [row[token].logprob for row, token in zip(rows, completion_ids)]
