"""The judge's own memory budget: a backstop behind comparisons bounded by the expected value."""

from __future__ import annotations

import os
import resource

#: MiB a judge may grow by after start-up (``RLVR_JUDGE_MEMORY_MB``; 0 turns the cap off).
DEFAULT_BUDGET_MB = 4096


def limit_own_memory() -> None:
    """Cap this judge's address space at what it holds now plus ``RLVR_JUDGE_MEMORY_MB`` (4096
    by default; 0 turns it off). Comparisons are bounded in the size of the expected value, and
    this is the backstop: a judge that still runs out fails with ``MemoryError`` (our fault,
    ``sandbox_error``) instead of taking the machine's memory. Set after the zygote is forked,
    which the sandboxes' cgroups hold instead."""
    budget_mb = int(os.environ.get("RLVR_JUDGE_MEMORY_MB", str(DEFAULT_BUDGET_MB)))
    if budget_mb <= 0:
        return
    try:
        with open("/proc/self/status") as fh:
            size_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        wanted = (size_kb << 10) + (budget_mb << 20)
        if hard == resource.RLIM_INFINITY or wanted <= hard:
            resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    except (OSError, StopIteration, ValueError):
        pass
