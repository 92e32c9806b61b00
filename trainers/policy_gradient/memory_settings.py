"""The settings that decide how much memory and disk a policy-gradient run takes (``TrainConfig``
inherits them): none changes what the run computes beyond floating-point summation order.

What each one saves is stated on its field; ``rlvr.trainers.policy_gradient.memory`` turns them into the plan's
per-rank peak estimate and ``benchmarks/bench_train_memory.py`` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.harness.run_config import Role, require, setting

MEMORY = "memory and disk"
N, R = Role.NOT_SCORED, Role.RESULT
FSDP_GRAD_SYNC = ("every_micro_batch", "last_micro_batch")
HF_EXPORT = ("eval_and_end", "every_checkpoint")


@dataclass
class MemorySettings:
    logits_chunk: int = setting(
        1024,
        help="tokens per pass of the vocabulary projection: log-probs and entropy are computed chunk by chunk "
        "under checkpointing, never keeping full-vocabulary logits (0 = all at once)",
        role=N,
        group=MEMORY,
    )
    gradient_checkpointing: bool = setting(
        False,
        help="recompute each transformer block's activations in the backward instead of keeping them "
        "(about 30% more compute, activations of one block instead of all)",
        role=N,
        group=MEMORY,
    )
    micro_token_budget: int | None = setting(
        None,
        help="token-budget micro-batching (verl's dynamic batch size): a minibatch's rows, longest first, go into "
        "micro-batches of at most this many padded tokens (rows x their own longest row) instead of "
        "micro_batch_size rows",
        role=R,
        group=MEMORY,
        shown_default="off (micro_batch_size rows)",
    )
    fsdp_grad_sync: str = setting(
        "every_micro_batch",
        help="under FSDP: every_micro_batch reduce-scatters after each micro-batch, so a rank accumulates only its "
        "gradient shard; last_micro_batch skips it until a minibatch's last one, keeping full-size float32 "
        "gradients (4 bytes/parameter more per rank) for fewer collectives",
        role=N,
        group=MEMORY,
    )
    vllm_sleep: bool = setting(
        True,
        help="vllm: the engine sleeps while the learner trains and wakes for the weight sync (GPU: weights to "
        "host memory, KV cache freed; CPU: KV cache and weights freed, the sync pushes every weight anyway)",
        role=N,
        group=MEMORY,
    )
    keep_checkpoints: int = setting(
        2,
        help="checkpoints kept: the last K (older ones deleted once a newer one is written), the AdamW state only "
        "in the newest (what --resume reads); 0 = keep every checkpoint whole",
        role=N,
        group=MEMORY,
    )
    keep_best: str | None = setting(
        None,
        help="also keep the checkpoint with the highest value of this logged metric (e.g. eval_math500)",
        role=N,
        group=MEMORY,
        shown_default="none",
    )
    hf_export: str = setting(
        "eval_and_end",
        help="under torchrun: the Hugging Face export (the full weights, gathered) in every_checkpoint, or only "
        "where an evaluation reads it and at the end (eval_and_end; the sharded dcp/ holds the weights); one "
        "process always writes it (it is its checkpoint's model)",
        role=N,
        group=MEMORY,
    )

    def validate_memory(self) -> None:
        require(
            [
                (self.logits_chunk >= 0, "logits_chunk must be >= 0 (0 = unchunked)"),
                (
                    self.micro_token_budget is None or self.micro_token_budget >= 1,
                    "micro_token_budget must be a positive number of tokens or null",
                ),
                (self.fsdp_grad_sync in FSDP_GRAD_SYNC, f"fsdp_grad_sync must be one of {', '.join(FSDP_GRAD_SYNC)}"),
                (self.hf_export in HF_EXPORT, f"hf_export must be one of {', '.join(HF_EXPORT)}"),
                (self.keep_checkpoints >= 0, "keep_checkpoints must be >= 0 (0 = keep every checkpoint)"),
                (
                    self.keep_best is None or self.keep_best.startswith(("eval_", "probe_", "reward")),
                    "keep_best names a logged metric to maximise, e.g. eval_math500 or probe_reward",
                ),
            ],
            "bad training config: ",
        )
