"""``ESConfig``: every setting of a gradient-free run (RandOpt, CoRP), typed, saved as ``config.yaml``.

Layering as for the policy-gradient trainers: these defaults (the authors' released
``scripts/run.sh`` values, docs/algorithms.md §4.2 and §5.7) < a preset (``cpu-demo``, ``paper``) or
a YAML file < ``--set key=value`` and ``--population N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rlvr.harness.backends.registry import backend_names
from rlvr.harness.errors import UserError
from rlvr.harness.run_config import Role, require, setting
from rlvr.harness.run_dir import default_run_path
from rlvr.harness.setting_blocks import GenerationSettings, ModelSettings, RunSettings, block_checks

ES_ALGORITHMS = ("randopt", "corp")
LOW_RANK_SCALES = ("authors", "trace")

#: every field names its role (rlvr.harness.run_config.Role), short
P, R, N = Role.PROTOCOL, Role.RESULT, Role.NOT_SCORED
DATA, POP, STAGE1, GATE, STAGE2, SPLIT, RUN = (
    "data and model",
    "population (RandOpt; CoRP Stage 0)",
    "CoRP Stage 1 merge",
    "CoRP hold-out gate (ours)",
    "CoRP Stage 2",
    "split-half analysis (our reconstruction)",
    "run",
)


@dataclass
class ESConfig(RunSettings, GenerationSettings, ModelSettings):
    """A RandOpt or CoRP run. Data: support = the first ``support_size`` items of
    ``train_source``, probe = the next ``probe_size`` (CoRP), hold-out gate = the next
    ``holdout_size`` (CoRP), test = ``test_source``. The four are disjoint (checked on load).

    CoRP's hold-out gate (ours, on in every preset; docs/algorithms.md §5.5 "held-out validation
    gate"): every candidate that would replace the current model — Stage 1's merge, and each
    Stage-2 round that the authors' gates (gate half of the support, then the probe) accept —
    is compared per problem with the current model on the hold-out split, which chose nothing
    (Stage 0 scores the support, Stage 1's grid and Stage 2's line search the probe, Stage 2's
    proposals the support halves). Accepted only when the paired lower confidence bound
    mean(Δ) − ``holdout_z``·sd(Δ)/√n of Δ_j = y′_j − y_j is > 0: ties, losses and gains the
    split cannot tell from noise are all rejected. ``holdout_gate_stages: []`` (with
    ``holdout_size: 0``) is the authors' release: Stage 1 applied unconditionally, Stage 2
    gated only on data it was partly chosen on."""

    BACKENDS: ClassVar[tuple[str, ...]] = (*backend_names(local_only=True), "ray")
    SHOWN_DEFAULTS: ClassVar[dict[str, str]] = {"out": "results/train-<algorithm>"}

    algorithm: str = setting("corp", help="randopt or corp (rlvr train ALGO sets it)", role=P, group=DATA)
    train_source: str = setting(
        "arith_train",
        help="training items, benchmark or local file: support, then probe, then hold-out, in file order",
        role=R,
        group=DATA,
    )
    test_source: str = setting(
        "arith", help="held-out test set of report.json (benchmark or local file)", role=R, group=DATA
    )
    support_size: int = setting(
        500,
        help="the first N training items: every perturbation is scored on them (Stage 2 splits them in halves)",
        role=R,
        group=DATA,
    )
    probe_size: int = setting(
        100,
        help="CoRP: the next N training items, on which Stage 1's merge and Stage 2's step length are chosen",
        role=R,
        group=DATA,
    )
    test_limit: int | None = setting(
        None, help="test on the first N items of test_source", role=R, group=DATA, shown_default="all"
    )
    batch_size: int = setting(32, help="prompts per generation batch of one scoring model copy", role=R, group=DATA)
    population: int = setting(
        500, help="perturbations N of the RandOpt / CoRP Stage-0 population (--population)", role=R, group=POP
    )
    sigmas: list[float] = setting(
        default_factory=lambda: [0.0005, 0.001, 0.002],
        help="noise scales: each member draws its sigma uniformly from this list",
        role=R,
        group=POP,
    )
    population_seed: int = setting(
        42,
        help="seed of the draw of the members' noise seeds and sigmas (and of the split-half halvings)",
        role=R,
        group=POP,
    )
    noise_dtype: str = setting(
        "bfloat16",
        help="dtype the Gaussian noise is drawn in: bfloat16 (the release) or float32 (about 3x faster on a CPU)",
        role=R,
        group=POP,
    )
    noise_cache_gb: float = setting(
        0.0,
        help="GiB of drawn full-model noise kept for reuse, a hard budget (results are the same with any size)",
        role=N,
        group=POP,
    )
    workers: int = setting(
        1,
        help="model copies scoring members in parallel: processes (hf) or Ray actors (ray; 1 = one per CPU)",
        role=N,
        group=POP,
    )
    top_k: list[int] = setting(
        default_factory=lambda: [1, 50],
        help="RandOpt: ensemble sizes K; the top K members by support score vote on each test answer",
        role=R,
        group="RandOpt",
    )
    q_grid: list[float] = setting(
        default_factory=lambda: [0.5, 0.7, 0.9],
        help="merge grid: elite quantiles q (members scoring at least the q-quantile are merged)",
        role=R,
        group=STAGE1,
    )
    beta_grid: list[float] = setting(
        default_factory=lambda: [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0],
        help="merge grid: inverse temperatures beta of the softmax(beta r) reward weights",
        role=R,
        group=STAGE1,
    )
    s_grid: list[float] = setting(
        default_factory=lambda: [0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
        help="Stage 1 step scales s of theta_1 = theta_0 + s m, chosen on the probe",
        role=R,
        group=STAGE1,
    )
    rank: int = setting(
        8,
        help="rank of the weighted SVD of a cloud of members (Stage 1 statistics, Stage 2 directions)",
        role=R,
        group=STAGE1,
    )
    holdout_size: int = setting(
        100,
        help="CoRP: training items after the probe that gate every model replacement and choose nothing",
        role=R,
        group=GATE,
    )
    holdout_z: float = setting(
        1.645, help="z of the gate's one-sided paired lower confidence bound (1.645: 95%)", role=R, group=GATE
    )
    holdout_gate_stages: list[int] = setting(
        default_factory=lambda: [1, 2],
        help="stages whose replacements the hold-out gate decides: [1, 2], one of them, or [] (the authors' release)",
        role=P,
        group=GATE,
    )
    rounds: int = setting(
        3, help="Stage 2 rounds at most (patience and max_accepts may end it sooner)", role=R, group=STAGE2
    )
    local_population: int = setting(100, help="candidates drawn around the centre per round", role=R, group=STAGE2)
    isotropic_share: float = setting(
        0.5,
        help="initial lambda_iso, the isotropic part's weight in a candidate, in (0, 1); updated every round",
        role=R,
        group=STAGE2,
    )
    low_rank_scale: str = setting(
        "authors",
        help="proposals' low-rank part: authors (sigma sqrt(1 - lambda_iso) sqrt(lambda_k) z_k, as released: about "
        "sigma^2 small) or trace (lambda_k / sum lambda: it carries share 1 - lambda_iso of the squared norm)",
        role=P,
        group=STAGE2,
    )
    regression_lambda: float = setting(
        2.0,
        help="lambda of the constructive score (F - lambda G)/n in round 1: the price of a broken problem",
        role=R,
        group=STAGE2,
    )
    regression_lambda_final: float | None = setting(
        None,
        help="lambda in the last round (linear in between)",
        role=R,
        group=STAGE2,
        shown_default="regression_lambda",
    )
    ess_start: float = setting(
        16.0, help="effective sample size the search weights target in round 1", role=R, group=STAGE2
    )
    ess_end: float = setting(
        4.0, help="effective sample size targeted in the last round (geometric in between)", role=R, group=STAGE2
    )
    eta_grid: list[float] = setting(
        default_factory=lambda: [0.5, 1.0, 2.0],
        help="proposal step lengths, as multiples of the last accepted step",
        role=R,
        group=STAGE2,
    )
    gate_z: float = setting(1.0, help="z of the authors' paired lower bounds (gate half, probe)", role=R, group=STAGE2)
    accept_epsilon: float = setting(
        0.0, help="the probe accuracy must beat the centre's by at least this (a fraction)", role=R, group=STAGE2
    )
    probe_alpha_grid: list[float] = setting(
        default_factory=lambda: [0.5, 1.0, 2.0],
        help="probe line search: multiples of the chosen proposal's step",
        role=R,
        group=STAGE2,
    )
    sigma_down: float = setting(0.5, help="sigma is multiplied by this after a rejected round", role=R, group=STAGE2)
    patience: int = setting(2, help="consecutive rejected rounds that end Stage 2", role=R, group=STAGE2)
    max_accepts: int = setting(2, help="accepted rounds that end Stage 2", role=R, group=STAGE2)
    split_seed: int = setting(
        59, help="seed of the split of the support into selection and gate halves", role=R, group=STAGE2
    )
    local_seed_base: int = setting(
        1042, help="round r draws its candidates from default_rng(local_seed_base + r)", role=R, group=STAGE2
    )
    split_half_rank: int = setting(
        8, help="rank r of the reward-carrying subspace compared between random halves", role=R, group=SPLIT
    )
    split_half_splits: int = setting(
        20, help="random halvings of the population the overlap is averaged over", role=R, group=SPLIT
    )
    sketch_dims: int = setting(
        512,
        help="length of the fixed noise sketch (each seed's first N noise values) the analysis compares members by",
        role=R,
        group=SPLIT,
    )

    def run_dir(self) -> Path:
        """``out``, else ``results/train-<algorithm>`` (``rlvr.harness.run_dir``)."""
        return Path(self.out) if self.out else default_run_path("train", self.algorithm)

    def validate(self) -> None:
        """Every check that needs no model: run before anything is loaded."""
        from rlvr.trainers.policy_gradient.config import check_sources
        from rlvr.trainers.populations.perturb import NOISE_DTYPES

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
        require(block_checks(self) + checks, f"bad {self.algorithm} config: ")
        check_sources([self.train_source, self.test_source], f"{self.algorithm} data")


def build_es_config(algorithm: str, config: str | None, overrides: dict[str, Any]) -> ESConfig:
    from rlvr.trainers.policy_gradient.config import layered_settings

    if "max_steps" in overrides:
        raise UserError(f"--max-steps is for the policy-gradient trainers; {algorithm} is sized by --population")
    cfg = layered_settings(ESConfig, algorithm, config, {}, overrides, algorithm)
    cfg.validate()
    return cfg
