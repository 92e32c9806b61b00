"""``TrainConfig``: every setting of a policy-gradient run, typed, saved as ``config.yaml``.

Layering (later wins): these defaults < the algorithm module's ``DEFINING`` settings
< a preset (``--config cpu-demo`` / ``paper``) or a YAML file < ``--set key=value`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from rlvr.harness.backends.registry import backend_names
from rlvr.harness.errors import UserError
from rlvr.harness.run_config import Role, require, setting
from rlvr.harness.run_dir import default_run_path
from rlvr.harness.setting_blocks import (
    EngineSettings,
    GenerationSettings,
    ModelSettings,
    RunSettings,
    SamplingSettings,
    block_checks,
)
from rlvr.trainers.policy_gradient.config_checks import check_plateau_reading, check_sources, check_stages
from rlvr.trainers.policy_gradient.memory_settings import MemorySettings
from rlvr.trainers.policy_gradient.rule_help import advantage_help, aggregation_help, policy_loss_help

ALGORITHMS = ("grpo", "drgrpo", "dapo", "srpo")


def algorithm_module(name: str):
    """The readable module of an algorithm (formula in its docstring, ``DEFINING`` settings)."""
    from rlvr.trainers import algorithm_card

    if name not in ALGORITHMS:
        raise UserError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}")
    return algorithm_card(name)


#: every field names its role (rlvr.harness.run_config.Role), short, and the group --help lists it under
P, R, RES, N = Role.PROTOCOL, Role.RESULT, Role.RESUMABLE, Role.NOT_SCORED
DATA, ROLLOUT, SELECT, REWARD = "data and model", "rollout", "prompt selection", "reward and advantage"
LOSS, OPTIM, RUN = "policy loss", "optimiser", "run"


@dataclass
class TrainConfig(MemorySettings, RunSettings, EngineSettings, SamplingSettings, GenerationSettings, ModelSettings):
    """A run of one algorithm. Stages: a list of ``{name, sources, until_step | plateau_window}``
    (every key: ``rlvr.trainers.policy_gradient.curriculum.STAGE_KEYS``; a plateau may read a fixed probe).
    ``protocol`` settings are the objective: every key of an algorithm's ``DEFINING`` is one. The
    settings shared with ``rlvr eval`` and the populations come from ``rlvr.harness.setting_blocks``."""

    BACKENDS: ClassVar[tuple[str, ...]] = tuple(backend_names(local_only=True))
    SHOWN_DEFAULTS: ClassVar[dict[str, str]] = {"out": "results/train-<algorithm>"}

    algorithm: str = setting("drgrpo", help="the algorithm (rlvr train ALGO sets it)", role=P, group=DATA)
    stages: list[dict[str, Any]] = setting(
        default_factory=lambda: [{"name": "main", "sources": ["arith_train"]}],
        help="curriculum: [{name, sources, until_step | plateau_window, probe_size, ...}]; sources are benchmarks "
        "or local files; the last stage runs to the end",
        role=R,
        group=DATA,
    )
    eval_benchmarks: list[str] = setting(
        default_factory=lambda: ["arith"],
        help="held-out benchmarks (or files) evaluated every eval_every steps",
        role=R,
        group=DATA,
    )
    prompts_per_step: int = setting(8, help="prompts trained on per rollout step", role=R, group=ROLLOUT)
    group_size: int = setting(
        4, help="samples per prompt (G >= 2), the group its reward baseline is taken over", role=R, group=ROLLOUT
    )
    prompt_max_length: int | None = setting(
        None,
        help="prompts longer than this many tokens lose their beginning (verl's truncation: left; the end, with "
        "the template's assistant header, is kept)",
        role=R,
        group=ROLLOUT,
        shown_default="no limit",
    )
    rollout_batch_size: int = setting(32, help="hf backend: sequences per generation batch", role=R, group=ROLLOUT)
    selection: str = setting(
        "uniform",
        help="which prompts train: uniform, dynamic (DAPO: groups whose rewards are all equal are dropped and "
        "more generated) or history (SRPO: prompts solved in every sample leave at each epoch)",
        role=P,
        group=SELECT,
    )
    gen_prompts: int | None = setting(
        None,
        help="dynamic selection: prompts per generation batch",
        role=R,
        group=SELECT,
        shown_default="prompts_per_step",
    )
    max_gen_batches: int = setting(
        10, help="dynamic selection: generation batches per step at most (0 = no cap)", role=R, group=SELECT
    )
    dynamic_cap: str = setting(
        "train",
        help="dynamic selection when max_gen_batches runs out first: train (on the mixed groups found, fewer; "
        "logged as selection_cap_hit) or stop (a one-line error, as verl's DAPO recipe)",
        role=R,
        group=SELECT,
    )
    math_policy: str | None = setting(
        None,
        help="math verifier policy of every math problem, in rewards and evaluations alike (boxed_only / "
        "r1_format: Dr. GRPO's rewards under the Qwen-Math or no / the R1 template)",
        role=P,
        group=REWARD,
        shown_default="each data source's own",
    )
    reward_correct: float = setting(1.0, help="reward of a correct answer", role=P, group=REWARD)
    reward_wrong: float = setting(0.0, help="reward of a wrong or missing answer", role=P, group=REWARD)
    overlong: str = setting(
        "none",
        help="samples cut by max_tokens: none, zero (reward 0), mask (no loss) or soft (DAPO's penalty growing "
        "linearly to -1 over the last overlong_cache tokens)",
        role=P,
        group=REWARD,
    )
    overlong_cache: int = setting(
        0, help="overlong soft: tokens before max_tokens over which the penalty grows", role=R, group=REWARD
    )
    mask_unverifiable: bool = setting(
        True,
        help="leave samples whose verdict is a grader fault (sandbox_error, timeout, grader_error, bad_input) out "
        "of the loss and their group's statistics instead of teaching them as wrong",
        role=R,
        group=REWARD,
    )
    advantage: str = setting("grpo", help=advantage_help, role=P, group=REWARD)
    std_eps: float = setting(1e-8, help="epsilon added to the std of normalised advantages", role=R, group=REWARD)
    loss_agg: str = setting("seq_mean_token_mean", help=aggregation_help, role=P, group=LOSS)
    policy_loss: str = setting("ppo_clip", help=policy_loss_help, role=P, group=LOSS)
    tis_cap: float | None = setting(
        None,
        help="truncated importance sampling: each token's loss times min(pi_learner_old / pi_sampler, tis_cap); "
        "backend vllm only, null = off",
        role=R,
        group=LOSS,
    )
    loss_constant: float | None = setting(
        None,
        help="seq_mean_token_sum_norm: the constant token sums are divided by",
        role=R,
        group=LOSS,
        shown_default="max_tokens",
    )
    eps_low: float = setting(
        0.2, help="clip range below: ratios under 1 - eps_low are clipped (cispo: 1 = no bound)", role=P, group=LOSS
    )
    eps_high: float = setting(0.2, help="clip range above: ratios over 1 + eps_high are clipped", role=P, group=LOSS)
    clip_ratio_c: float | None = setting(
        None,
        help="dual-clip PPO (verl's clip_ratio_c): with a negative advantage a token's loss is at most -c*A; > 1, "
        "ppo_clip only, null = off",
        role=P,
        group=LOSS,
    )
    beta: float = setting(
        0.0, help="weight of the k3 KL penalty to the reference model (0: no reference model)", role=P, group=LOSS
    )
    mu: int = setting(1, help="passes over each rollout step's samples (PPO epochs)", role=R, group=LOSS)
    minibatch_size: int | None = setting(
        None,
        help="samples (rows, not prompts) per optimizer step",
        role=R,
        group=LOSS,
        shown_default="all of a rollout step",
    )
    minibatch_shuffle: str = setting(
        "rows",
        help="rows: a seeded permutation of each rollout step's rows before they are cut into minibatches (oat; "
        "every PPO epoch reuses it), none: in order (verl's actor)",
        role=R,
        group=LOSS,
    )
    micro_batch_size: int = setting(
        8, help="samples per forward/backward pass; gradients accumulate over a minibatch", role=R, group=LOSS
    )
    lr: float = setting(1e-6, help="AdamW learning rate, constant after warm-up", role=R, group=OPTIM)
    betas: list[float] = setting(
        default_factory=lambda: [0.9, 0.95],
        help="AdamW decay rates beta1, beta2 of the gradient and squared-gradient averages",
        role=R,
        group=OPTIM,
    )
    weight_decay: float = setting(
        0.0, help="AdamW decoupled weight decay: each step shrinks the weights by lr times this", role=R, group=OPTIM
    )
    adam_eps: float = setting(
        1e-8, help="AdamW epsilon added to the root of the squared-gradient average", role=R, group=OPTIM
    )
    grad_clip: float = setting(1.0, help="clip the global gradient norm to this (0 = no clipping)", role=R, group=OPTIM)
    warmup_steps: int = setting(
        0, help="rollout steps of linear lr warm-up (lr/warmup_steps at step 1; 0 = none)", role=R, group=OPTIM
    )
    max_steps: int = setting(100, help="rollout steps to run (a resume may extend a run)", role=RES, group=RUN)
    max_generations: int | None = setting(
        None, help="stop once this many samples were generated", role=RES, group=RUN, shown_default="no budget"
    )
    save_every: int = setting(
        0, help="checkpoint every N steps (0: only the last step and a spent budget)", role=N, group=RUN
    )
    save_optimizer: bool = setting(
        True,
        help="checkpoints carry the AdamW state (twice the weights again) so that --resume continues exactly; false "
        "keeps weights, RNG and schedule state (enough to evaluate, not to resume)",
        role=N,
        group=RUN,
    )
    eval_every: int = setting(0, help="evaluate eval_benchmarks every N steps (0 = never)", role=RES, group=RUN)
    eval_limit: int | None = setting(
        None, help="evaluations: the first N problems of each benchmark", role=R, group=RUN, shown_default="all"
    )
    eval_n: int = setting(1, help="evaluations: samples per problem (mean@n)", role=R, group=RUN)
    eval_temperature: float = setting(0.0, help="evaluations: sampling temperature (0 = greedy)", role=R, group=RUN)
    eval_top_p: float = setting(1.0, help="evaluations: nucleus sampling mass, in (0, 1]", role=R, group=RUN)
    compute_dtype: str = setting(
        "auto",
        help="forward/backward dtype: bfloat16 or float16 autocast over the master weights (float16 adds a loss "
        "scaler), or float32 / auto (= dtype)",
        role=R,
        group=RUN,
    )
    parallel: str = setting(
        "ddp",
        help="under torchrun: ddp (a full replica per rank) or fsdp (FSDP2 fully_shard, for models one device "
        "cannot hold); ignored in one process",
        role=R,
        group=RUN,
    )
    log_to: list[str] = setting(
        default_factory=lambda: ["jsonl"],
        help="where the per-step train log goes: jsonl, tensorboard, wandb",
        role=N,
        group=RUN,
    )

    def run_dir(self) -> Path:
        """``out``, else ``results/train-<algorithm>`` (``rlvr.harness.run_dir``)."""
        return Path(self.out) if self.out else default_run_path("train", self.algorithm)

    def validate(self, check_data: bool = True) -> None:
        """Every check that needs no model: run before anything is loaded (``check_data=False``:
        local data files may be absent, as for ``--plan``)."""
        from rlvr.harness.backends.registry import separate_engine
        from rlvr.sandbox.math.policy import PRESETS as MATH_PRESETS
        from rlvr.trainers.policy_gradient.advantages import ADVANTAGES, OVERLONG_MODES
        from rlvr.trainers.policy_gradient.losses import AGGREGATIONS, POLICY_LOSSES
        from rlvr.trainers.policy_gradient.selection import DYNAMIC_CAPS, SELECTIONS
        from rlvr.trainers.policy_gradient.update import MINIBATCH_SHUFFLES
        from rlvr.trainers.runtime.precision import check_precision

        checks = [
            (self.algorithm in ALGORITHMS, f"algorithm must be one of {ALGORITHMS}"),
            (self.advantage in ADVANTAGES, f"advantage must be one of {tuple(ADVANTAGES)}"),
            (self.loss_agg in AGGREGATIONS, f"loss_agg must be one of {tuple(AGGREGATIONS)}"),
            (self.policy_loss in POLICY_LOSSES, f"policy_loss must be one of {tuple(POLICY_LOSSES)}"),
            (self.tis_cap is None or self.tis_cap > 0, "tis_cap must be positive (e.g. 2.0) or null (off)"),
            (
                self.tis_cap is None or separate_engine(self.backend),
                "tis_cap corrects a separate sampler's numerics and needs backend: vllm (with hf the sampler is the "
                "learner); add --set backend=vllm or drop tis_cap",
            ),
            (
                self.clip_ratio_c is None or (self.clip_ratio_c > 1 and self.policy_loss == "ppo_clip"),
                "clip_ratio_c (dual clip) must be > 1 and needs policy_loss: ppo_clip, or null (off)",
            ),
            (self.minibatch_shuffle in MINIBATCH_SHUFFLES, f"minibatch_shuffle must be one of {MINIBATCH_SHUFFLES}"),
            (self.selection in SELECTIONS, f"selection must be one of {SELECTIONS}"),
            (self.dynamic_cap in DYNAMIC_CAPS, f"dynamic_cap must be one of {DYNAMIC_CAPS}"),
            (self.overlong in OVERLONG_MODES, f"overlong must be one of {OVERLONG_MODES}"),
            (
                self.overlong != "soft" or 0 < self.overlong_cache <= self.max_tokens,
                "overlong: soft needs 0 < overlong_cache <= max_tokens",
            ),
            (
                self.temperature > 0,
                "temperature must be positive: rollouts sample from softmax(logits / temperature), and the loss "
                "evaluates that policy (0 = greedy would give every sample of a group the same answer)",
            ),
            (
                self.eval_temperature >= 0 and 0 < self.eval_top_p <= 1,
                "eval_temperature must be >= 0 (0 = greedy) and eval_top_p in (0, 1]",
            ),
            (self.prompt_max_length is None or self.prompt_max_length >= 1, "prompt_max_length must be positive"),
            (self.group_size >= 2, "group_size must be at least 2 (group baselines need two samples)"),
            (
                self.prompts_per_step >= 1 and self.max_tokens >= 1 and self.mu >= 1 and self.micro_batch_size >= 1,
                "sizes must be positive",
            ),
            (self.max_steps >= 0, "max_steps must be >= 0"),
            (self.parallel in ("ddp", "fsdp"), "parallel must be ddp or fsdp"),
            (
                self.lr > 0
                and (0 <= self.eps_low < 1 or (self.policy_loss == "cispo" and self.eps_low == 1))
                and self.eps_high >= 0,
                "lr must be positive, 0 <= eps_low < 1 (cispo: <= 1, 1 = no lower bound) and eps_high >= 0",
            ),
            (
                self.selection != "dynamic" or self.gen_prompts is None or self.gen_prompts >= 1,
                "gen_prompts must be positive",
            ),
            (bool(self.stages), "stages must list at least one stage"),
            (
                self.math_policy is None or self.math_policy in MATH_PRESETS,
                f"math_policy must be one of {', '.join(MATH_PRESETS)}",
            ),
            (set(self.log_to) <= {"jsonl", "tensorboard", "wandb"}, "log_to entries: jsonl, tensorboard, wandb"),
        ]
        require(block_checks(self) + checks, "bad training config: ")
        check_precision(self.dtype, self.compute_dtype)
        self.validate_memory()
        check_stages(self.stages, check_data)
        check_plateau_reading(self.stages, self.selection)
        check_sources(self.eval_benchmarks, "eval_benchmarks", check_data)

    @property
    def normaliser(self) -> float:
        """Dr. GRPO's constant: the generation budget unless set explicitly."""
        return float(self.loss_constant or self.max_tokens)


def preset_names(algorithm: str) -> list[str]:
    folder = resources.files("rlvr.trainers") / "presets" / algorithm
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")) if folder.is_dir() else []


def load_preset(algorithm: str, name: str) -> dict[str, Any] | None:
    """A shipped preset by name (``trainers/presets/<algorithm>/<name>.yaml``), else None."""
    import yaml

    resource = resources.files("rlvr.trainers") / "presets" / algorithm / f"{name}.yaml"
    if not resource.is_file():
        return None
    return yaml.safe_load(resource.read_text(encoding="utf-8")) or {}


def layered_settings(
    cls: type, algorithm: str, config: str | None, defaults: dict[str, Any], overrides: dict[str, Any], label: str
):
    """``cls`` from defaults < preset or YAML file < overrides (typed, unknown keys refused in
    one line), shared by the policy-gradient and the gradient-free configs."""
    from rlvr.harness.config import build_settings, config_layer

    missing = f"no preset {config!r} for {algorithm} (shipped: {', '.join(preset_names(algorithm))}) and no such file"
    layer = config_layer(config, lambda name: load_preset(algorithm, name), missing)
    return build_settings(cls, [defaults, layer, overrides, {"algorithm": algorithm}], label)


def overridden_defining(algorithm: str, cfg: TrainConfig) -> list[str]:
    """``key: defining -> used`` for each of the algorithm's ``DEFINING`` settings the run changed
    (then the run is no longer that algorithm as published; the trainer logs a warning)."""
    defining = algorithm_module(algorithm).DEFINING
    return [f"{k}: {v!r} -> {getattr(cfg, k)!r}" for k, v in defining.items() if getattr(cfg, k) != v]


def changed_original_reward(algorithm: str, cfg: TrainConfig) -> list[str]:
    """``math_policy: original -> used`` when the algorithm's original code rewards the run's
    template with another policy (the module's ``ORIGINAL_REWARDS``; Dr. GRPO's by template)."""
    wanted = getattr(algorithm_module(algorithm), "ORIGINAL_REWARDS", {}).get(cfg.template)
    return [f"math_policy: {wanted!r} -> {cfg.math_policy!r}"] if wanted and cfg.math_policy != wanted else []


def build_config(algorithm: str, config: str | None, overrides: dict[str, Any], check_data: bool = True) -> TrainConfig:
    cfg = layered_settings(TrainConfig, algorithm, config, algorithm_module(algorithm).DEFINING, overrides, "training")
    cfg.validate(check_data)
    return cfg
