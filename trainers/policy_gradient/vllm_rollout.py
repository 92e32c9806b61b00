"""Rollouts from a vLLM engine colocated with the learner (``backend: vllm``, CPU or GPU).

The engine starts from the run's base checkpoint, in this process, and receives the learner's
weights after every policy update (``sync``) through vLLM's in-place reload
(``rlvr.harness.backends.vllm_engine.push_weights``: Hugging Face names mapped onto fused layers,
post-load processing re-run, prefix cache dropped and the drop checked). Starting it leaves the
learner's RNGs and thread count untouched. Its context is the model's own (``max_model_len`` of
the checkpoint, or ``cfg.max_model_len``); each request may take ``max_tokens`` new tokens cut
to what the context leaves, the rule the hf sampler and the eval backends follow, and a run
whose budget alone exceeds the context is refused before anything starts. Each sample has its
own seed, as in the hf path. ``sample(..., logprobs=True)`` also returns vLLM's log-prob of every
sampled token (``SamplingParams(logprobs=0)``: the chosen token's only). The engine starts with
``logprobs_mode="processed_logprobs"``: the log-softmax of the distribution the token was drawn
from (logits / temperature, then top-k / top-p), not vLLM's default ``raw_logprobs`` (before
temperature), so at temperature T they are what the learner's ``completion_logprobs(...,
temperature=T)`` computes. With ``top_p < 1`` they are renormalised over the nucleus, which the
learner (as oat's and verl's) does not do: the logged gap and the TIS weights then include the
nucleus truncation, the true sampler/learner ratio of the drawn tokens. A test proves with them that generation
runs on the synced weights, and the trainer asks for them every step (``RolloutWorker(...,
logprobs=True)``) to log the sampler-learner gap and weight tokens for ``tis_cap``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from rlvr.harness.backends.base import sample_seed
from rlvr.harness.backends.vllm_cpu_sleep import release_kv_cache, release_weights, restore_kv_cache, restore_weights
from rlvr.harness.backends.vllm_engine import VLLMBackend, engine_max_len, push_weights, start_engine, token_budget
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError
from rlvr.harness.setting_blocks import gpu_memory_share
from rlvr.trainers.policy_gradient.live_progress import report_rollout
from rlvr.trainers.policy_gradient.rollout import PromptCache
from rlvr.trainers.runtime.precision import compute_dtype_name


def context_positions(model: torch.nn.Module) -> int | None:
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


class VLLMRollout:
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        template: Any,
        instruction_of: dict[str, str],
        cfg: Any,
    ):
        from rlvr.harness.models import resolve_model

        self.tokenizer, self.template, self.instruction_of, self.cfg = tokenizer, template, instruction_of, cfg
        max_len = getattr(cfg, "max_model_len", None) or context_positions(model)
        if max_len is not None and cfg.max_tokens >= max_len:
            raise UserError(
                f"max_tokens {cfg.max_tokens} leaves no room for a prompt in the model's context of {max_len} "
                "positions; lower max_tokens or set max_model_len (a model with a longer context)"
            )
        device = str(next(model.parameters()).device).split(":")[0]
        # sleep frees the engine's GPU memory while the learner trains (vLLM's CUDA memory pool);
        # a CPU engine has no sleep mode, so there its KV cache and weights are released by hand
        self.sleeps = getattr(cfg, "vllm_sleep", False)
        self.can_sleep, self.asleep = device == "cuda" and self.sleeps, False
        self.llm = start_engine(
            resolve_model(cfg.model)[0],
            dtype=compute_dtype_name(cfg),  # the learner's compute dtype (sync casts the float32 masters)
            seed=cfg.seed,
            device=device,
            max_model_len=max_len,
            gpu_memory_utilization=gpu_memory_share(cfg.gpu_memory_utilization, beside_learner=True),
            kv_cache_gb=getattr(cfg, "kv_cache_gb", None),
            enforce_eager=False,  # CUDA graphs on a GPU (a CPU engine runs eager whatever this says)
            logprobs_mode="processed_logprobs",  # at the sampling temperature (module docstring)
            enable_sleep_mode=self.can_sleep,
        )
        from vllm import SamplingParams

        self.params_class = SamplingParams
        self.device, self.max_len = device, engine_max_len(self.llm)
        self.prompt = PromptCache(tokenizer, template, instruction_of, cfg.prompt_max_length)
        self.sync(model)  # a resumed run's weights, not the base checkpoint's

    def sample(
        self, problems: Sequence[Problem], group_size: int, step: int, logprobs: bool = False
    ) -> list[tuple[Any, ...]]:
        """Per problem: (prompt ids, completion ids per sample, texts, truncated flags[, log-probs])."""
        self.wake()
        params = [
            self.params_class(
                n=1,
                temperature=self.cfg.temperature,
                top_p=self.cfg.top_p,
                max_tokens=token_budget(self.cfg.max_tokens, len(self.prompt(p)), self.max_len),
                seed=sample_seed(self.cfg.seed, f"step{step}:{p.id}", j),
                stop=list(self.template.stop) or None,
                include_stop_str_in_output=self.template.include_stop,
                logprobs=0 if logprobs else None,
            )
            for p in problems
            for j in range(group_size)
        ]
        requests = [{"prompt_token_ids": self.prompt(p)} for p in problems for _ in range(group_size)]
        report_rollout(0, len(requests), 0)
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        report_rollout(len(requests), len(requests), sum(len(o.outputs[0].token_ids) for o in outputs))
        out = []
        for index, problem in enumerate(problems):
            mine = [o.outputs[0] for o in outputs[index * group_size : (index + 1) * group_size]]
            row: tuple[Any, ...] = (
                self.prompt(problem),
                [list(s.token_ids) for s in mine],
                [s.text for s in mine],
                [s.finish_reason == "length" for s in mine],
            )
            if logprobs:
                row += ([[lp[t].logprob for lp, t in zip(s.logprobs, s.token_ids)] for s in mine],)
            out.append(row)
        return out

    def sleep(self) -> None:
        """Between rollout and learning (``vllm_sleep``). On a GPU level 1 moves the weights to
        host memory and drops the KV cache, so the learner gets the engine's share of the GPU;
        on a CPU the KV cache's and the weights' memory go back to the system (``kv_cache_gb``
        and a copy of the model less at the update's peak): the sync after the update pushes
        every weight anyway. Nothing in the KV cache outlives a step: every sync drops the
        prefix cache."""
        if self.asleep or not self.sleeps:
            return
        if self.can_sleep:
            self.llm.sleep(level=1)
        else:
            release_kv_cache(self.llm)
            release_weights(self.llm)
        self.asleep = True

    def wake(self) -> None:
        if self.asleep and not self.can_sleep:
            raise RuntimeError("the engine's weights were released while the learner trained: sync() brings them back")
        self._wake()

    def _wake(self) -> None:
        if not self.asleep:
            return
        if self.can_sleep:
            self.llm.wake_up()
        else:
            restore_kv_cache(self.llm)
            restore_weights(self.llm)
        self.asleep = False

    @torch.no_grad()
    def sync(self, model: torch.nn.Module) -> None:
        from rlvr.trainers.runtime.distributed import full_named_parameters

        self._wake()
        dtype = getattr(torch, compute_dtype_name(self.cfg))  # float32 masters cast here, tensor by tensor
        push_weights(self.llm, ((name, p.to(dtype)) for name, p in full_named_parameters(model)))  # FSDP gathered

    def eval_backend(self) -> VLLMBackend:
        """The same engine as an evaluation backend (``rlvr eval`` on the synced weights, no second engine)."""
        self.wake()
        return VLLMBackend.around(self.llm, self.device)
