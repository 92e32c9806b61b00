"""Checkpoints of a data-parallel run, and resuming any checkpoint under any world size.

``checkpoint-<step>/`` holds the plain Hugging Face export (full state dict gathered to rank 0,
``save_pretrained``: what ``rlvr eval --model`` reads; written where an evaluation reads it, at
the end, or in every checkpoint with ``hf_export: every_checkpoint``), ``trainer_state.pt``
(step, scheduler, curriculum, selection, every rank's RNG), ``dcp/``: the model and
``dcp-optim/``: the optimizer, sharded with ``torch.distributed.checkpoint`` (``get_state_dict``
/ ``set_state_dict``; apart, so that older checkpoints can drop the optimizer). ``--resume`` reloads
them exactly; DCP reshards, so another world size (or one process) resumes too, equal then up to
floating-point summation order. A single process uses only the resume helpers here (it can
continue a sharded checkpoint); its own checkpoints are ``rlvr.trainers.runtime.checkpoint``'s.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from rlvr.trainers.runtime.checkpoint_retention import OPTIMIZER_DCP_DIR
from rlvr.trainers.runtime.distributed import Context, context, unwrap

DCP_DIR = "dcp"


def save_checkpoint(
    ctx: Context,
    out: Path,
    step: int,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer | None,
    trainer: dict[str, Any],
    export: bool = True,
) -> Path:
    """``out/checkpoint-<step>``: the HF export (rank 0; only with ``export``), ``trainer_state.pt``,
    the sharded model in ``dcp/`` and the sharded optimizer in ``dcp-optim/``; written in a
    temporary directory renamed by rank 0 once every rank is done."""
    import torch.distributed.checkpoint as dcp
    from rlvr.trainers.runtime.checkpoint import STATE_FILE, rng_state
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    final = Path(out) / f"checkpoint-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    model = ctx.train_model
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    full = get_model_state_dict(model, options=options) if export else None  # (a collective)
    if ctx.is_main:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    ctx.barrier()
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(tmp / DCP_DIR), process_group=ctx.cpu_group)
    if optimizer is not None:  # apart from the model: older checkpoints drop it (checkpoint_retention)
        optim = {"optim": get_optimizer_state_dict(model, optimizer)}
        dcp.save(optim, checkpoint_id=str(tmp / OPTIMIZER_DCP_DIR), process_group=ctx.cpu_group)
    rngs = ctx.gather(rng_state())
    if ctx.is_main:
        if full is not None:
            unwrap(model).save_pretrained(tmp, state_dict=full, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        sharded = {"world_size": ctx.world, "parallel": ctx.parallel, "optimizer": optimizer is not None}
        torch.save(
            {"step": step, "rng": rngs[0], "rng_per_rank": rngs, "sharded": sharded, **trainer}, tmp / STATE_FILE
        )
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        (Path(out) / "latest").write_text(final.name + "\n")
    ctx.barrier()
    return final


def is_sharded(state: dict[str, Any]) -> bool:
    return "sharded" in state


def has_optimizer(state: dict[str, Any]) -> bool:
    return "optimizer" in state or bool(state.get("sharded", {}).get("optimizer"))


def load_sharded(checkpoint: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Model and optimizer from ``checkpoint/dcp`` (any world size, or one process: DCP reshards)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    ctx = context()
    group = ctx.cpu_group if ctx is not None else None
    no_dist = not torch.distributed.is_initialized()  # one process resuming: no group to plan with
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")  # (one process: meant)
        for key, folder in (("model", DCP_DIR), ("optim", OPTIMIZER_DCP_DIR)):
            part = {key: state[key]}
            dcp.load(part, checkpoint_id=str(Path(checkpoint) / folder), process_group=group, no_dist=no_dist)
            state[key] = part[key]
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def load_optimizer(state: dict[str, Any], checkpoint: Path, model: torch.nn.Module, optimizer: Any) -> None:
    """The optimizer (and, for a sharded checkpoint, the exact weights) of ``checkpoint``."""
    from rlvr.harness.errors import UserError

    if is_sharded(state):
        load_sharded(checkpoint, model, optimizer)
        return
    ctx = context()
    if ctx is not None and ctx.parallel == "fsdp":
        raise UserError(
            f"--resume: {checkpoint} is a single-process checkpoint; continue it in one process or with parallel: ddp"
        )
    optimizer.load_state_dict(state["optimizer"])


def rank_rng(state: dict[str, Any]) -> dict[str, Any]:
    """This rank's saved RNG streams (rank 0's when the run had fewer ranks, or one process)."""
    per_rank = state.get("rng_per_rank")
    ctx = context()
    rank = ctx.rank if ctx is not None else 0
    return per_rank[rank] if per_rank and rank < len(per_rank) else state["rng"]
