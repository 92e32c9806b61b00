"""rlvr: one sandboxed verifier for training rewards and evaluation grades, reference trainers on top.

The package holds three rooms whose imports point one way, ``sandbox <- harness <- trainers``:
``rlvr.sandbox`` (the verifiers and their isolation), ``rlvr.harness`` (benchmarks, generation,
evaluation, leaderboards) and ``rlvr.trainers`` (the reference trainers).

In an installed wheel the rooms sit inside this folder. In a source checkout they sit beside it, at
the top of the repository where the project keeps them, so the package's search path includes the
checkout's root too: ``import rlvr.sandbox`` then finds ``./sandbox`` with no install step.
"""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_CHECKOUT = _os.path.dirname(_HERE)
if not _os.path.isdir(_os.path.join(_HERE, "sandbox")) and _os.path.isfile(
    _os.path.join(_CHECKOUT, "sandbox", "__init__.py")
):
    __path__.append(_CHECKOUT)  # noqa: F821  (a package's __path__, set by the import system)
