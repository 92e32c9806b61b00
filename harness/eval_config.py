"""``EvalConfig``: every setting of an evaluation run, as saved in ``config.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rlvr.harness.backends.registry import backend_names, separate_engine
from rlvr.harness.config import split_list
from rlvr.harness.errors import UserError
from rlvr.harness.run_config import Role, require, scored_settings, setting
from rlvr.harness.run_dir import default_run_path
from rlvr.harness.setting_blocks import (
    EngineSettings,
    GenerationSettings,
    ModelSettings,
    RunSettings,
    SamplingSettings,
    block_checks,
)
from rlvr.sandbox.math.policy import PRESETS as MATH_PRESETS

#: every field names its role (rlvr.harness.run_config.Role), short
P, R, N = Role.PROTOCOL, Role.RESULT, Role.NOT_SCORED


@dataclass
class EvalConfig(RunSettings, EngineSettings, SamplingSettings, GenerationSettings, ModelSettings):
    """One evaluation: model x benchmarks under one protocol (template, sampling, backend).
    ``protocol`` settings are the ones the protocol fingerprint hashes (``rlvr.harness.fingerprint``);
    ``not scored`` ones are left out of the summary's config and may change when a run resumes.
    The settings shared with the trainers come from ``rlvr.harness.setting_blocks``."""

    BACKENDS: ClassVar[tuple[str, ...]] = tuple(backend_names())
    SHOWN_DEFAULTS: ClassVar[dict[str, str]] = {"out": "results/<model>-<template>-<benchmarks>-n<n>-t<T>[-limit<N>]"}

    benchmarks: Any = setting(
        None,
        help="comma-separated registered names (rlvr benchmarks), local .jsonl/.json/.parquet files or "
        "hf:NAME[:CONFIG][@SPLIT]",
        role=R,
        group="protocol",
    )
    shots: int = setting(
        4, help="worked examples the fewshot template puts before each question", role=P, group="protocol"
    )
    n: int = setting(1, help="samples generated per problem (n of mean@n, pass@k and maj@k)", role=P, group="protocol")
    limit: int | None = setting(
        None,
        help="evaluate the first N problems of each benchmark, in file order (all when unset)",
        role=N,
        group="protocol",
    )
    batch_size: int = setting(
        16,
        help="hf backend: sequences per forward batch (a sample depends on its seed alone, not its batch)",
        role=N,
        group="backend",
    )
    base_url: str | None = setting(
        None, help="openai backend: the server's base URL, e.g. http://localhost:8000/v1", role=R, group="backend"
    )
    api_key_env: str = setting(
        "OPENAI_API_KEY",
        help="openai backend: the environment variable that holds the API key",
        role=N,
        group="backend",
    )
    concurrency: int = setting(8, help="openai backend: requests in flight at once", role=N, group="backend")
    workers: int | None = setting(
        None,
        help="grading worker processes per verifier",
        role=N,
        group="grading and data",
        shown_default="min(4, CPUs)",
    )
    math_timeout: float = setting(
        1.0,
        help="CPU seconds one math grade may use before it is a timeout (wall-clock backstop: 10x + 5 s)",
        role=P,
        group="grading and data",
    )
    code_limits: dict[str, Any] | None = setting(
        None,
        help='code sandbox limits as JSON, e.g. \'{"time_s": 6, "memory_mb": 2048}\'',
        role=P,
        group="grading and data",
        shown_default="each benchmark's own",
    )
    test_details: bool = setting(
        False,
        help="keep the verifiers' own failure details in samples.jsonl; they quote hidden expected values, so such "
        "a run is no training data (otherwise: reason, first failing test and counts)",
        role=N,
        group="grading and data",
    )
    fields: Any = setting(
        None,
        help="local/hub data: field mapping OURS=THEIRS, e.g. question=problem,answer=gold",
        role=R,
        group="grading and data",
    )
    kind: str | None = setting(
        None,
        help="local/hub data: which verifier grades it",
        role=R,
        group="grading and data",
        shown_default="code if rows have tests, else math",
        choices=("math", "code"),
    )
    policy: str | None = setting(
        None,
        help="math verifier policy for every math problem, replacing each benchmark's own: "
        + ", ".join(MATH_PRESETS)
        + " (boxed_only, r1_format: Dr. GRPO's rewards)",
        role=R,
        group="grading and data",
    )
    pass_k: Any = setting(
        None,
        help="comma-separated k values to report pass@k for",
        role=N,
        group="protocol",
        shown_default="every k <= n",
    )
    progress: bool = setting(
        True,
        help="hide the live progress line on stderr (finished benchmarks are still reported)",
        role=N,
        group="run",
        flag="--no-progress",
        action="store_false",
    )
    ray: str | None = setting(
        None,
        help="generate on a Ray cluster, one engine per actor: ADDRESS, or bare --ray for RAY_ADDRESS, a cluster here, "
        "else a local one",
        role=N,
        group="backend",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
    )
    ray_actors: int | None = setting(
        None,
        help="with --ray: engine actors, each holding one model copy",
        role=N,
        group="backend",
        shown_default="one per GPU, else per CPU",
    )
    ray_cpus_per_actor: float = setting(
        1.0, help="with --ray: CPUs per engine actor (its torch threads)", role=N, group="backend"
    )

    def __post_init__(self) -> None:
        self.benchmarks = split_list(self.benchmarks)
        if not self.benchmarks:
            raise UserError("no benchmarks: pass --benchmarks gsm8k,math500 (run `rlvr benchmarks` to list them)")
        self.pass_k = [int(k) for k in split_list(self.pass_k)] or None
        checks = [
            (self.n >= 1, "--n must be at least 1"),
            (self.limit is None or self.limit >= 1, "--limit must be at least 1"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.shots >= 0, "--shots must be 0 or more"),
            (self.concurrency >= 1, "--concurrency must be at least 1"),
            (self.workers is None or self.workers >= 1, "--workers must be at least 1"),
            (self.ray_actors is None or self.ray_actors >= 1, "--ray-actors must be at least 1"),
            (self.ray_cpus_per_actor > 0, "--ray-cpus-per-actor must be positive"),
            (self.math_timeout > 0, "--math-timeout must be positive"),
            (self.kind in (None, "math", "code"), "--kind must be math or code"),
            (self.policy is None or self.policy in MATH_PRESETS, f"--policy must be one of {', '.join(MATH_PRESETS)}"),
        ]
        pass_ks = [
            (1 <= k <= self.n, f"pass@{k} needs k between 1 and --n ({self.n}); raise --n or drop k={k}")
            for k in self.pass_k or []
        ]
        require(block_checks(self) + checks + pass_ks)

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
        if self.gpu_memory_utilization is not None and (not engine or device == "cpu"):
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
        return default_run_path(*parts, *([f"limit{self.limit}"] if self.limit else []))

    def scored_settings(self) -> dict[str, Any]:
        return scored_settings(self)
