"""The peak memory of one learner update per rank, predicted from the architecture and the
settings (``--plan`` prints it; ``benchmarks/bench_train_memory.py`` checks it against a
measurement).

The update's peak is the larger of two moments:

* **the start of the backward of the largest pass**: weights (float32 masters, a 1/N shard
  under FSDP), the activations autograd saved, the logits chunk being differentiated and the
  gradient of the output projection just produced;
* **the AdamW step**: weights, the whole gradient, the two AdamW moments (allocated at the
  first step) and the step's temporaries.

Plus, throughout: the frozen reference in the compute dtype; under FSDP the gathered (unsharded)
weights of the root module and of the blocks in flight; on one GPU with vLLM the engine's share
(slept, only the weights it keeps... none at level 1; awake: ``gpu_memory_utilization``).

Activations per token of a Llama-style block (``Dims``; float32 compute, what the benchmark
runs; under autocast the matmul outputs halve): the two RMSNorms keep their input and output
(4·H), attention keeps q after rotary (H), k and v (2·kv, or 2·H when a padding mask makes
transformers repeat them for the kernel), its output and the projection's contiguous input
(2·H), the MLP keeps gate, up, SiLU(gate) and their product (4·I). With gradient checkpointing a
block keeps only its input (H) and one block's activations exist again during its backward.
The vocabulary projection: unchunked, the float32 logits of every kept position and three more
tensors of that size at the start of its backward (the gradient, the softmax's exponent, the
gather's scatter); chunked through a linear head (the fused tile of
``rlvr.trainers.policy_gradient.chunked_logprobs``), one float32 tensor of ``logits_chunk`` tokens
(the recomputed logits, turned into their gradient in place) and the head weight's gradient for
that chunk before it is added to the accumulated one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: logits-sized float32 tensors alive at the start of the head's backward, unchunked: the four
#: counted in the docstring, 4.4 as measured (``benchmarks/bench_train_memory.py``: the kernels'
#: temporaries); chunked, the fused tile's one
LOGIT_COPIES = 4.4
#: H-sized tensors a block keeps beyond those counted in the docstring (measured: ~10% more)
UNCOUNTED_PER_BLOCK = 2


@dataclass
class Dims:
    params: int
    hidden: int
    layers: int
    vocab: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @property
    def embedding(self) -> int:
        return self.vocab * self.hidden

    @property
    def per_layer(self) -> int:
        return (self.params - self.embedding * (1 if self.tied else 2) - self.hidden) // self.layers


def params_from_config(c: dict[str, Any]) -> int:
    """Parameters of a Llama / Qwen2 / Mistral-style decoder from its ``config.json``."""
    c = c.get("text_config", c)
    hidden, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
    inter = int(c["intermediate_size"])
    heads = int(c["num_attention_heads"])
    kv = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
    if c.get("attention_bias") or c.get("model_type") in ("qwen2",):
        attention += heads * head_dim + 2 * kv * head_dim
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings", False) else 2)
    return layers * per_layer + embeddings + hidden


def dims_from_config(c: dict[str, Any]) -> Dims:
    c = c.get("text_config", c)
    heads = int(c["num_attention_heads"])
    hidden = int(c["hidden_size"])
    return Dims(
        params=params_from_config(c),
        hidden=hidden,
        layers=int(c["num_hidden_layers"]),
        vocab=int(c["vocab_size"]),
        intermediate=int(c["intermediate_size"]),
        heads=heads,
        kv_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=int(c.get("head_dim") or hidden // heads),
        tied=bool(c.get("tie_word_embeddings", False)),
    )


def passes(cfg: Any, rows: list[int]) -> list[list[int]]:
    """The row lengths of each pass of one minibatch (``rlvr.trainers.policy_gradient.micro_batches.plan_rows``)."""
    from rlvr.trainers.policy_gradient.micro_batches import plan_rows

    plan = plan_rows(rows, range(len(rows)), cfg.micro_batch_size, getattr(cfg, "micro_token_budget", None))
    return [[rows[r] for r in p] for p in plan if p]


def activation_bytes_per_token(d: Dims, act: int, padded: bool) -> int:
    """Bytes autograd keeps per token of one block (see the module docstring)."""
    kv = d.heads * d.head_dim if padded else d.kv_heads * d.head_dim
    q = d.heads * d.head_dim
    return act * ((4 + UNCOUNTED_PER_BLOCK) * d.hidden + q + 2 * kv + q + d.hidden + 4 * d.intermediate)


def update_peak(
    d: Dims,
    cfg: Any,
    rows: list[int],
    *,
    device: str = "cuda",
    world: int = 1,
    parallel: str | None = None,
    prompt: int | None = None,
) -> dict[str, Any]:
    """Predicted peak bytes per rank of one update over responses whose full lengths (prompt +
    completion) are ``rows`` (this rank's share), with every component."""
    from rlvr.trainers.runtime.precision import BYTES, compute_dtype_name, master_dtype_name

    master = BYTES[master_dtype_name(cfg)]
    compute = BYTES[compute_dtype_name(cfg)]
    fsdp = parallel == "fsdp" and world > 1
    shard = world if fsdp else 1
    P = d.params
    weights = master * P / shard
    moments = 2 * master * P / shard
    grads_sharded = master * P / shard
    no_sync = fsdp and getattr(cfg, "fsdp_grad_sync", "every_micro_batch") == "last_micro_batch"
    grads_full = master * P if (not fsdp or no_sync) else grads_sharded
    largest = d.embedding
    # AdamW: foreach on a GPU (a temporary the size of all moments' square roots), per tensor on a CPU
    step_temp = master * P / shard if device == "cuda" else 2 * master * largest / shard
    reference = compute * P / shard if getattr(cfg, "beta", 0) else 0
    gathered = 0.0
    if fsdp:  # the root's weights stay gathered through forward and backward; two blocks in flight
        gathered = compute * (d.embedding * (1 if d.tied else 2)) + 3 * compute * d.per_layer
    plan = passes(cfg, rows)
    chunk = getattr(cfg, "logits_chunk", 0)
    checkpointing = getattr(cfg, "gradient_checkpointing", False)
    backward, top = 0.0, {"activations": 0.0, "logits": 0.0}
    for i, lengths in enumerate(plan):
        width = max(lengths)
        tokens = len(lengths) * width
        per_layer = activation_bytes_per_token(d, compute, padded=len(set(lengths)) > 1)
        if checkpointing:  # each block's input: the residual stream (float32 masters; FSDP casts it down)
            acts = tokens * (d.layers * d.hidden * (compute if fsdp else master) + per_layer)
        else:
            acts = tokens * d.layers * per_layer
        acts += tokens * 3 * d.hidden * master  # embeddings out, the final norm's input and output
        kept = len(lengths) * (width - (prompt or 0))
        if chunk:  # the fused tile: one chunk of logits and the chunk's head-weight gradient
            logits = 4 * min(chunk, kept) * d.vocab + master * d.embedding
        else:
            logits = LOGIT_COPIES * 4 * kept * d.vocab
        # the first pass holds the head's fresh gradient; a later one every gradient so far
        held = master * d.embedding if i == 0 else grads_full
        if weights + acts + logits + held > backward:
            backward, top = weights + acts + logits + held, {"activations": acts, "logits": logits}
    if fsdp and not no_sync:
        backward += master * d.per_layer  # a block's unsharded gradient before its reduce-scatter
    # the backward's end: every gradient, and (tied) the embedding's dense gradient before it is added
    end_of_backward = weights + grads_full + (grads_sharded if no_sync else 0) + master * d.embedding * d.tied
    step = weights + (grads_sharded if fsdp else grads_full) + moments + step_temp
    common = reference + gathered
    total = common + max(backward, step, end_of_backward)
    best = top
    return {
        "weights_bytes": weights,
        "gradient_bytes": grads_full,
        "adamw_bytes": moments,
        "adamw_step_temporaries_bytes": step_temp,
        "activation_bytes": best["activations"],
        "logits_bytes": best["logits"],
        "reference_bytes": reference,
        "fsdp_gathered_bytes": gathered,
        "moment": max(
            ("backward", backward), ("end of backward", end_of_backward), ("adamw step", step), key=lambda x: x[1]
        )[0],
        "total_bytes": total,
    }


# --- the plan ----------------------------------------------------------------------------------

#: the paper presets' models, from their config.json on the Hugging Face hub (the plan loads nothing)
KNOWN_CONFIGS = {
    "Qwen/Qwen2.5-Math-7B": (3584, 28, 28, 4, 18944, 152064, False),
    "Qwen/Qwen2.5-Math-1.5B": (1536, 28, 12, 2, 8960, 151936, True),
    "Qwen/Qwen2.5-32B": (5120, 64, 40, 8, 27648, 152064, False),
    "deepseek-ai/deepseek-math-7b-instruct": (4096, 30, 32, 32, 11008, 102400, False),
}
#: prompt tokens assumed per row (a math question under a template; the plan cannot see the data)
PLAN_PROMPT_TOKENS = 512
#: what a slept vLLM engine keeps on its GPU (CUDA context, graphs): a rough allowance
SLEEPING_ENGINE_GB = 2.0
GB = 1e9


def model_dims(model: str | None) -> Dims | None:
    """Dims of a local checkpoint (its config.json), the embedded model, or a paper model."""
    import json
    from pathlib import Path

    from rlvr.harness.models import EMBEDDED_NAME, cache_root

    folder = Path(model) if model else cache_root() / "models" / EMBEDDED_NAME
    if (folder / "config.json").is_file():
        try:
            return dims_from_config(json.loads((folder / "config.json").read_text(encoding="utf-8")))
        except (KeyError, TypeError, ValueError):
            return None
    known = KNOWN_CONFIGS.get(model or "")
    if known is None:
        return None
    hidden, layers, heads, kv, inter, vocab, tied = known
    config = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "model_type": "qwen2" if model.startswith("Qwen/") else "llama",
    }
    return dims_from_config(config)


def plan_memory(cfg: Any, gpu_gb: float, max_gpus: int = 64) -> dict[str, Any] | None:
    """The learner's predicted peak per GPU for the run's largest pass (every row at
    ``max_tokens`` after a ``PLAN_PROMPT_TOKENS`` prompt), alone and under FSDP; the fewest GPUs
    whose peak fits beside vLLM (slept: a small allowance; awake: its whole share)."""
    from rlvr.harness.backends.registry import separate_engine
    from rlvr.harness.setting_blocks import gpu_memory_share

    d = model_dims(cfg.model)
    if d is None:
        return None
    # two passes (when a minibatch holds them): the second one shows what accumulation holds
    rows = [PLAN_PROMPT_TOKENS + cfg.max_tokens] * min(2 * cfg.micro_batch_size, cfg.minibatch_size or 1 << 30)
    engine = separate_engine(cfg.backend)
    slept = engine and getattr(cfg, "vllm_sleep", False)
    vllm_gb = (
        (SLEEPING_ENGINE_GB if slept else gpu_gb * gpu_memory_share(cfg.gpu_memory_utilization, True))
        if engine
        else 0.0
    )
    one = update_peak(d, cfg, rows, prompt=PLAN_PROMPT_TOKENS)
    out: dict[str, Any] = {
        "prompt_tokens_assumed": PLAN_PROMPT_TOKENS,
        "vllm_gb_while_learning": round(vllm_gb, 1),
        "one_gpu": {k: v if isinstance(v, str) else round(v / GB, 1) for k, v in one.items()},
        "fsdp_min_gpus": None,
    }
    for n in range(2, max_gpus + 1):
        peak = update_peak(d, cfg, rows, world=n, parallel="fsdp", prompt=PLAN_PROMPT_TOKENS)
        if peak["total_bytes"] / GB + vllm_gb <= gpu_gb:
            nosync = update_peak(d, _with(cfg, fsdp_grad_sync="last_micro_batch"), rows, world=n, parallel="fsdp",
                                 prompt=PLAN_PROMPT_TOKENS)  # fmt: skip
            out.update(
                fsdp_min_gpus=n,
                fsdp_peak_gb=round(peak["total_bytes"] / GB, 1),
                fsdp_moment=peak["moment"],
                fsdp_activation_gb=round(peak["activation_bytes"] / GB, 1),
                fsdp_logits_gb=round(peak["logits_bytes"] / GB, 1),
                no_sync_extra_gb=round((nosync["total_bytes"] - peak["total_bytes"]) / GB, 1),
                no_sync_full_gradients_gb=round(nosync["gradient_bytes"] / GB, 1),
            )
            break
    return out


def _with(cfg: Any, **changes: Any) -> Any:
    import copy

    other = copy.copy(cfg)
    for key, value in changes.items():
        setattr(other, key, value)
    return other


def memory_lines(info: dict[str, Any] | None, gpu_gb: float) -> list[tuple[str, str]]:
    """``--plan``'s lines for ``plan_memory``."""
    if info is None:
        return [("  peak", "no architecture known for this model (give a local directory with config.json)")]
    one = info["one_gpu"]
    lines = [
        (
            "  peak",
            f"PREDICTED per GPU for the largest pass (prompt {info['prompt_tokens_assumed']} tokens assumed; "
            f"trainers/policy_gradient/memory.py): one GPU {one['total_bytes']:,} GB at the {one['moment']} (weights "
            f"{one['weights_bytes']}, gradients {one['gradient_bytes']}, AdamW {one['adamw_bytes']}, activations "
            f"{one['activation_bytes']}, logits {one['logits_bytes']}, reference {one['reference_bytes']} GB)",
        )
    ]
    if info["fsdp_min_gpus"] is None:
        lines.append(("  fsdp peak", f"does not fit {gpu_gb:g} GB GPUs beside vLLM at any count tried"))
    else:
        lines.append(
            (
                "  fsdp peak",
                f"{info['fsdp_peak_gb']} GB per GPU on {info['fsdp_min_gpus']} GPUs (the fewest that fit beside "
                f"vLLM's {info['vllm_gb_while_learning']} GB while learning; at the {info['fsdp_moment']}: "
                f"activations {info['fsdp_activation_gb']}, logits {info['fsdp_logits_gb']} GB); "
                f"fsdp_grad_sync last_micro_batch would hold {info['no_sync_full_gradients_gb']} GB of full float32 "
                f"gradients per GPU through each minibatch's accumulation (peak +{info['no_sync_extra_gb']} GB)",
            )
        )
    return lines
