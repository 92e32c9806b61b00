"""The settings an evaluation, a policy-gradient run and a population share, each declared once.

``EvalConfig``, ``TrainConfig`` and ``ESConfig`` are composed from these blocks (dataclass
bases), so a shared setting has one name, one type, one help line, one role and one default
wherever it appears, and one check (``block_checks``). What differs between commands is a fact of
the run, never a second default: the policy-gradient algorithms *define* their rollout
temperature (1.0 in every algorithm module's ``DEFINING``: the loss evaluates softmax(logits / T)),
and ``gpu_memory_utilization: auto`` resolves by whether a learner shares the GPU
(``gpu_memory_share``). The backends each command can run sit on its class (``BACKENDS``).

Two names mean different things in two commands and stay declared apart (the test
``tests/test_setting_blocks.py`` holds the list): ``workers`` (rlvr eval: grading processes per
verifier; populations: model copies scoring members) and ``batch_size`` (rlvr eval: sequences per
forward batch, not scored; populations: prompts per batch of greedy scoring, a result setting).

Field order in a composed config: the bases are listed last block first, so ``config.yaml`` starts
with the model, then generation, then the command's own settings.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from rlvr.harness.run_config import Role, setting

P, R, N = Role.PROTOCOL, Role.RESULT, Role.NOT_SCORED
EMBEDDED_MODEL = "the embedded SmolLM2-135M-Instruct"
MODEL, GENERATION, ENGINE, RUN = "model", "generation", "vllm engine", "run"

#: what ``gpu_memory_utilization: auto`` means: an engine alone on its GPU (rlvr eval) takes most of it;
#: one beside a learner (training) leaves the weights, gradients and optimiser state their room
GPU_SHARE_ALONE, GPU_SHARE_BESIDE_LEARNER = 0.85, 0.35


@dataclass
class ModelSettings:
    model: str | None = setting(
        None,
        help="HF checkpoint directory or hub id (the policy a trainer starts from; with rlvr eval --backend openai "
        "the model id the server serves)",
        role=R,
        group=MODEL,
        shown_default=EMBEDDED_MODEL,
    )
    template: str = setting(
        "qwen_math",
        help="prompt template: qwen_math, r1, no_template (Dr. GRPO's exact strings), fewshot, chat (the model's "
        "chat template), or a .txt/.yaml/.json template file; a trainer's rollouts and evaluations share it",
        role=P,
        group=MODEL,
    )
    dtype: str = setting(
        "auto",
        help="weights' dtype: float32, bfloat16, float16 or auto (float32 on a CPU; on a GPU bfloat16 to evaluate "
        "or score a population, float32 master weights to train, where bfloat16 masters under AdamW are refused: "
        "an lr-sized update rounds away; see compute_dtype)",
        role=P,
        group=MODEL,
    )
    device: str = setting("auto", help="auto (CUDA if visible), cpu, cuda, cuda:1", role=R, group=MODEL)


@dataclass
class GenerationSettings:
    #: the backends a command can run, listed in its ``--help`` and checked by ``block_checks``
    BACKENDS: ClassVar[tuple[str, ...]] = ("hf", "vllm")

    backend: str = setting(
        "hf",
        help="generation engine: hf (transformers; in training, the policy itself), vllm (an in-process engine, CPU "
        "build included; in training it gets the learner's weights after every update), openai (an "
        "OpenAI-compatible server; rlvr eval), ray (hf engines on Ray actors; RandOpt and CoRP)",
        role=P,
        group=GENERATION,
    )
    max_tokens: int = setting(
        1024,
        help="new tokens per completion at most (cut to what the model's context leaves)",
        role=P,
        group=GENERATION,
    )


@dataclass
class SamplingSettings:
    temperature: float = setting(
        0.0,
        help="sampling temperature, 0 = greedy; the policy-gradient algorithms define 1.0 (their loss evaluates "
        "softmax(logits / temperature), the distribution the rollouts came from)",
        role=P,
        group=GENERATION,
    )
    top_p: float = setting(
        1.0,
        help="nucleus sampling: the smallest set of tokens with this probability mass, in (0, 1]",
        role=P,
        group=GENERATION,
    )


@dataclass
class EngineSettings:
    max_model_len: int | None = setting(
        None,
        help="context length cap in tokens, prompt + completion",
        role=P,
        group=ENGINE,
        shown_default="the model's own",
    )
    gpu_memory_utilization: float | None = setting(
        None,
        help="vllm on a GPU: share of its memory the engine takes, in (0, 1]",
        role=N,
        group=ENGINE,
        shown_default=f"auto: {GPU_SHARE_ALONE} alone (rlvr eval), {GPU_SHARE_BESIDE_LEARNER} beside a learner",
    )
    kv_cache_gb: float = setting(
        1.0,
        help="vllm on a CPU: GiB of RAM for the KV cache (vLLM's own sizing from RAM fails there)",
        role=N,
        group=ENGINE,
    )


@dataclass
class RunSettings:
    seed: int = setting(
        0,
        help="run seed (rlvr eval: sample j of problem p draws from sha256(seed, p, j); training: prompt order, "
        "sampling seeds, initialisation; RandOpt and CoRP record it and draw from population_seed, split_seed and "
        "local_seed_base)",
        role=P,
        group=RUN,
    )
    out: str | None = setting(
        None,
        help="run directory: config.yaml and everything the run writes; the same command again continues it",
        role=N,
        group=RUN,
        shown_default="results/<a name made from the settings>",
    )


def gpu_memory_share(value: float | None, beside_learner: bool) -> float:
    """``gpu_memory_utilization`` as the engine gets it: the setting, or auto's share."""
    if value is not None:
        return value
    return GPU_SHARE_BESIDE_LEARNER if beside_learner else GPU_SHARE_ALONE


def block_checks(cfg: Any) -> list[tuple[bool, str]]:
    """The checks of every block ``cfg`` is composed of, as ``(ok, one-line message)`` pairs for
    ``rlvr.harness.run_config.require``; a command adds its own after them."""
    out: list[tuple[bool, str]] = []
    if isinstance(cfg, GenerationSettings):
        out += [
            (cfg.backend in cfg.BACKENDS, f"--backend must be one of {', '.join(cfg.BACKENDS)} (got {cfg.backend!r})"),
            (cfg.max_tokens >= 1, "--max-tokens must be at least 1"),
        ]
    if isinstance(cfg, SamplingSettings):
        out += [
            (cfg.temperature >= 0, "--temperature must be >= 0 (0 = greedy)"),
            (0 < cfg.top_p <= 1, "--top-p must be in (0, 1]"),
        ]
    if isinstance(cfg, EngineSettings):
        share = cfg.gpu_memory_utilization
        out += [
            (cfg.max_model_len is None or cfg.max_model_len >= 1, "--max-model-len must be at least 1"),
            (
                share is None or 0 < share <= 1,
                f"--gpu-memory-utilization is the share of GPU memory vLLM may use: a number in (0, 1], e.g. 0.85 "
                f"(got {share})",
            ),
            (
                cfg.kv_cache_gb > 0,
                f"--kv-cache-gb must be a positive number of GiB, e.g. 1 (got {cfg.kv_cache_gb:g})",
            ),
        ]
    return out


def block_fields(block: type) -> list[str]:
    """The settings a block declares, in order."""
    return [f.name for f in fields(block)]


BLOCKS = (ModelSettings, GenerationSettings, SamplingSettings, EngineSettings, RunSettings)
