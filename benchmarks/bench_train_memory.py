"""Peak memory of one learner update, measured against ``rlvr.trainers.policy_gradient.memory``'s prediction.

One update = what ``train_step`` does after a rollout: the old log-probs (no gradient) and
``policy_update`` (forward, backward, AdamW step) on the embedded model's architecture
(smollm2-135m, float32 weights and compute; randomly initialised: memory depends on shapes
only), one step of two responses of ``tokens`` and ``tokens // 4`` tokens after a 32-token
prompt, ``micro_batch_size: 2``. Features (``rlvr.trainers.policy_gradient.memory_settings``), each on unless named
off: ``chunk`` (logits_chunk 1024), ``ckpt`` (gradient_checkpointing), ``budget``
(micro_token_budget = the long row: each row its own pass). ``--ranks 2``: FSDP2 over two gloo
ranks (``fsdp_grad_sync`` ``every_micro_batch``, or ``last_micro_batch`` with feature
``nosync``).

How memory is measured: every point runs in a fresh process with
``MALLOC_MMAP_THRESHOLD_=65536``, so every tensor buffer over 64 KiB is its own mmap and goes
back to the kernel when freed; the kernel's resident-set high-water mark (``VmHWM``, reset
through ``/proc/self/clear_refs`` just before the update) minus the resident set before the
model was built (interpreter, libraries) is the peak of what the run holds: weights, gradients,
AdamW state, activations and every kernel's temporaries (also those no Python-level tracker
sees). A rank of a two-rank run measures its own process; the line reports the larger.

    flock /tmp/cpu-heavy.lock python benchmarks/bench_train_memory.py            # the README's points
    python benchmarks/bench_train_memory.py --tokens 512 --off ckpt              # one point
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT = 32
CHUNK = 1024
FEATURES = ("chunk", "ckpt", "budget")
#: (tokens, features turned off, ranks): all on over the whole range, each off where it fits in RAM
POINTS = (
    [(t, (), 1) for t in (512, 1024, 2048, 4096, 8192)]
    + [(2048, ("chunk",), 1), (2048, ("ckpt",), 1), (2048, ("budget",), 1), (4096, ("budget",), 1)]
    + [(512, (), 2), (2048, (), 2), (2048, ("nosync",), 2)]
)


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _config():
    from rlvr.harness.models import EMBEDDED_NAME, cache_root
    from transformers import LlamaConfig

    path = cache_root() / "models" / EMBEDDED_NAME / "config.json"
    config = LlamaConfig(**json.loads(path.read_text())) if path.exists() else _smollm2_config()
    config.max_position_embeddings = 16384  # rope is computed per position; room for 8,192 + prompt
    return config


def _smollm2_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        tie_word_embeddings=True,
        rope_parameters={"rope_theta": 100000.0, "rope_type": "default"},
    )


def settings(tokens: int, off: tuple[str, ...]):
    from rlvr.trainers.policy_gradient.config import TrainConfig

    return TrainConfig(
        algorithm="drgrpo",
        temperature=1.0,
        advantage="drgrpo",
        loss_agg="seq_mean_token_sum_norm",
        loss_constant=float(tokens),
        micro_batch_size=2,
        minibatch_size=None,
        logits_chunk=0 if "chunk" in off else CHUNK,
        gradient_checkpointing="ckpt" not in off,
        micro_token_budget=None if "budget" in off else PROMPT + tokens,
        fsdp_grad_sync="last_micro_batch" if "nosync" in off else "every_micro_batch",
    )


def measure(tokens: int, off: tuple[str, ...]) -> dict:
    """One point in this process (a rank of a torchrun launch when WORLD_SIZE is set)."""
    import torch
    from rlvr.trainers.policy_gradient.update import batch_logprobs, pack, policy_update
    from transformers import LlamaForCausalLM
    from transformers.models.llama import modeling_llama  # noqa: F401  (imported before the baseline)

    torch.manual_seed(0)
    ranks = int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(max(1, 2 // ranks))
    baseline = _status("VmRSS")  # interpreter and libraries: not the run's
    cfg = settings(tokens, off)
    model = LlamaForCausalLM(_config()).float().train()
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    shard = None
    if ranks > 1:
        shard, model = _fsdp(model, cfg)
    vocab = model.config.vocab_size
    lengths = [tokens, tokens // 4]
    ids = lambda n: torch.randint(3, vocab, (n,)).tolist()  # noqa: E731
    batch = pack([ids(PROMPT) for _ in lengths], [ids(n) for n in lengths], torch.tensor([1.0, -1.0]),
                 torch.ones(2), 0, "cpu")  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.95), weight_decay=0.0)
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark restarts from the current RSS
    t0 = time.perf_counter()
    batch.old_logp = batch_logprobs(model, batch, 2, cfg.logits_chunk, cfg.micro_token_budget, shard)
    policy_update(model, optimizer, batch, cfg, shard=shard)
    seconds = time.perf_counter() - t0
    return {"measured_mb": (_status("VmHWM") - baseline) / 2**20, "seconds": round(seconds, 1)}


def _fsdp(model, cfg):
    from rlvr.trainers.policy_gradient.distributed_rows import Shard
    from rlvr.trainers.runtime.distributed import Context

    cfg.parallel = "fsdp"
    ctx = Context.start(cfg)
    model = ctx.wrap(model)
    return Shard(ctx, [0, 1], [slice(0, 2)], [2]), model


def predict(tokens: int, off: tuple[str, ...], ranks: int) -> float:
    from rlvr.trainers.policy_gradient.memory import dims_from_config, update_peak

    cfg = settings(tokens, off)
    rows = [PROMPT + tokens, PROMPT + tokens // 4]
    parallel = "fsdp" if ranks > 1 else None
    dims = dims_from_config(_config().to_dict())
    return (
        update_peak(dims, cfg, rows, device="cpu", world=ranks, parallel=parallel, prompt=PROMPT)["total_bytes"] / 2**20
    )


def run_point(tokens: int, off: tuple[str, ...], ranks: int) -> dict:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(2 // ranks)}
    me = [str(Path(__file__).resolve()), "--child", "--tokens", str(tokens), "--off", ",".join(off)]
    if ranks > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks), *me]
        env["RLVR_BENCH_RANKS"] = str(ranks)
    else:
        command = [sys.executable, *me]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or not lines:
        raise RuntimeError(f"point {tokens} {off} {ranks}: {result.stderr[-2000:]}")
    measured = max(line["measured_mb"] for line in lines)
    predicted = predict(tokens, off, ranks)
    features = [f for f in FEATURES if f not in off] + (["grad_sync_every_micro_batch"] if ranks > 1 and "nosync"
                                                        not in off else [])  # fmt: skip
    return {
        "tokens": tokens,
        "features": features,
        "ranks": ranks,
        "measured_mb": round(measured, 1),
        "predicted_mb": round(predicted, 1),
        "error": round(predicted / measured - 1, 3),
        "seconds": max(line["seconds"] for line in lines),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, help="one point: the long response's tokens")
    parser.add_argument("--off", default="", help="features off, comma-separated: chunk, ckpt, budget, nosync")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    off = tuple(f for f in args.off.split(",") if f)
    if args.child:
        print(json.dumps(measure(args.tokens, off)), flush=True)
        return
    points = [(args.tokens, off, args.ranks)] if args.tokens else POINTS
    worst = 0.0
    for tokens, features_off, ranks in points:
        line = run_point(tokens, features_off, ranks)
        worst = max(worst, abs(line["error"]))
        print(json.dumps(line), flush=True)
    print(json.dumps({"points": len(points), "max_abs_error": worst, "within_15_percent": worst <= 0.15}))


if __name__ == "__main__":
    main()
