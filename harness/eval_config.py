"""``EvalConfig``: every setting of an evaluation run, as saved in ``config.yaml``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.registry import BACKENDS, separate_engine
from harness.config import split_list
from harness.errors import UserError
from sandbox.math.policy import PRESETS as MATH_PRESETS

#: Settings that do not change any score: a resumed run may change them freely.
NOT_SCORED = (
    "out",
    "progress",
    "batch_size",
    "concurrency",
    "workers",
    "api_key_env",
    "limit",
    "gpu_memory_utilization",
    "kv_cache_gb",
    "pass_k",
    "ray",
    "ray_actors",
    "ray_cpus_per_actor",
    "test_details",
)


@dataclass
class EvalConfig:
    """One evaluation: model x benchmarks under one protocol (template, sampling, backend)."""

    model: str | None = None
    benchmarks: Any = None
    template: str = "qwen_math"
    shots: int = 4
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int = 0
    backend: str = "hf"
    limit: int | None = None
    out: str | None = None
    batch_size: int = 16
    dtype: str = "auto"
    device: str = "auto"
    max_model_len: int | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    gpu_memory_utilization: float = 0.85
    #: vLLM on a CPU: GiB of RAM for the KV cache (vLLM's own sizing from RAM fails there)
    kv_cache_gb: float = 1.0
    workers: int | None = None
    math_timeout: float = 1.0
    code_limits: dict[str, Any] | None = None
    #: keep the verifiers' own failure details in samples.jsonl; they quote hidden expected values,
    #: so off by default (details are then reason, first failing test and counts)
    test_details: bool = False
    fields: Any = None
    kind: str | None = None
    policy: str | None = None
    pass_k: Any = None
    progress: bool = True
    #: generate on a Ray cluster: an address, or "auto" (RAY_ADDRESS, a cluster here, else a local one)
    ray: str | None = None
    ray_actors: int | None = None
    ray_cpus_per_actor: float = 1.0

    def __post_init__(self) -> None:
        self.benchmarks = split_list(self.benchmarks)
        if not self.benchmarks:
            raise UserError("no benchmarks: pass --benchmarks gsm8k,math500 (run `rlvr benchmarks` to list them)")
        self.pass_k = [int(k) for k in split_list(self.pass_k)] or None
        checks = [
            (self.n >= 1, "--n must be at least 1"),
            (self.temperature >= 0, "--temperature must be >= 0 (0 = greedy)"),
            (0 < self.top_p <= 1, "--top-p must be in (0, 1]"),
            (self.max_tokens >= 1, "--max-tokens must be at least 1"),
            (self.limit is None or self.limit >= 1, "--limit must be at least 1"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.shots >= 0, "--shots must be 0 or more"),
            (self.concurrency >= 1, "--concurrency must be at least 1"),
            (self.max_model_len is None or self.max_model_len >= 1, "--max-model-len must be at least 1"),
            (self.workers is None or self.workers >= 1, "--workers must be at least 1"),
            (
                0 < self.gpu_memory_utilization <= 1,
                f"--gpu-memory-utilization is the share of GPU memory vLLM may use: a number in (0, 1], e.g. 0.85 "
                f"(got {self.gpu_memory_utilization:g})",
            ),
            (
                self.kv_cache_gb > 0,
                f"--kv-cache-gb must be a positive number of GiB, e.g. 1 (got {self.kv_cache_gb:g})",
            ),
            (self.ray_actors is None or self.ray_actors >= 1, "--ray-actors must be at least 1"),
            (self.ray_cpus_per_actor > 0, "--ray-cpus-per-actor must be positive"),
            (self.backend in BACKENDS, f"--backend must be one of {', '.join(BACKENDS)}"),
            (self.math_timeout > 0, "--math-timeout must be positive"),
            (self.kind in (None, "math", "code"), "--kind must be math or code"),
            (self.policy is None or self.policy in MATH_PRESETS, f"--policy must be one of {', '.join(MATH_PRESETS)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)
        for k in self.pass_k or []:
            if k < 1 or k > self.n:
                raise UserError(f"pass@{k} needs k between 1 and --n ({self.n}); raise --n or drop k={k}")

    def warnings(self, device: str | None = None) -> list[str]:
        """Settings that are valid but will not do what the user likely means. ``device``: where the
        vllm backend will run (``cpu`` / ``cuda``), when known."""
        out = []
        if self.n > 1 and self.temperature == 0:
            out.append(
                f"--n {self.n} with --temperature 0 (greedy) draws {self.n} identical samples: pass@k and maj@k then "
                "equal mean@1; set --temperature (e.g. 0.6) for pass@k"
            )
        default = EvalConfig.__dataclass_fields__
        engine = separate_engine(self.backend)  # vLLM: the engine sizes its own KV cache
        if self.gpu_memory_utilization != default["gpu_memory_utilization"].default and (not engine or device == "cpu"):
            where = "the CPU (its KV cache is --kv-cache-gb)" if engine else f"--backend {self.backend}"
            out.append(f"--gpu-memory-utilization applies to the vllm backend on a GPU; ignored on {where}")
        if self.kv_cache_gb != default["kv_cache_gb"].default and (not engine or device == "cuda"):
            where = "a GPU (use --gpu-memory-utilization)" if engine else f"--backend {self.backend}"
            out.append(f"--kv-cache-gb applies to the vllm backend on a CPU; ignored on {where}")
        return out

    def run_dir(self) -> Path:
        """``--out``, or a name built from the command so rerunning it resumes the same run."""
        if self.out:
            return Path(self.out)
        model = Path(self.model).name if self.model else "smollm2-135m-instruct"
        names = "+".join(
            Path(str(b)).name.split(".")[0] if not isinstance(b, dict) else str(b.get("name", "custom"))
            for b in self.benchmarks
        )
        parts = [model, Path(self.template).stem, names, f"n{self.n}", f"t{self.temperature:g}"]
        if self.limit:
            parts.append(f"limit{self.limit}")
        return Path("results") / re.sub(r"[^A-Za-z0-9_.+=-]+", "_", "-".join(parts))

    def scored_settings(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {k: v for k, v in asdict(self).items() if k not in NOT_SCORED}
