"""Shared pieces of the vLLM tests: a model vLLM's CPU kernels accept, and teacher-forced log-probs."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

#: Small KV cache for test engines (GiB of RAM on a CPU)
KV_GB = 0.25


def vllm_tiny_model(folder: Path, tie: bool = True) -> str:
    """The tiny random Llama with a head size vLLM's CPU attention supports (64). ``tie`` shares the
    embedding with the LM head, as the embedded model does (the case vLLM's in-place reload gets
    wrong unless the LM head's kernel is rebuilt); untied, it keeps the favoured-digit answers
    that give a trainer varying rewards."""
    from rlvr.harness.models import tiny_random_model

    return str(tiny_random_model(folder, favoured="01234", hidden=128, layers=2, heads=2, tie=tie))


@torch.no_grad()
def learner_logprobs(model: torch.nn.Module, prompt: Sequence[int], completion: Sequence[int]) -> list[float]:
    """log p(completion_t | prompt, completion_<t) under ``model`` (fp32 softmax)."""
    ids = torch.tensor([list(prompt) + list(completion)])
    logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    rows = torch.log_softmax(logits, dim=-1)
    return [rows[i, t].item() for i, t in enumerate(completion)]


def max_gap(a: Sequence[float], b: Sequence[float]) -> float:
    assert len(a) == len(b) and len(a) > 0
    return max(abs(x - y) for x, y in zip(a, b))
