"""Per-step health metrics in one vocabulary, written to ``train_log.jsonl`` (and optionally
TensorBoard / Weights & Biases).

Names (all per step): ``reward_mean``, ``accuracy``, ``zero_variance_fraction`` (groups whose
rewards are all equal, among those generated), ``effective_batch`` (prompts that trained after
filtering), ``generations`` / ``generations_total`` (samples generated), ``length_correct`` /
``length_incorrect`` (mean tokens), ``truncation_rate``, ``clip_low_fraction`` /
``clip_high_fraction``, ``kl`` (k3 to the reference when β > 0, else from the rollout policy),
``entropy``, ``grad_norm``, ``tokens_per_s``, ``time_generate`` / ``time_score`` / ``time_learn`` /
``time_sync``, the sampler-learner gap with ``backend: vllm`` (``mismatch_logp_abs_mean``,
``mismatch_ratio_max``, ``mismatch_kl``, ``tis_capped_fraction``:
``rlvr.trainers.policy_gradient.losses.sampler_mismatch``;
null with ``hf``), ``reflection_<category>`` (Dr. GRPO's keyword detector and our reconstruction of
SRPO's recheck / hesitation / exploration patterns), ``stage``, ``lr``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.reflection import reflection_rates

LOG_FILE = "train_log.jsonl"


def rollout_metrics(groups: list, trained: list) -> dict[str, Any]:
    """What the step's generated groups say (before the update)."""
    texts = [t for g in groups for t in g.texts]
    lengths = [(len(ids), ok) for g in groups for ids, ok in zip(g.completion_ids, g.correct)]
    correct_lengths = [n for n, ok in lengths if ok]
    wrong_lengths = [n for n, ok in lengths if not ok]
    mean = lambda xs: round(sum(xs) / len(xs), 2) if xs else None  # noqa: E731
    truncated = [t for g in groups for t in g.truncated]
    out = {
        "accuracy": mean([float(ok) for g in groups for ok in g.correct]),
        "zero_variance_fraction": mean([float(len(set(g.correct)) == 1) for g in groups]),
        "effective_batch": len(trained),
        "prompts_generated": len(groups),
        "length_correct": mean(correct_lengths),
        "length_incorrect": mean(wrong_lengths),
        "truncation_rate": mean([float(t) for t in truncated]),
    }
    out.update({f"reflection_{k}": v for k, v in reflection_rates(texts).items()})
    return out


class TrainLog:
    """Appends one JSON line per step (flushed), mirrored to TensorBoard / W&B when asked."""

    def __init__(self, out: Path, sinks: list[str], config: dict[str, Any], resume: bool, keep_until: int = 0):
        """On resume, lines after the checkpoint's step (logged before a crash) are dropped."""
        self.path = Path(out) / LOG_FILE
        if resume and self.path.exists():
            kept = [
                line
                for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and _step_of(line) <= keep_until
            ]
            self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        self._fh = self.path.open("a" if resume else "w", encoding="utf-8")
        self._tb = None
        self._wandb = None
        if "tensorboard" in sinks:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise UserError("log_to: tensorboard needs the tensorboard package (pip install tensorboard)") from exc
            self._tb = SummaryWriter(log_dir=str(Path(out) / "tensorboard"))
        if "wandb" in sinks:
            try:
                import wandb
            except ImportError as exc:
                raise UserError(
                    "log_to: wandb needs the wandb package (pip install wandb); set WANDB_MODE=offline without network"
                ) from exc
            self._wandb = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "rlvr"),
                name=Path(out).name,
                config=config,
                dir=str(out),
                resume="allow" if resume else None,
            )

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        record = {"step": step, **metrics}
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _step_of(line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62


def read_log(out: Path) -> list[dict[str, Any]]:
    path = Path(out) / LOG_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
