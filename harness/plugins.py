"""Commands other packages add to ``rlvr`` through the ``rlvr.commands`` entry-point group.

The trainers register ``rlvr train`` this way, so the harness reaches them without importing
them by name (dependencies point sandbox <- harness <- trainers): ``rlvr``'s parser lists the
registered commands, and ``rlvr demo`` trains through the same entry point.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

GROUP = "rlvr.commands"


def plugin_commands() -> list[ModuleType]:
    """Every registered command module (each has ``register(subparsers)``); one that fails to
    import is named on stderr and left out."""
    loaded = (_load(entry) for entry in entry_points(group=GROUP))
    return [module for module in loaded if module is not None]


def _load(entry: EntryPoint) -> ModuleType | None:
    """The entry point's module, or None after naming on stderr why it did not import."""
    try:
        return entry.load()
    except ImportError as exc:
        print(f"rlvr: command {entry.name!r} unavailable ({exc})", file=sys.stderr)
        return None


class Trainer(Protocol):
    """What ``rlvr train``'s module offers a caller that has no command line to parse."""

    def train_run(
        self, algorithm: str, config: str | None, overrides: dict[str, Any], resume: bool = False, progress: bool = True
    ) -> Path | None: ...


def trainer() -> Trainer | None:
    """The module registered as ``rlvr train``, or None where no package registers it (or it
    fails to import: named on stderr, as ``rlvr``'s parser names it)."""
    for entry in entry_points(group=GROUP, name="train"):
        return cast(Trainer | None, _load(entry))
    return None
