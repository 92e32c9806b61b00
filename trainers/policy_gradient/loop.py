"""The training loop shared by GRPO, Dr. GRPO, DAPO and SRPO: select prompts -> roll out ->
grade (sandbox, via the harness) -> advantages -> μ clipped updates -> log -> checkpoint.

The algorithms differ only in settings (each module's ``DEFINING`` dict): advantage
mode, loss aggregation, prompt selection, overlong handling, rewards, clip range and KL.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rlvr.harness.backends.registry import separate_engine
from rlvr.harness.benchmarks.problems import with_math_policy
from rlvr.harness.benchmarks.sources import resolve_source, source_instructions
from rlvr.harness.errors import UserError, note_kept
from rlvr.harness.grading import EvalGrader
from rlvr.harness.run_dir import RunDir
from rlvr.harness.templates import load_template
from rlvr.sandbox.verdict import UNVERIFIABLE_REASONS
from rlvr.trainers.policy_gradient.advantages import compute_advantages, shape_rewards, zero_variance_fraction
from rlvr.trainers.policy_gradient.config import TrainConfig, changed_original_reward, overridden_defining
from rlvr.trainers.policy_gradient.curriculum import Curriculum, Stage, probe_set
from rlvr.trainers.policy_gradient.live_progress import RunProgress, kept_checkpoint, step_line
from rlvr.trainers.policy_gradient.rollout import HFRollout, RolloutWorker
from rlvr.trainers.policy_gradient.selection import make_selection, stage_seed
from rlvr.trainers.policy_gradient.train_state import TrainState
from rlvr.trainers.policy_gradient.update import (
    UPDATE_METRICS,
    batch_logprobs,
    minibatch_order,
    old_logp_from_update,
    pack,
    policy_update,
)
from rlvr.trainers.runtime import checkpoint_retention, distributed, distributed_checkpoint
from rlvr.trainers.runtime.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint, set_rng_state
from rlvr.trainers.runtime.precision import Precision, compute_dtype_name, master_dtype_name
from rlvr.trainers.runtime.telemetry import LOG_FILE, TrainLog, rollout_metrics


def stage_pool(stage: Stage, math_policy: str | None = None) -> list:
    """The stage's problems, graded under ``math_policy`` when the run sets one."""
    return with_math_policy([p for source in stage.sources for p in resolve_source(source).problems], math_policy)


def _prepare_out(cfg: TrainConfig, resume: bool) -> tuple[RunDir, Path | None]:
    """The run directory and the checkpoint to continue from (None: a fresh run), under the one
    resume rule (``rlvr.harness.run_dir``): the same command continues the run it holds."""
    run = RunDir(cfg.run_dir(), lambda path: latest_checkpoint(path) is not None, "checkpoint")
    return run, latest_checkpoint(run.path) if run.open(cfg, resume) else None


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _load_policy(cfg: TrainConfig, path: str, device: str | None = None, frozen: bool = False):
    """The policy in float32 masters, or (``frozen``) the KL reference in the compute dtype: it
    never steps, so it needs no master copy (half the memory under bfloat16 compute)."""
    from rlvr.harness.backends.hf import load_model

    dtype = compute_dtype_name(cfg) if frozen else master_dtype_name(cfg)
    model, tokenizer, device = load_model(path, dtype, device or cfg.device)
    tokenizer.padding_side = "left"
    model.train()
    if cfg.gradient_checkpointing and not frozen:  # non-reentrant: works under DDP / FSDP2 and autocast
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if distributed.context() and cfg.parallel == "fsdp":  # FSDP2's MixedPrecisionPolicy casts instead
        return model, tokenizer, device
    return Precision(cfg, device).wrap(model), tokenizer, device  # every forward under the compute dtype


def _lr_schedule(warmup_steps: int):
    return lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0


def warn_overlap(cfg: TrainConfig) -> None:
    """Warn (stderr) when a stage's training data contains problems of a held-out benchmark the
    run evaluates on (``rlvr contamination``'s tests); the run goes on, the numbers would not mean much."""
    from rlvr.harness.contamination import contamination_report

    held_out = [p for name in cfg.eval_benchmarks for p in resolve_source(name).problems]
    sources = [src for stage in cfg.stages for src in Stage.from_dict(stage).sources]
    trained = [p for src in sources for p in resolve_source(src).problems]
    rows = [{"question": p.question, "answer": p.gold.get("answer")} for p in trained]
    report, _ = contamination_report(rows, held_out, list(dict.fromkeys(p.benchmark for p in held_out)), examples=1)
    for name, entry in report["benchmarks"].items():
        if entry["contaminated_problems"]:
            print(
                f"warning: the training data contains {entry['contaminated_problems']} of {entry['problems']} "
                f"problems of held-out {name} (e.g. {entry['contaminated_problem_ids'][0]}); see "
                f"`rlvr contamination --train FILE --benchmarks {name}`",
                file=sys.stderr,
            )


def _stage_selection(cfg: TrainConfig, curriculum: Curriculum):
    """The prompt selection of the current stage, seeded per stage (its state, seed included,
    is saved in every checkpoint and restored on resume). A new stage starts from its whole
    pool: prompts History Resampling dropped in an earlier stage return (``trainers/policy_gradient/srpo.py``)."""
    return make_selection(
        cfg.selection,
        stage_pool(curriculum.stage, cfg.math_policy),
        stage_seed(cfg.seed, curriculum.index),
        gen_prompts=cfg.gen_prompts,
        max_gen_batches=cfg.max_gen_batches,
        dynamic_cap=cfg.dynamic_cap,
    )


def _stage_probe(cfg: TrainConfig, curriculum: Curriculum) -> list:
    """The current stage's fixed probe prompts (none when it declares no ``probe_size``)."""
    stage = curriculum.stage
    if stage.probe_size is None:
        return []
    return probe_set(stage_pool(stage, cfg.math_policy), stage.probe_size, stage_seed(cfg.seed, curriculum.index))


def read_probe(cfg: TrainConfig, worker: RolloutWorker, probe: list, step: int) -> dict[str, Any]:
    """The probe's reward after step ``step``'s update: G samples per probe prompt, shaped as
    ``reward_mean`` is. Rollout key ``-step`` (training keys are positive), so its samples are
    seeded apart from every training rollout; its generations stay out of the step's count."""
    before = worker.generations
    groups = worker(probe, -step)
    times = worker.take_times()
    return {
        "probe_reward": float(shaped_rewards(cfg, groups)[0].mean()),
        "probe_generations": worker.generations - before,
        "time_probe": round(times["generate"] + times["score"], 3),
    }


def run_training(cfg: TrainConfig, resume: bool = False, progress: bool = True) -> Path:
    from rlvr.harness.models import resolve_model

    ctx, main = distributed.context(), distributed.is_main()  # ctx: under torchrun (trainers/runtime/distributed.py)
    run, checkpoint = _prepare_out(cfg, resume)
    out = run.path
    if ctx:
        ctx.barrier()  # every rank has read the run directory before rank 0 writes to it
    if main:
        run.save_config(cfg)
        warn_overlap(cfg)
    changes = overridden_defining(cfg.algorithm, cfg) + changed_original_reward(cfg.algorithm, cfg)
    for change in changes if main else []:
        print(
            f"warning: {cfg.algorithm} run with a defining setting changed ({change}): a variant, not {cfg.algorithm} "
            "as published",
            file=sys.stderr,
        )
    _seed_everything(cfg.seed)
    # a sharded checkpoint without the HF export: the base model, then DCP loads the weights
    exported = checkpoint is not None and (checkpoint / "config.json").exists()
    model_path = str(checkpoint) if exported else resolve_model(cfg.model)[0]
    model, tokenizer, device = _load_policy(cfg, model_path, ctx and ctx.load_device())
    learner = ctx.wrap(model) if ctx else model  # DDP around it, or the model sharded in place (FSDP)
    device = ctx.device if ctx else device
    reference = None
    if cfg.beta > 0:
        reference, _, _ = _load_policy(cfg, resolve_model(cfg.model)[0], ctx and ctx.load_device(), frozen=True)
        reference.eval().requires_grad_(False)
        reference = ctx.wrap_frozen(reference) if ctx else reference
    optimizer = torch.optim.AdamW(
        learner.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.adam_eps, weight_decay=cfg.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_schedule(cfg.warmup_steps))
    precision = Precision(cfg, device)
    curriculum = Curriculum([Stage.from_dict(s) for s in cfg.stages])
    selection, probe = _stage_selection(cfg, curriculum), _stage_probe(cfg, curriculum)
    start, generations_total = 0, 0
    if checkpoint:
        resumed = load_trainer_state(checkpoint)
        if not distributed_checkpoint.has_optimizer(resumed):
            raise UserError(
                f"--resume: {checkpoint} has no optimizer state (trained with save_optimizer: false); start a new --out"
            )
        distributed_checkpoint.load_optimizer(resumed, checkpoint, learner, optimizer)  # a sharded one: the weights too
        scheduler.load_state_dict(resumed["scheduler"])
        precision.load_state_dict(resumed.get("precision"))
        curriculum.load_state_dict(resumed["curriculum"])
        lookup = {p.id: p for s in curriculum.stages for p in stage_pool(s, cfg.math_policy)}
        selection = _stage_selection(cfg, curriculum)
        selection.load_state_dict(resumed["selection"], lookup)
        probe = _stage_probe(cfg, curriculum)
        set_rng_state(distributed_checkpoint.rank_rng(resumed))
        start, generations_total = resumed["step"], resumed["generations_total"]
        if main:
            print(f"resuming {out} from {checkpoint.name}: {start} steps done, {cfg.max_steps - start} to go")
    grader = EvalGrader()
    template = load_template(cfg.template)
    instructions = source_instructions(name for s in curriculum.stages for name in s.sources)
    sampler = _make_sampler(cfg, model, tokenizer, template, instructions)
    worker = RolloutWorker(sampler, grader, cfg.group_size, logprobs=separate_engine(cfg.backend))
    if ctx:  # this rank generates its share of whole groups; every rank sees every group
        worker = ctx.rollout(worker, model, unshard=not separate_engine(cfg.backend))
    state = TrainState(
        model,
        reference,
        optimizer,
        scheduler,
        precision,
        tokenizer,
        device,
        curriculum,
        selection,
        probe,
        worker,
        sampler,
        generations_total,
    )
    log = (
        TrainLog(out, cfg.log_to, dataclasses.asdict(cfg), resume=checkpoint is not None, keep_until=start)
        if main
        else distributed.NullLog()
    )
    voice = RunProgress(start + 1, cfg.max_steps, enabled=progress and main)
    try:
        voice.start()
        for step in range(start + 1, cfg.max_steps + 1):
            reason = curriculum.should_switch()
            if reason:
                stage = curriculum.advance(step, reason)
                state.selection, state.probe = _stage_selection(cfg, curriculum), _stage_probe(cfg, curriculum)
                if main:
                    print(f"step {step}: stage -> {stage.name} ({reason})")
            metrics = train_step(cfg, step, state)
            scheduler.step()
            state.generations_total += metrics["generations"]
            curriculum.record(
                metrics["reward_mean"] if metrics["reward_mean"] is not None else 0.0, metrics["generations"]
            )
            metrics.update(probe_reward=None, probe_generations=0, time_probe=0.0)  # the same keys every line
            if curriculum.probe_due():
                metrics.update(read_probe(cfg, worker, state.probe, step))
                curriculum.record_probe(metrics["probe_reward"])
            metrics.update(
                generations_total=state.generations_total, stage=curriculum.stage.name, lr=scheduler.get_last_lr()[0]
            )
            budget_spent = cfg.max_generations is not None and state.generations_total >= cfg.max_generations
            last = step == cfg.max_steps or budget_spent
            saved = None
            if cfg.eval_every and step % cfg.eval_every == 0:
                saved = _save(out, step, state, cfg.save_optimizer, True)  # the evaluation reads the HF export
                if main:  # (under torchrun rank 0 alone evaluates)
                    metrics.update(_evaluate(cfg, out, step, saved, model, sampler, device))
            log.write(step, metrics)
            voice.step_done(step, step_line(step, cfg.max_steps, metrics))
            due = (cfg.save_every and step % cfg.save_every == 0) or last
            if due and saved is None:  # an evaluated step is already saved
                saved = _save(out, step, state, cfg.save_optimizer, last or cfg.hf_export == "every_checkpoint")
            if saved is not None and main:  # disk: the last keep_checkpoints (+ the best), one optimizer state
                checkpoint_retention.record_score(out, saved, metrics, cfg.keep_best)
                checkpoint_retention.prune(out, cfg.keep_checkpoints, cfg.keep_best)
            if budget_spent:
                if main:
                    print(f"rollout budget of {cfg.max_generations} generations spent at step {step}")
                break
    except KeyboardInterrupt as exc:
        note_kept(exc, kept_checkpoint(latest_checkpoint(out) if main else None, out / LOG_FILE))
        raise
    finally:
        voice.close()
        log.close()
        grader.close()
    return out


def _make_sampler(cfg: TrainConfig, model, tokenizer, template, instructions):
    if separate_engine(cfg.backend):  # vLLM: its own engine, weights synced after each update
        from rlvr.trainers.policy_gradient.vllm_rollout import VLLMRollout

        return VLLMRollout(model, tokenizer, template, instructions, cfg)
    return HFRollout(
        model,
        tokenizer,
        template,
        instructions,
        cfg.max_tokens,
        cfg.temperature,
        cfg.top_p,
        cfg.rollout_batch_size,
        cfg.seed,
        cfg.prompt_max_length,
    )


def shaped_rewards(cfg: TrainConfig, groups: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards and loss mask of the groups' samples: correctness and overlong shaping."""
    return shape_rewards(
        [ok for g in groups for ok in g.correct],
        [len(c) for g in groups for c in g.completion_ids],
        [t for g in groups for t in g.truncated],
        cfg.overlong,
        cfg.max_tokens,
        cfg.overlong_cache,
        (cfg.reward_correct, cfg.reward_wrong),
    )


def train_step(cfg: TrainConfig, step: int, state: TrainState) -> dict[str, Any]:
    """One rollout step: select and roll out prompts, shape rewards into advantages, update the policy."""
    model, worker, sampler, device = state.model, state.worker, state.sampler, state.device
    generated_before = worker.generations
    seen: list = []
    rollout = lambda problems, key: seen.extend(groups := worker(problems, key)) or groups  # noqa: E731
    groups, selection_stats = state.selection.next_groups(rollout, cfg.prompts_per_step, step)
    times = worker.take_times()
    if hasattr(sampler, "sleep"):  # vLLM on a GPU: its memory to the learner until the sync wakes it
        sampler.sleep()
    metrics: dict[str, Any] = {
        **rollout_metrics(seen, groups),
        **{f"selection_{k}": v for k, v in selection_stats.items()},
    }
    metrics["generations"] = worker.generations - generated_before
    metrics["tokens_per_s"] = round(
        sum(len(c) for g in seen for c in g.completion_ids) / max(times["generate"], 1e-9), 1
    )
    metrics.update(
        dict.fromkeys(UPDATE_METRICS), optimizer_steps=0, reward_mean=None, unverifiable=0, masked_unverifiable=0
    )
    t0 = time.perf_counter()
    if groups:
        rewards, keep = shaped_rewards(cfg, groups)
        verifiable = torch.tensor(
            [reason not in UNVERIFIABLE_REASONS for g in groups for reason in g.reasons], dtype=torch.float32
        )
        valid = verifiable if cfg.mask_unverifiable else None
        if valid is not None:
            keep = keep * valid
        completions = [c for g in groups for c in g.completion_ids]
        trained_tokens = torch.tensor([len(c) for c in completions], dtype=torch.float32) * keep
        advantages = compute_advantages(rewards, cfg.group_size, cfg.advantage, cfg.std_eps, valid, trained_tokens)
        metrics["unverifiable"] = int((verifiable == 0).sum())
        metrics["masked_unverifiable"] = metrics["unverifiable"] if valid is not None else 0
        prompts = [g.prompt_ids for g in groups for _ in g.completion_ids]
        with_logp = all(g.sampler_logp is not None for g in groups)
        sampled = [lp for g in groups for lp in g.sampler_logp] if with_logp else None
        order = minibatch_order(cfg.minibatch_shuffle, cfg.seed, step, len(completions))
        prompts, completions = [prompts[i] for i in order], [completions[i] for i in order]
        advantages, keep = advantages[order], keep[order]
        sampled = [sampled[i] for i in order] if sampled is not None else None
        ctx = distributed.context()
        shard = ctx.shard(len(groups)) if ctx else None  # this rank's rows, minibatch by minibatch
        if shard:
            prompts, completions, advantages, keep, sampled = shard.take(
                prompts, completions, advantages, keep, sampled
            )
        batch = pack(prompts, completions, advantages, keep, state.tokenizer.pad_token_id, device, sampled)
        passes = {
            "chunk": cfg.logits_chunk,
            "token_budget": cfg.micro_token_budget,
            "shard": shard,
            "temperature": cfg.temperature,
        }
        rows = batch.input_ids.shape[0]
        minibatches = len(shard.minibatches) if shard else -(-rows // (cfg.minibatch_size or rows))
        if not old_logp_from_update(cfg.mu, cfg.tis_cap, minibatches):
            batch.old_logp = batch_logprobs(model, batch, cfg.micro_batch_size, **passes)
        if state.reference is not None:
            batch.ref_logp = batch_logprobs(state.reference, batch, cfg.micro_batch_size, **passes)
        learner = ctx.train_model if ctx else model
        metrics.update(policy_update(learner, state.optimizer, batch, cfg, state.precision, shard))
        metrics["reward_mean"] = float(rewards.mean())
        metrics["trained_zero_variance_fraction"] = zero_variance_fraction(rewards, cfg.group_size)
    metrics["time_learn"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    if hasattr(sampler, "sync"):
        sampler.sync(model)
    metrics.update(
        time_generate=round(times["generate"], 3),
        time_score=round(times["score"], 3),
        time_sync=round(time.perf_counter() - t0, 3),
    )
    return metrics


def _save(out: Path, step: int, state: TrainState, with_optimizer: bool, export: bool) -> Path:
    """The HF export is written from the float32 master weights (exact resume; ``rlvr.trainers.runtime.precision``);
    under torchrun only with ``export`` (the sharded ``dcp/`` holds the weights)."""
    optimizer = state.optimizer if with_optimizer else None
    if ctx := distributed.context():  # sharded (DCP) + the HF export, every rank taking part
        return distributed_checkpoint.save_checkpoint(
            ctx, out, step, state.tokenizer, optimizer, state.trainer_fields(), export
        )
    return save_checkpoint(out, step, state.model, state.tokenizer, optimizer, state.trainer_fields())


def _evaluate(cfg: TrainConfig, out: Path, step: int, path: Path, model, sampler, device) -> dict[str, Any]:
    """Evaluate the policy saved at ``path`` with ``rlvr eval`` (same grader) on the held-out benchmarks;
    with ``backend: vllm`` on the rollout engine itself (weights synced after every update)."""
    from rlvr.harness.eval_config import EvalConfig
    from rlvr.harness.evaluate import run_eval

    engine = sampler.eval_backend() if separate_engine(cfg.backend) else None
    summary = run_eval(
        EvalConfig(
            model=str(path),
            benchmarks=cfg.eval_benchmarks,
            template=cfg.template,
            n=cfg.eval_n,
            temperature=cfg.eval_temperature,
            top_p=cfg.eval_top_p,
            max_tokens=cfg.max_tokens,
            limit=cfg.eval_limit,
            policy=cfg.math_policy,
            out=str(out / "eval" / f"step-{step:06d}"),
            progress=False,
            backend=cfg.backend,
            dtype=compute_dtype_name(cfg),  # the policy's sampling dtype, recorded in the summary's protocol
            device=str(device).split(":")[0],
        ),
        engine,
    )
    return {f"eval_{name}": b["mean_at_n"]["value"] for name, b in summary["benchmarks"].items()}
