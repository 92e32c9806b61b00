"""How much disk a run's checkpoints keep: the last ``keep_checkpoints`` (older ones deleted once a
newer one is complete), plus the best by ``keep_best`` when asked; the optimizer state only in
the newest checkpoint, the one ``--resume`` continues (``latest``).

Why: a Dr. GRPO paper run saves every 16 of 1,250 steps; a checkpoint of a 7.6B policy is the
float32 weights (30 GB) and the AdamW moments (61 GB), so keeping all of them would take
~7 TB. Kept older checkpoints keep their weights (``rlvr eval`` loads them) without the
optimizer state. ``keep_checkpoints: 0`` keeps every checkpoint whole, as before.

Scores for ``keep_best`` are the logged value of that metric at a checkpoint's step, kept in
``checkpoint_scores.json`` (a resumed run reads it back).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

OPTIMIZER_FILE = "optimizer.pt"
OPTIMIZER_DCP_DIR = "dcp-optim"
SCORES_FILE = "checkpoint_scores.json"
STATE_FILE = "trainer_state.pt"  # (rlvr.trainers.runtime.checkpoint writes it)


def complete_checkpoints(out: Path) -> list[Path]:
    """Checkpoint directories whose trainer state was written, oldest first."""
    found = [p for p in Path(out).glob("checkpoint-*") if not p.name.endswith(".tmp") and (p / STATE_FILE).exists()]
    return sorted(found, key=lambda p: p.name)


def record_score(out: Path, checkpoint: Path, metrics: dict[str, Any], metric: str | None) -> None:
    """Remember ``metrics[metric]`` for ``checkpoint`` (nothing when absent or not logged)."""
    if not metric or metrics.get(metric) is None:
        return
    path = Path(out) / SCORES_FILE
    scores = json.loads(path.read_text()) if path.exists() else {}
    scores[checkpoint.name] = float(metrics[metric])
    path.write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n")


def best_checkpoint(out: Path, names: set[str]) -> str | None:
    """The highest-scored of ``names`` (the earliest on a tie), None without scores."""
    path = Path(out) / SCORES_FILE
    scores = json.loads(path.read_text()) if path.exists() else {}
    scored = sorted((name for name in names if name in scores), key=lambda n: (-scores[n], n))
    return scored[0] if scored else None


def strip_optimizer(checkpoint: Path) -> None:
    """Drop the optimizer state (single-process file or sharded directory), keep the weights."""
    (checkpoint / OPTIMIZER_FILE).unlink(missing_ok=True)
    shutil.rmtree(checkpoint / OPTIMIZER_DCP_DIR, ignore_errors=True)


def prune(out: Path, keep: int, keep_best: str | None = None) -> list[str]:
    """Delete what ``keep`` / ``keep_best`` do not keep (see the module docstring); the names deleted."""
    found = complete_checkpoints(out)
    if keep <= 0 or not found:
        return []
    kept = {p.name for p in found[-keep:]}
    best = best_checkpoint(out, {p.name for p in found}) if keep_best else None
    if best:
        kept.add(best)
    deleted = []
    for path in found:
        if path.name not in kept:
            shutil.rmtree(path)
            deleted.append(path.name)
        elif path != found[-1]:
            strip_optimizer(path)
    return deleted
