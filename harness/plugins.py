"""Commands other packages add to ``rlvr`` through the ``rlvr.commands`` entry-point group.

rlvr's own commands, ``rlvr train`` included, are imported by the command line itself
(``rlvr.cli.main``); a package that builds on rlvr registers a module with ``register(subparsers)``
under this group and ``rlvr`` lists its command beside them.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Collection

GROUP = "rlvr.commands"


def plugin_commands(exclude: Collection[str] = ()) -> list[ModuleType]:
    """Every registered command module (each has ``register(subparsers)``), less the names in
    ``exclude`` (rlvr's own commands win over a plugin of the same name); one that fails to
    import is named on stderr and left out."""
    loaded = (_load(entry) for entry in entry_points(group=GROUP) if entry.name not in exclude)
    return [module for module in loaded if module is not None]


def _load(entry: EntryPoint) -> ModuleType | None:
    """The entry point's module, or None after naming on stderr why it did not import."""
    try:
        return entry.load()
    except ImportError as exc:
        print(f"rlvr: command {entry.name!r} unavailable ({exc})", file=sys.stderr)
        return None
