"""``TrainConfig``: every setting of a policy-gradient run, typed, saved as ``config.yaml``.

Layering (later wins): these defaults < the algorithm module's ``DEFINING`` settings
< a preset (``--config cpu-demo`` / ``paper``) or a YAML file < ``--set key=value`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from harness.errors import UserError

ALGORITHMS = ("grpo", "drgrpo", "dapo", "srpo")


def algorithm_module(name: str):
    """The readable module of an algorithm (formula in its docstring, ``DEFINING`` settings)."""
    import importlib

    if name not in ALGORITHMS:
        raise UserError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}")
    return importlib.import_module(f"trainers.{name}")


@dataclass
class TrainConfig:
    """A run of one algorithm. Stages: a list of ``{name, sources, until_step | plateau_window}``
    (every key: ``trainers.curriculum.STAGE_KEYS``; a plateau may read a fixed probe)."""

    algorithm: str = "drgrpo"
    model: str | None = None
    template: str = "chat"
    stages: list[dict[str, Any]] = field(default_factory=lambda: [{"name": "main", "sources": ["arith_train"]}])
    eval_benchmarks: list[str] = field(default_factory=lambda: ["arith"])
    # rollout
    prompts_per_step: int = 8
    group_size: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    rollout_batch_size: int = 32
    #: ``hf`` samples with the policy itself; ``vllm`` with an in-process vLLM engine (CPU or GPU)
    #: that gets the learner's weights after every update
    backend: str = "hf"
    #: vllm: context of the engine (default: the model's own positions)
    max_model_len: int | None = None
    #: vllm on a CPU: GiB of RAM for the KV cache; on a GPU: fraction of its memory
    kv_cache_gb: float = 1.0
    gpu_memory_utilization: float = 0.35
    # prompt selection
    selection: str = "uniform"
    gen_prompts: int | None = None
    max_gen_batches: int = 10
    # reward and advantage
    #: Math verifier policy for every math problem, in rewards and evaluations alike (None: each
    #: data source's own, ``math`` for local files). ``boxed_only`` / ``r1_format`` are Dr.
    #: GRPO's rewards under the Qwen-Math / no and R1 templates (``sandbox.math.extract``).
    math_policy: str | None = None
    reward_correct: float = 1.0
    reward_wrong: float = 0.0
    overlong: str = "none"
    overlong_cache: int = 0
    #: A verdict that says nothing about the answer (the grader failed: ``sandbox_error``,
    #: ``timeout``, ``grader_error``, ``bad_input``) is left out of the loss and of its group's
    #: statistics instead of being taught as a wrong answer. The train log counts them.
    mask_unverifiable: bool = True
    advantage: str = "grpo"
    std_eps: float = 1e-8
    # policy loss
    loss_agg: str = "seq_mean_token_mean"
    #: ``ppo_clip`` (token ratio, PPO/GRPO), ``gspo`` / ``gspo_token`` (sequence ratio), ``cispo``
    #: (clipped stop-gradient weight on log π); ``trainers.losses.POLICY_LOSSES``
    policy_loss: str = "ppo_clip"
    #: truncated importance sampling: each token's loss times min(π_learner_old/π_sampler, tis_cap)
    #: (``backend: vllm`` only; None = off)
    tis_cap: float | None = None
    loss_constant: float | None = None
    eps_low: float = 0.2
    eps_high: float = 0.2
    beta: float = 0.0
    mu: int = 1
    minibatch_size: int | None = None
    micro_batch_size: int = 8
    # optimiser
    lr: float = 1e-6
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0
    # run
    max_steps: int = 100
    max_generations: int | None = None
    seed: int = 0
    save_every: int = 0
    #: Checkpoints carry the AdamW state (twice the weights again) so that ``--resume`` continues
    #: exactly; ``false`` keeps only weights, RNG and schedule state (enough to evaluate, not to resume).
    save_optimizer: bool = True
    eval_every: int = 0
    eval_limit: int | None = None
    eval_n: int = 1
    eval_temperature: float = 0.0
    #: master weights and optimizer state (``float32`` for any real run; ``bfloat16`` parameters
    #: under AdamW are refused: lr·update rounds away); ``auto`` = float32 on every device
    dtype: str = "auto"
    #: forward/backward compute: ``bfloat16`` / ``float16`` autocast (FSDP: ``MixedPrecisionPolicy``)
    #: over the master weights, or ``float32`` / ``auto`` (= the master dtype)
    compute_dtype: str = "auto"
    device: str = "auto"
    #: data parallelism under ``torchrun``: ``ddp`` (a full replica per rank) or ``fsdp`` (FSDP2
    #: ``fully_shard``, for models that do not fit one device); ignored in a single process
    parallel: str = "ddp"
    log_to: list[str] = field(default_factory=lambda: ["jsonl"])
    out: str | None = None

    def validate(self, check_data: bool = True) -> None:
        """Every check that needs no model: run before anything is loaded (``check_data=False``:
        local data files may be absent, as for ``--plan``)."""
        from harness.backends.registry import backend_names, separate_engine
        from sandbox.math.policy import PRESETS as MATH_PRESETS
        from trainers.advantages import ADVANTAGE_MODES, OVERLONG_MODES
        from trainers.losses import AGGREGATIONS, POLICY_LOSSES
        from trainers.precision import check_precision
        from trainers.selection import SELECTIONS

        local = backend_names(local_only=True)
        checks = [
            (self.algorithm in ALGORITHMS, f"algorithm must be one of {ALGORITHMS}"),
            (self.advantage in ADVANTAGE_MODES, f"advantage must be one of {ADVANTAGE_MODES}"),
            (self.loss_agg in AGGREGATIONS, f"loss_agg must be one of {AGGREGATIONS}"),
            (self.policy_loss in POLICY_LOSSES, f"policy_loss must be one of {POLICY_LOSSES}"),
            (self.tis_cap is None or self.tis_cap > 0, "tis_cap must be positive (e.g. 2.0) or null (off)"),
            (
                self.tis_cap is None or separate_engine(self.backend),
                "tis_cap corrects a separate sampler's numerics and needs backend: vllm (with hf the sampler is the "
                "learner); add --set backend=vllm or drop tis_cap",
            ),
            (self.selection in SELECTIONS, f"selection must be one of {SELECTIONS}"),
            (self.overlong in OVERLONG_MODES, f"overlong must be one of {OVERLONG_MODES}"),
            (
                self.overlong != "soft" or 0 < self.overlong_cache <= self.max_tokens,
                "overlong: soft needs 0 < overlong_cache <= max_tokens",
            ),
            (self.group_size >= 2, "group_size must be at least 2 (group baselines need two samples)"),
            (
                self.prompts_per_step >= 1 and self.max_tokens >= 1 and self.mu >= 1 and self.micro_batch_size >= 1,
                "sizes must be positive",
            ),
            (self.max_steps >= 0, "max_steps must be >= 0"),
            (self.backend in local, f"backend must be {' or '.join(local)}"),
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
        for ok, message in checks:
            if not ok:
                raise UserError(f"bad training config: {message}")
        check_precision(self.dtype, self.compute_dtype)
        check_stages(self.stages, check_data)
        check_plateau_reading(self.stages, self.selection)
        check_sources(self.eval_benchmarks, "eval_benchmarks", check_data)

    @property
    def normaliser(self) -> float:
        """Dr. GRPO's constant: the generation budget unless set explicitly."""
        return float(self.loss_constant or self.max_tokens)


def check_stages(stages: list[dict[str, Any]], check_data: bool = True) -> None:
    """Stage dicts are well formed and every data source exists (a benchmark or a local file)."""
    from trainers.curriculum import Stage

    for data in stages:
        if not isinstance(data, dict):
            raise UserError(
                f"bad training config: each stage is a mapping {{name, sources, until_step, ...}}, got {data!r}"
            )
        try:
            stage = Stage.from_dict(data)
        except ValueError as exc:
            raise UserError(f"bad training config: {exc}") from None
        check_sources(stage.sources, f"stage {stage.name!r}", check_data)


def check_plateau_reading(stages: list[dict[str, Any]], selection: str) -> None:
    """A reward plateau under ``history`` or ``dynamic`` selection needs a probe: both change
    what the trained batch's reward measures (``trainers.curriculum``, "What a plateau reads")."""
    from trainers.curriculum import Stage

    if selection not in ("history", "dynamic"):
        return
    for data in stages:
        stage = Stage.from_dict(data)
        if stage.plateau_window and stage.probe_size is None:
            raise UserError(
                f"bad training config: stage {stage.name!r} switches on a reward plateau, but {selection} selection "
                "changes what the batch reward measures (history resampling drops solved prompts, so the pool's "
                "reward falls by itself); give the stage a fixed probe, e.g. probe_size: 128, probe_every: 10"
            )


def check_sources(names: Sequence[str], where: str, check_data: bool = True) -> None:
    """Each name is a registered benchmark or an existing local data file (else one line saying
    which; ``check_data=False`` lets a local file be absent)."""
    from harness.benchmarks.sources import local_path

    for name in names:
        try:
            path = local_path(name)
        except UserError as exc:
            raise UserError(f"bad training config: {where}: {exc}") from None
        if check_data and path is not None and not path.exists():
            raise UserError(
                f"bad training config: {where} names {name}, which does not exist (put the data there, or name "
                "yours with "
                f'--set "stages=[{{name: main, sources: [FILE.jsonl]}}]" / --set train_source=FILE.jsonl)'
            )


def preset_names(algorithm: str) -> list[str]:
    folder = resources.files("trainers") / "presets" / algorithm
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")) if folder.is_dir() else []


def load_preset(algorithm: str, name: str) -> dict[str, Any] | None:
    """A shipped preset by name (``trainers/presets/<algorithm>/<name>.yaml``), else None."""
    import yaml

    resource = resources.files("trainers") / "presets" / algorithm / f"{name}.yaml"
    if not resource.is_file():
        return None
    return yaml.safe_load(resource.read_text(encoding="utf-8")) or {}


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``--set key=value`` pairs, values read as YAML (numbers, lists, booleans)."""
    import yaml

    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise UserError(f"--set {pair!r} is not KEY=VALUE (e.g. --set lr=2e-5)")
        key, value = pair.split("=", 1)
        try:
            out[key.strip().replace("-", "_")] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise UserError(
                f"--set {key.strip()}: the value is not valid YAML ({getattr(exc, 'problem', exc)}); quote it in the "
                "shell, e.g. "
                f'--set "{key.strip()}=[1, 2]"'
            ) from None
    return out


def save_settings(out: Path, cfg: Any) -> None:
    """The resolved config beside the results, as ``config.yaml`` (read back by
    ``settings_differing_from_saved``)."""
    import dataclasses

    import yaml

    (out / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))


def settings_differing_from_saved(out: Path, cfg: Any, ignore: Sequence[str] = ("out",)) -> list[str]:
    """Fields of ``cfg`` (a config dataclass) whose value differs from the ``config.yaml`` saved in
    ``out`` (an absent file counts as empty): how a run directory is matched to settings."""
    import dataclasses

    import yaml

    saved = out / "config.yaml"
    old = (yaml.safe_load(saved.read_text(encoding="utf-8")) or {}) if saved.is_file() else {}
    current = dataclasses.asdict(cfg)
    return sorted(k for k in current if k not in ignore and old.get(k) != current[k])


def layered_settings(
    cls: type, algorithm: str, config: str | None, defaults: dict[str, Any], overrides: dict[str, Any], label: str
):
    """``cls`` from defaults < preset or YAML file < overrides (typed, unknown keys refused in
    one line), shared by the policy-gradient and the gradient-free configs."""
    from harness.config import build_settings, read_yaml

    layer: dict[str, Any] = {}
    if config:
        preset = load_preset(algorithm, config)
        if preset is None and not Path(config).exists():
            raise UserError(
                f"no preset {config!r} for {algorithm} (shipped: {', '.join(preset_names(algorithm))}) and no such file"
            )
        layer = preset if preset is not None else read_yaml(config)
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
