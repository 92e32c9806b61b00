"""Mixed precision for the policy-gradient trainers: float32 master weights, gradients and AdamW
state; forward and backward under ``torch.autocast`` in bfloat16 or float16.

Why not bfloat16 parameters: AdamW moves every weight by about lr per step at first (its update
lr·m̂/(√v̂+ε) is near ±lr), 1e-6 in every paper preset. A bfloat16 number carries 8 significant
bits, so a weight w changes only when the step exceeds half its spacing, between |w|·2⁻⁹ and
|w|·2⁻⁸ (6e-5 at |w| = 0.02): the update rounds away and most weights stay bit-identical, step
after step (``tests/test_mixed_precision.py`` shows it). ``TrainConfig.validate`` therefore
refuses ``dtype: bfloat16`` / ``float16``. The originals train this way too: oat's ``--bf16``
runs DeepSpeed's bf16 mode (float32 master weights in the optimizer), verl loads the actor in
float32 under FSDP ``MixedPrecision(param_dtype=bfloat16)``.

Settings (``TrainConfig``):

* ``dtype``: master weights, their gradients and the AdamW state. ``auto`` = ``float32``.
* ``compute_dtype``: ``bfloat16`` / ``float16`` run every forward of the policy and of the
  reference model under ``torch.autocast`` (matmuls in the low dtype; softmax, norms and
  reductions in float32, per torch's autocast op lists); ``auto`` / ``float32`` run in the
  master dtype, no autocast. ``float16`` has a narrow exponent range and gets a loss scaler
  (``torch.amp.GradScaler``; under FSDP2 torch's ``ShardedGradScaler``, ``loss_scaler``);
  ``bfloat16`` has float32's range and needs none.

What runs under autocast: ``Precision.wrap`` wraps the model's ``forward``, so every call of it
does: sampling with ``backend: hf``, the old log-probs, the reference log-probs and the update's
passes (a DDP wrapper calls the same forward; under FSDP2 a ``MixedPrecisionPolicy`` would take
autocast's place). The old log-probs and the first pass of the update therefore see the same
numerics, and the ratios are exactly 1 there. The log-prob math after the model
(``rlvr.trainers.policy_gradient.losses.completion_logprobs``) upcasts the logits to float32 first: the loss, the
ratios and the KL are computed in float32.

Elsewhere: a ``backend: vllm`` engine runs in the compute dtype (``VLLMRollout.sync`` casts the
float32 masters tensor by tensor as it pushes them); evaluations during training load the
checkpoint in the compute dtype, and their summary records it (``protocol.backend.dtype``).
Checkpoints are written from the float32 master weights (their ``config.json`` says float32): a
resume is exact, at twice the size of a bfloat16 export; ``trainer_state.pt`` keeps the master
and compute dtypes (and the loss scaler's state under float16).
"""

from __future__ import annotations

import functools
from typing import Any

from rlvr.harness.errors import UserError

#: accepted spellings -> canonical name
NAMES = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def master_dtype_name(cfg: Any) -> str:
    """The master weights' dtype: ``float32`` for ``auto`` (on every device)."""
    name = NAMES[cfg.dtype]
    return "float32" if name == "auto" else name


def compute_dtype_name(cfg: Any) -> str:
    """The dtype forward and backward compute in: the master dtype for ``auto``."""
    name = NAMES[cfg.compute_dtype]
    return master_dtype_name(cfg) if name == "auto" else name


def check_precision(dtype: str, compute_dtype: str) -> None:
    """``validate()``'s checks: known names, and no low-precision master weights under AdamW."""
    for key, value in (("dtype", dtype), ("compute_dtype", compute_dtype)):
        if value not in NAMES:
            raise UserError(f"bad training config: {key} must be one of {', '.join(NAMES)}, got {value!r}")
    master = NAMES[dtype]
    if master in ("bfloat16", "float16"):
        raise UserError(
            f"bad training config: dtype: {dtype} would keep the master weights and the AdamW state in {master}, "
            f"where an lr-sized update rounds away (most weights never change); set dtype: float32 and "
            f"compute_dtype: {master}"
        )


def loss_scaler(cfg: Any, device_type: str) -> Any:
    """float16's loss scaler. Under FSDP2 (``parallel: fsdp`` in a torchrun world) torch's
    ``ShardedGradScaler``: each rank holds a shard of the gradients, so an overflow one rank sees
    must skip the step on every rank (it all-reduces ``found_inf``; a plain ``GradScaler`` would
    let the ranks disagree and their shards drift apart). DDP's gradients are all-reduced
    before the check, so every rank already sees the same overflow."""
    import torch

    if (
        getattr(cfg, "parallel", None) == "fsdp"
        and torch.distributed.is_available()
        and torch.distributed.is_initialized()
    ):
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler(device_type)
    return torch.amp.GradScaler(device_type)


class Precision:
    """One run's precision: autocast around forward passes, the float16 loss scaler, the state
    a checkpoint keeps. ``backward`` / ``unscale`` / ``step`` are plain calls in full precision."""

    def __init__(self, cfg: Any, device: Any):
        import torch

        self.master_name, self.compute_name = master_dtype_name(cfg), compute_dtype_name(cfg)
        self.compute = getattr(torch, self.compute_name)
        self.device_type = str(device).split(":")[0]
        self.autocast = self.compute_name != self.master_name
        self.scaler = loss_scaler(cfg, self.device_type) if self.compute_name == "float16" else None

    def wrap(self, model: Any) -> Any:
        """Run ``model``'s every forward under autocast (in place; a no-op in full precision).
        Backward follows: autograd runs each op in the dtype its forward used."""
        if not self.autocast or getattr(model, "_rlvr_autocast", None) is not None:
            return model
        import torch

        forward = model.forward

        @functools.wraps(forward)
        def autocast_forward(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(self.device_type, dtype=self.compute):
                return forward(*args, **kwargs)

        model.forward = autocast_forward
        model._rlvr_autocast = self.compute_name
        return model

    def backward(self, loss: Any) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: Any) -> None:
        """Before gradient clipping: the gradients back at their true scale."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """The optimizer step (float16: skipped when a gradient overflowed, the scale adapted)."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"master_dtype": self.master_name, "compute_dtype": self.compute_name}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if state and self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


#: full precision, no scaler: what ``policy_update`` does when no run passes a ``Precision``
class _Full(Precision):
    def __init__(self) -> None:
        self.master_name = self.compute_name = "float32"
        self.compute, self.device_type, self.autocast, self.scaler = None, "cpu", False, None


FULL = _Full()
