"""One generation interface for every backend (transformers, vLLM, OpenAI-compatible HTTP).

Each request is one sample with its own seed, so a sample is reproducible on its own: it does
not depend on which other samples shared its batch or on how a resumed run was split up.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Protocol

from rlvr.harness.templates import Prompt


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings shared by all samples of a run (temperature 0 = greedy)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()
    include_stop: bool = True


@dataclass(frozen=True)
class GenerationRequest:
    prompt: Prompt
    seed: int


@dataclass
class Generation:
    """One sample. ``prompt`` is the prompt exactly as sent (text after any chat template, or
    the messages for a chat endpoint); ``finish_reason`` is ``stop`` (EOS or a stop string) or
    ``length`` (the token budget ran out)."""

    prompt: Prompt
    text: str
    finish_reason: str
    n_tokens: int | None
    n_prompt_tokens: int | None = None
    token_ids: list[int] | None = field(default=None, repr=False)


#: ``on_sample(index, generation)``: request ``index`` is finished (called once per request, as it finishes)
OnSample = Callable[[int, "Generation"], None]
#: ``on_tokens(n)``: ``n`` more tokens were generated (a heartbeat for progress; may be estimated)
OnTokens = Callable[[int], None]


class Backend(Protocol):
    name: str

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        on_sample: OnSample | None = None,
        on_tokens: OnTokens | None = None,
    ) -> list[Generation]:
        """One generation per request, in request order. ``on_sample`` hears of each as it
        finishes (so it can be graded and written while others are still generating) and
        ``on_tokens`` of the tokens as they are made; backends without them (a trainer's own
        engine) are still usable: the evaluation then handles whole batches."""

    def close(self) -> None: ...


def sample_seed(run_seed: int, problem_id: str, sample_idx: int) -> int:
    """The seed of one sample: a hash of the run seed, the problem and the sample index."""
    digest = hashlib.sha256(f"{run_seed}\0{problem_id}\0{sample_idx}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
