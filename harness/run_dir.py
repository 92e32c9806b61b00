"""One run directory for every command that runs something: ``rlvr eval``, ``rlvr ablate``,
``rlvr train`` (policy gradient) and the populations (RandOpt, CoRP).

A run directory is named ``--out``, else ``results/<name>`` (``default_run_path``), and holds the
resolved settings in ``config.yaml`` and, while a run is unfinished after a failure or an
interrupt, ``partial.json``. The one resume rule, for every command:

    The same command again continues the run its directory holds: finished work (samples,
    checkpoints, scored generations) is kept and only the rest is done. A continuation may change
    the settings marked [not scored] or [resumable]; any other change is refused in one line, and
    so is a directory that holds other files, or work without its config.yaml. ``--resume``
    insists on a continuation: it is refused where there is nothing to continue.

What counts as work is the command's (``RunDir.work``): samples for an evaluation, checkpoints
for a policy-gradient run, the generation journal's log for a population. A directory with a
``config.yaml`` but no work yet is started again under the new settings.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml
from rlvr.harness.config import read_yaml
from rlvr.harness.errors import UserError
from rlvr.harness.paths import output_dir
from rlvr.harness.run_config import meaning

#: the file a run directory keeps its resolved settings in
CONFIG_FILE = "config.yaml"
#: the marker of a run that stopped before it finished (removed when a rerun finishes it)
PARTIAL_FILE = "partial.json"
#: where runs go without ``--out``
RESULTS = Path("results")
#: what a run directory is called in messages, and the flag that names it
FLAG = "--out"


def default_run_path(*parts: Any) -> Path:
    """``results/<part>-<part>-...``, characters a file name should not hold replaced by ``_``: the
    one place a default run directory is named (the same command names the same directory)."""
    return RESULTS / re.sub(r"[^A-Za-z0-9_.+=-]+", "_", "-".join(str(p) for p in parts))


# ---- config.yaml -----------------------------------------------------------------------------
def save_config(config: Any, run_dir: Path) -> None:
    """Write the fully resolved config (what actually ran) to ``run_dir/config.yaml``, in field order."""
    text = yaml.safe_dump(dataclasses.asdict(config), sort_keys=False, allow_unicode=True)
    (Path(run_dir) / CONFIG_FILE).write_text(text, encoding="utf-8")


def saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The settings saved in ``run_dir/config.yaml`` as written, or None when there is none."""
    path = Path(run_dir) / CONFIG_FILE
    return read_yaml(path) if path.is_file() else None


def _changed(saved: Mapping[str, Any], config: Any) -> list[str]:
    # A field the saved file lacks did not exist when that run started: it counts as null, not as
    # today's default, which the old code need not have followed.
    current = dataclasses.asdict(config)
    return sorted(k for k, v in current.items() if not meaning(config, k).role.resumable and saved.get(k) != v)


def changed_settings(run_dir: Path, config: Any) -> list[str]:
    """Sorted names of the settings whose role refuses a resume and whose value differs from the
    config saved in ``run_dir`` (a field the saved file lacks counts as null); none without one."""
    saved = saved_config(run_dir)
    return [] if saved is None else _changed(saved, config)


def check_resume(run_dir: Path, config: Any, *, saved_required: bool = False) -> None:
    """Refuse, in one line naming the fields, to continue ``run_dir`` under settings that change
    results: the first four as ``name: old -> new``, then the names of the rest.
    ``saved_required``: a run that has done work but lost its ``config.yaml`` cannot be matched
    to settings, so it is refused rather than trusted."""
    saved = saved_config(run_dir)
    if saved is None and saved_required:
        raise UserError(
            f"{run_dir} holds a run but no {CONFIG_FILE}, so its settings cannot be checked; "
            f"restore its {CONFIG_FILE} or pass a new {FLAG}"
        )
    names = [] if saved is None else _changed(saved, config)
    if not names:
        return
    shown = [
        f"{k}: {saved[k]!r} -> {getattr(config, k)!r}" if k in saved else f"{k}: unset -> {getattr(config, k)!r}"
        for k in names[:4]
    ]
    more = f"; {len(names) - 4} more: {', '.join(names[4:])}" if len(names) > 4 else ""
    raise UserError(
        f"{run_dir} holds a run with other settings ({', '.join(shown)}{more}); "
        f"rerun with its {CONFIG_FILE} or pass a new {FLAG}"
    )


# ---- the directory ---------------------------------------------------------------------------
def holds_file(name: str) -> Callable[[Path], bool]:
    """Work is the file ``name`` (an evaluation's ``samples.jsonl``, a population's log)."""
    return lambda path: (path / name).exists()


@dataclass(frozen=True)
class RunDir:
    """A run directory and what counts as work done in it: ``work(path)`` says whether there is
    any (samples written, a checkpoint saved), ``work_name`` is how a message names it."""

    path: Path
    work: Callable[[Path], bool]
    work_name: str = "run"

    def holds_work(self) -> bool:
        return self.path.is_dir() and self.work(self.path)

    def open(self, config: Any, resume: bool = False, *, create: bool = True) -> bool:
        """Check the directory against ``config`` under the resume rule and (``create``) make it;
        True when it holds work to continue. Nothing is written but the directory itself."""
        output_dir(self.path, FLAG)
        working = self.holds_work()
        if self.path.is_dir() and not working and not (self.path / CONFIG_FILE).exists():
            others = sorted(p.name for p in self.path.iterdir())[:3]
            if others:
                raise UserError(
                    f"{FLAG} {self.path} holds other files ({', '.join(others)}) and no run; "
                    "pass a new or empty directory"
                )
        if resume and not working:
            raise UserError(f"--resume: no {self.work_name} in {self.path} to continue; start without --resume")
        if working:
            check_resume(self.path, config, saved_required=True)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        return working

    def save_config(self, config: Any) -> None:
        save_config(config, self.path)

    def mark_partial(self, reason: str, kept: int | str, resume: str) -> None:
        """``partial.json``: the run stopped (``reason``) with ``kept`` work kept; ``resume`` says how
        to go on."""
        record = {
            "status": "partial",
            "reason": reason.splitlines()[0][:300] if reason else "stopped",
            "samples" if isinstance(kept, int) else "kept": kept,
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "resume": resume,
        }
        tmp = self.path / (PARTIAL_FILE + ".tmp")  # atomic: a reader never sees half a marker
        tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(self.path / PARTIAL_FILE)

    def finish(self) -> None:
        """The run is whole: its partial marker goes."""
        (self.path / PARTIAL_FILE).unlink(missing_ok=True)
