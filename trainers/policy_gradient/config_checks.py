"""The data checks of ``TrainConfig.validate`` (stages, their sources, what a plateau reads),
shared with the gradient-free ``ESConfig`` (``check_sources``)."""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.harness.errors import UserError


def check_stages(stages: list[dict[str, Any]], check_data: bool = True) -> None:
    """Stage dicts are well formed and every data source exists (a benchmark or a local file)."""
    from rlvr.trainers.policy_gradient.curriculum import Stage

    for data in stages:
        if not isinstance(data, dict):
            raise UserError(
                f"bad training config: each stage is a mapping {{name, sources, until_step, ...}}, got {data!r}"
            )
        try:
            stage = Stage.from_dict(data)
        except ValueError as exc:
            raise UserError(f"bad training config: {exc}") from None
        check_sources(stage.sources, f"stage {stage.name!r}", check_data)


def check_plateau_reading(stages: list[dict[str, Any]], selection: str) -> None:
    """A reward plateau under ``history`` or ``dynamic`` selection needs a probe: both change
    what the trained batch's reward measures (``rlvr.trainers.policy_gradient.curriculum``, "What a plateau reads")."""
    from rlvr.trainers.policy_gradient.curriculum import Stage

    if selection not in ("history", "dynamic"):
        return
    for data in stages:
        stage = Stage.from_dict(data)
        if stage.plateau_window and stage.probe_size is None:
            raise UserError(
                f"bad training config: stage {stage.name!r} switches on a reward plateau, but {selection} selection "
                "changes what the batch reward measures (history resampling drops solved prompts, so the pool's "
                "reward falls by itself); give the stage a fixed probe, e.g. probe_size: 128, probe_every: 10"
            )


def check_sources(names: Sequence[str], where: str, check_data: bool = True) -> None:
    """Each name is a registered benchmark or an existing local data file (else one line saying
    which; ``check_data=False`` lets a local file be absent)."""
    from rlvr.harness.benchmarks.sources import local_path

    for name in names:
        try:
            path = local_path(name)
        except UserError as exc:
            raise UserError(f"bad training config: {where}: {exc}") from None
        if check_data and path is not None and not path.exists():
            raise UserError(
                f"bad training config: {where} names {name}, which does not exist (put the data there, or name "
                "yours with "
                f'--set "stages=[{{name: main, sources: [FILE.jsonl]}}]" / --set train_source=FILE.jsonl)'
            )
