"""How a sandboxing judge process is started: its whole environment and its working directory."""

from __future__ import annotations

import os

import rlvr

#: The directory that holds the ``rlvr`` package: the judge's working directory and import root.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(rlvr.__file__)))
#: The judge starts with only these variables: nothing a program could find in memory is secret.
JUDGE_ENV_KEYS = ("PATH", "LANG", "HOME", "RLVR_CACHE_DIR", "RLVR_SANDBOX_ISOLATION", "RLVR_SANDBOX_CGROUPS")
#: The judge's numpy (tolerance comparisons of a few values) runs on one thread: OpenBLAS's
#: pool keeps a second thread spinning through every small numpy call, which doubled the CPU
#: of ``numpy.allclose`` here and took it from the programs being graded.
SINGLE_THREADED_NUMPY = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def judge_env() -> dict[str, str]:
    """The judge's whole environment: a path, a locale, our own package root on the import path
    (nothing of the caller's ``PYTHONPATH`` or working directory: a module planted there would
    run in the judge and in every sandbox forked from it)."""
    env = {k: os.environ[k] for k in JUDGE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    env["PYTHONPATH"] = PACKAGE_ROOT
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONSAFEPATH"] = "1"
    env.update(SINGLE_THREADED_NUMPY)
    return env
