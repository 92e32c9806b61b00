"""``ESConfig``: every setting of a gradient-free run (RandOpt, CoRP), typed, saved as ``config.yaml``.

Layering as for the policy-gradient trainers: these defaults (the authors' released
``scripts/run.sh`` values, ALGORITHMS.md §4.2 and §5.7) < a preset (``cpu-demo``, ``paper``) or
a YAML file < ``--set key=value`` and ``--population N``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.errors import UserError

ES_ALGORITHMS = ("randopt", "corp")
LOW_RANK_SCALES = ("authors", "trace")


@dataclass
class ESConfig:
    """A RandOpt or CoRP run. Data: support = the first ``support_size`` items of
    ``train_source``, probe = the next ``probe_size`` (CoRP), hold-out gate = the next
    ``holdout_size`` (CoRP), test = ``test_source``. The four are disjoint (checked on load).

    CoRP's hold-out gate (ours, on in every preset; ALGORITHMS.md §5.5 "held-out validation
    gate"): every candidate that would replace the current model — Stage 1's merge, and each
    Stage-2 round that the authors' gates (gate half of the support, then the probe) accept —
    is compared per problem with the current model on the hold-out split, which chose nothing
    (Stage 0 scores the support, Stage 1's grid and Stage 2's line search the probe, Stage 2's
    proposals the support halves). Accepted only when the paired lower confidence bound
    mean(Δ) − ``holdout_z``·sd(Δ)/√n of Δ_j = y′_j − y_j is > 0: ties, losses and gains the
    split cannot tell from noise are all rejected. ``holdout_gate_stages: []`` (with
    ``holdout_size: 0``) is the authors' release: Stage 1 applied unconditionally, Stage 2
    gated only on data it was partly chosen on."""

    algorithm: str = "corp"
    model: str | None = None
    template: str = "chat"
    train_source: str = "arith_train"
    test_source: str = "arith"
    support_size: int = 500
    probe_size: int = 100
    test_limit: int | None = None
    max_tokens: int = 1024
    batch_size: int = 32
    # Stage 0 / RandOpt population
    population: int = 500
    sigmas: list[float] = field(default_factory=lambda: [0.0005, 0.001, 0.002])
    population_seed: int = 42
    noise_dtype: str = "bfloat16"
    noise_cache_gb: float = 0.0
    workers: int = 1
    backend: str = "hf"
    # RandOpt
    top_k: list[int] = field(default_factory=lambda: [1, 50])
    # CoRP Stage 1
    q_grid: list[float] = field(default_factory=lambda: [0.5, 0.7, 0.9])
    beta_grid: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0])
    s_grid: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    rank: int = 8
    # Hold-out gate (see the class docstring): size, z of the one-sided bound (1.645: 95%), stages gated
    holdout_size: int = 100
    holdout_z: float = 1.645
    holdout_gate_stages: list[int] = field(default_factory=lambda: [1, 2])
    # CoRP Stage 2
    rounds: int = 3
    local_population: int = 100
    isotropic_share: float = 0.5
    # Stage-2 proposals' low-rank part c_k u_k: "authors" = c_k = σ√(1−λ_iso)·√λ_k·z_k with λ_k in
    # amplitude² units, as the released code (then the low-rank part is ~σ² small: its norm about
    # 0.2% of the isotropic part's on the N=50 CPU run, i.e. plain isotropic search); "trace" = λ_k/Σλ in
    # place of λ_k, so the low-rank part carries share 1−λ_iso of the expected squared norm of a
    # proposal and the isotropic part λ_iso (the "low-rank plus isotropic floor" as described).
    low_rank_scale: str = "authors"
    regression_lambda: float = 2.0
    regression_lambda_final: float | None = None
    ess_start: float = 16.0
    ess_end: float = 4.0
    eta_grid: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    gate_z: float = 1.0
    accept_epsilon: float = 0.0
    probe_alpha_grid: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    sigma_down: float = 0.5
    patience: int = 2
    max_accepts: int = 2
    split_seed: int = 59
    local_seed_base: int = 1042
    # split-half analysis (our reconstruction)
    split_half_rank: int = 8
    split_half_splits: int = 20
    sketch_dims: int = 512
    # run
    dtype: str = "auto"
    device: str = "auto"
    seed: int = 0
    out: str | None = None

    def validate(self) -> None:
        """Every check that needs no model: run before anything is loaded."""
        from harness.backends.registry import backend_names
        from trainers.config import check_sources
        from trainers.perturb import NOISE_DTYPES

        checks = [
            (self.algorithm in ES_ALGORITHMS, f"algorithm must be one of {ES_ALGORITHMS}"),
            (self.population >= 2, "population must be at least 2"),
            (bool(self.sigmas) and all(s > 0 for s in self.sigmas), "sigmas must be positive"),
            (
                self.support_size >= 2 and self.max_tokens >= 1 and self.batch_size >= 1,
                "support_size >= 2, max_tokens and batch_size positive",
            ),
            (self.algorithm == "randopt" or self.probe_size >= 2, "CoRP needs probe_size >= 2"),
            (all(k >= 1 for k in self.top_k), "top_k values must be >= 1"),
            (self.noise_dtype in NOISE_DTYPES, f"noise_dtype must be one of {sorted(NOISE_DTYPES)}"),
            (self.workers >= 1 and self.noise_cache_gb >= 0, "workers >= 1 and noise_cache_gb >= 0"),
            (
                self.backend in (*backend_names(local_only=True), "ray"),
                "backend must be hf (CPU/GPU, worker processes), vllm (CPU or GPU, weights perturbed in place) or ray "
                "(hf engines on Ray actors; RAY_ADDRESS or a local cluster; workers = actors, 1 = one per CPU)",
            ),
            (
                all(0 <= q <= 1 for q in self.q_grid) and bool(self.beta_grid) and bool(self.s_grid),
                "q in [0, 1]; non-empty grids",
            ),
            (
                0 < self.isotropic_share < 1 and self.rounds >= 1 and self.local_population >= 2,
                "0 < isotropic_share < 1, rounds >= 1, local_population >= 2",
            ),
            (self.low_rank_scale in LOW_RANK_SCALES, f"low_rank_scale must be one of {LOW_RANK_SCALES}"),
            (
                set(self.holdout_gate_stages) <= {1, 2} and self.holdout_size >= 0 and self.holdout_z >= 0,
                "holdout_gate_stages is a subset of [1, 2]; holdout_size and holdout_z >= 0",
            ),
            (
                self.algorithm == "randopt" or not self.holdout_gate_stages or self.holdout_size >= 2,
                "the hold-out gate needs holdout_size >= 2 (holdout_gate_stages: [] is the authors' ungated release)",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"bad {self.algorithm} config: {message}")
        check_sources([self.train_source, self.test_source], f"{self.algorithm} data")


def build_es_config(algorithm: str, config: str | None, overrides: dict[str, Any]) -> ESConfig:
    from trainers.config import layered_settings

    if "max_steps" in overrides:
        raise UserError(f"--max-steps is for the policy-gradient trainers; {algorithm} is sized by --population")
    cfg = layered_settings(ESConfig, algorithm, config, {}, overrides, algorithm)
    cfg.validate()
    return cfg
