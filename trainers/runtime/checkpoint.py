"""Checkpoints: a Hugging Face model directory (loadable by ``rlvr eval``) plus the trainer state
(optimizer, RNG streams, prompt-selection and curriculum position, step) so that N steps
straight equal N/2 steps, a resume, and N/2 more."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rlvr.trainers.runtime.checkpoint_retention import OPTIMIZER_DCP_DIR, OPTIMIZER_FILE, STATE_FILE


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    out: Path, step: int, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer | None, trainer: dict[str, Any]
) -> Path:
    """Write ``out/checkpoint-<step>`` atomically (a temporary directory renamed at the end);
    ``optimizer`` None leaves its state out (the checkpoint then evaluates but cannot resume)."""
    final = Path(out) / f"checkpoint-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if optimizer is not None:  # a file of its own: older checkpoints drop it (checkpoint_retention)
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
    torch.save({"step": step, "rng": rng_state(), **trainer}, tmp / STATE_FILE)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    (Path(out) / "latest").write_text(final.name + "\n")
    return final


def latest_checkpoint(out: Path) -> Path | None:
    marker = Path(out) / "latest"
    if marker.exists():
        path = Path(out) / marker.read_text().strip()
        if (path / STATE_FILE).exists():
            return path
    found = sorted(
        p for p in Path(out).glob("checkpoint-*") if (p / STATE_FILE).exists() and not p.name.endswith(".tmp")
    )
    return found[-1] if found else None


def load_trainer_state(path: Path) -> dict[str, Any]:
    """The trainer state, with ``optimizer`` when the checkpoint still holds it (a sharded one:
    ``sharded.optimizer`` says whether its directory is there)."""
    state = torch.load(Path(path) / STATE_FILE, weights_only=False)
    if (Path(path) / OPTIMIZER_FILE).exists():
        state["optimizer"] = torch.load(Path(path) / OPTIMIZER_FILE, weights_only=False)
    if "sharded" in state:
        state["sharded"]["optimizer"] = (Path(path) / OPTIMIZER_DCP_DIR).is_dir()
    return state
