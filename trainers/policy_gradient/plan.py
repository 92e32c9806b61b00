"""``rlvr train ALGO --config PRESET --plan``: what a run would do, derived from its settings
alone. Nothing is loaded (no model, no data, no hub access): the schedule (prompts and samples
per step, optimizer steps per rollout, gradient accumulation, tokens), the loss (aggregation and
what it divides by, clip range, KL), the learning-rate schedule, the reward policy, the precision
and a rough estimate of the memory the run needs and how many 80 GB GPUs that means.

How the update counts (``rlvr.trainers.policy_gradient.update.policy_update``): a rollout step trains on
``rows = prompts_per_step × group_size`` samples; ``minibatch_size`` counts **rows** (samples, not
prompts; ``None`` = all rows), so one pass makes ``ceil(rows / minibatch_size)`` optimizer steps
and ``mu`` passes make ``mu`` times that. Each optimizer step accumulates gradients over
``ceil(minibatch_size / micro_batch_size)`` micro-batches (exact: every aggregation is a fixed
weight per token). The learning-rate schedule advances once per rollout step, not per optimizer
step. Under dynamic sampling the trained batch can hold fewer prompts when ``max_gen_batches``
runs out (then fewer optimizer steps); the plan shows a full batch.

``training_plan(cfg)`` is a pure function of the config (plus a local model directory's
``config.json`` when ``model`` names one); ``format_plan`` prints it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from rlvr.harness.backends.registry import separate_engine
from rlvr.harness.setting_blocks import gpu_memory_share
from rlvr.trainers.policy_gradient.advantages import ADVANTAGES
from rlvr.trainers.policy_gradient.losses import AGGREGATIONS
from rlvr.trainers.policy_gradient.memory import memory_lines, params_from_config, plan_memory
from rlvr.trainers.policy_gradient.paper_data import data_origin
from rlvr.trainers.runtime.precision import BYTES, compute_dtype_name, master_dtype_name

GPU_GB = 80.0
GB = 1e9

SELECTION_TEXT = {
    "uniform": "uniform: the stage's pool in a seeded order, epoch after epoch",
    "history": "history (SRPO): at each epoch's end, prompts whose every sample was correct leave the pool",
}
OVERLONG_TEXT = {
    "none": "a truncated response is graded as it stands",
    "zero": "a truncated response gets reward 0 and stays in the loss",
    "mask": "a truncated response leaves the loss (mask 0)",
    "soft": "DAPO eq. 13, a linear penalty over the last {cache} of {max_tokens} tokens, −1 at the budget",
}


def training_plan(cfg: Any, config: str | None = None) -> dict[str, Any]:
    """The derived schedule of a run (see the module docstring); ``config`` only labels it."""
    rows = cfg.prompts_per_step * cfg.group_size
    size = min(cfg.minibatch_size or rows, rows)
    per_pass = math.ceil(rows / size)
    micro = math.ceil(size / cfg.micro_batch_size)
    dynamic = cfg.selection == "dynamic"
    aggregation = AGGREGATIONS[cfg.loss_agg]
    gen_prompts = (cfg.gen_prompts or cfg.prompts_per_step) if dynamic else None
    plan: dict[str, Any] = {
        "algorithm": cfg.algorithm,
        "config": config,
        "model": {"name": cfg.model or "embedded (smollm2-135m-instruct)", "backend": cfg.backend},
        "template": cfg.template,
        "data": _data(cfg.stages),
        "rollout": {
            "prompts_per_step": cfg.prompts_per_step,
            "group_size": cfg.group_size,
            "samples_per_step": rows,
            "selection": cfg.selection,
            "gen_prompts": gen_prompts,
            "gen_samples_per_batch": gen_prompts * cfg.group_size if dynamic else None,
            "max_gen_batches": cfg.max_gen_batches if dynamic else None,
            "dynamic_cap": cfg.dynamic_cap if dynamic else None,
            "max_samples_generated": (
                (gen_prompts * cfg.group_size * cfg.max_gen_batches if cfg.max_gen_batches > 0 else None)
                if dynamic
                else rows
            ),
            "max_tokens": cfg.max_tokens,
            "prompt_max_length": cfg.prompt_max_length,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
        },
        "update": {
            "rows": rows,
            "minibatch_size": size,
            "minibatch_unit": "rows (samples)",
            "minibatch_shuffle": cfg.minibatch_shuffle,
            "minibatches_per_pass": per_pass,
            "mu": cfg.mu,
            "optimizer_steps_per_rollout": cfg.mu * per_pass,
            "micro_batch_size": cfg.micro_batch_size,
            "micro_batches_per_optimizer_step": micro,
            "max_tokens_per_step": rows * cfg.max_tokens,
            "max_tokens_per_optimizer_step": size * cfg.max_tokens,
            "max_tokens_per_micro_batch": min(cfg.micro_batch_size, size) * cfg.max_tokens,
        },
        "loss": {
            "policy_loss": getattr(cfg, "policy_loss", "ppo_clip"),
            "loss_agg": cfg.loss_agg,
            "divides_by": aggregation.divides_by(size, cfg.max_tokens, cfg.normaliser),
            "loss_constant": cfg.normaliser if aggregation.constant else None,
            "advantage": cfg.advantage,
            "advantage_formula": ADVANTAGES[cfg.advantage].formula.format(eps=cfg.std_eps),
            "eps_low": cfg.eps_low,
            "eps_high": cfg.eps_high,
            "clip_ratio_c": cfg.clip_ratio_c,
            "beta": cfg.beta,
            "kl": f"k3 to the reference model, weight {cfg.beta:g}" if cfg.beta else "none (no reference model)",
            "tis_cap": getattr(cfg, "tis_cap", None),
        },
        "optimizer": {
            "name": "AdamW",
            "lr": cfg.lr,
            "warmup_steps": cfg.warmup_steps,
            "schedule": (
                f"linear warm-up over {cfg.warmup_steps} rollout steps (lr/{cfg.warmup_steps} at step 1), then constant"
                if cfg.warmup_steps
                else "constant"
            ),
            "betas": list(cfg.betas),
            "weight_decay": cfg.weight_decay,
            "adam_eps": cfg.adam_eps,
            "grad_clip": cfg.grad_clip,
        },
        "reward": {
            "math_policy": cfg.math_policy,
            "reward_correct": cfg.reward_correct,
            "reward_wrong": cfg.reward_wrong,
            "overlong": cfg.overlong,
            "overlong_cache": cfg.overlong_cache if cfg.overlong == "soft" else None,
            "overlong_text": OVERLONG_TEXT[cfg.overlong].format(cache=cfg.overlong_cache, max_tokens=cfg.max_tokens),
            "mask_unverifiable": cfg.mask_unverifiable,
        },
        "precision": {
            "master_dtype": master_dtype_name(cfg),
            "compute_dtype": compute_dtype_name(cfg),
            "autocast": compute_dtype_name(cfg) != master_dtype_name(cfg),
            "loss_scaler": compute_dtype_name(cfg) == "float16",
            "checkpoint_dtype": master_dtype_name(cfg),
        },
        "run": {
            "max_steps": cfg.max_steps,
            "max_generations": cfg.max_generations,
            "eval_every": cfg.eval_every,
            "eval_benchmarks": list(cfg.eval_benchmarks),
            "eval_n": cfg.eval_n,
            "eval_temperature": cfg.eval_temperature,
            "eval_top_p": cfg.eval_top_p,
            "save_every": cfg.save_every,
            "seed": cfg.seed,
        },
    }
    plan["devices"] = device_estimate(cfg)
    plan["devices"]["peak"] = plan_memory(cfg, GPU_GB)  # activations, logits, vLLM: see .memory
    return plan


def _data(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from rlvr.harness.benchmarks.sources import local_path
    from rlvr.trainers.policy_gradient.curriculum import Stage

    out = []
    for data in stages:
        stage = Stage.from_dict(data)
        if stage.until_step is not None:
            switch = f"until step {stage.until_step}"
        elif stage.plateau_window:
            probe = f", read on a probe of {stage.probe_size} every {stage.probe_every} steps" * bool(stage.probe_size)
            switch = f"until a reward plateau (window {stage.plateau_window}, delta {stage.plateau_delta:g}{probe})"
        elif stage.until_generations is not None:
            switch = f"until {stage.until_generations} generations"
        else:
            switch = "to the end"
        paths = [(s, local_path(s)) for s in stage.sources]
        sources = [
            {"source": s, "found": None if path is None else path.exists(), "origin": data_origin(s)}
            for s, path in paths
        ]
        out.append({"name": stage.name, "sources": sources, "switch": switch})
    return out


# --- devices -----------------------------------------------------------------------------------


_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")


def parameter_count(model: str | None) -> tuple[float | None, str]:
    """``(parameters, where the number comes from)``: a local directory's ``config.json`` (a
    dense decoder's formula), else the size in the name ("7B", "1.5B", "135M"), else None.
    Never touches the hub."""
    from rlvr.harness.models import EMBEDDED_NAME, cache_root

    name = model or EMBEDDED_NAME
    folder = Path(name) if model else cache_root() / "models" / EMBEDDED_NAME
    config = folder / "config.json"
    if config.is_file():
        try:
            count = params_from_config(json.loads(config.read_text(encoding="utf-8")))
        except (KeyError, TypeError, ValueError):
            count = None
        if count:
            return float(count), f"{config} (dense decoder formula)"
    found = _SIZE.findall(Path(name).name)
    if found:
        number, unit = found[-1]
        return float(number) * (1e9 if unit in "bB" else 1e6), f"the name: {number}{unit}"
    return None, "unknown (no size in the name, no local config.json)"


def device_estimate(cfg: Any, gpu_gb: float = GPU_GB) -> dict[str, Any]:
    """Bytes of the training state per parameter and the GPUs that means: an estimate (no
    activations, no KV cache, no fragmentation)."""
    params, source = parameter_count(cfg.model)
    master, compute = BYTES[master_dtype_name(cfg)], BYTES[compute_dtype_name(cfg)]
    autocast = compute_dtype_name(cfg) != master_dtype_name(cfg)
    per_param = {
        "master_weights": master,
        "gradients": master,
        "adamw_state": 2 * master,
        "compute_copy": compute if autocast else 0,
        "reference_model": master if cfg.beta else 0,
    }
    vllm_share = gpu_memory_share(cfg.gpu_memory_utilization, True) if separate_engine(cfg.backend) else 0.0
    budget = gpu_gb * (1.0 - vllm_share)
    out: dict[str, Any] = {
        "estimate": True,
        "parameters": params,
        "parameters_from": source,
        "bytes_per_parameter": per_param,
        "gpu_gb": gpu_gb,
        "training_budget_gb_per_gpu": round(budget, 1),
        "parallel": cfg.parallel,
        "note": (
            "an estimate of the training state listed in bytes/parameter only; activations (see "
            "max_tokens_per_micro_batch), the KV cache and allocator overhead come on top"
        ),
    }
    if params is None:
        return out
    full = sum(per_param.values()) * params / GB
    sharded = (per_param["master_weights"] + per_param["gradients"] + per_param["adamw_state"]) * params / GB
    sharded += per_param["reference_model"] * params / GB
    out.update(
        training_state_gb=round(full, 1),
        ddp={
            "per_gpu_gb": round(full, 1),
            "fits_one_gpu": full <= budget,
            "gpus": 1 if full <= budget else None,
            "how": "a full replica per GPU: more GPUs add throughput, not room",
        },
        fsdp={
            "sharded_gb": round(sharded, 1),
            "min_gpus": max(1, math.ceil(sharded / budget)),
            "how": "weights, gradients, AdamW state (and the reference) sharded; the compute copy is gathered "
            "layer by layer",
        },
    )
    if separate_engine(cfg.backend):
        engine = compute * params / GB
        out["vllm_engine"] = {
            "weights_gb": round(engine, 1),
            "share_gb": round(gpu_gb * vllm_share, 1),
            "fits": engine < gpu_gb * vllm_share,
            "how": "one colocated engine per process with the whole model (no tensor parallelism), in "
            f"{compute_dtype_name(cfg)}, inside gpu_memory_utilization {vllm_share:g} of the GPU",
        }
    return out


# --- printing ----------------------------------------------------------------------------------


def _num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_plan(plan: dict[str, Any]) -> str:
    """The plan as aligned ``key  value`` lines."""
    r, u, loss, opt, rew, prec, run, dev = (
        plan[k] for k in ("rollout", "update", "loss", "optimizer", "reward", "precision", "run", "devices")
    )
    label = f" --config {plan['config']}" if plan.get("config") else ""
    lines = [(f"rlvr train {plan['algorithm']}{label}: the plan", "derived from the settings; nothing loaded")]
    add = lambda key, value: lines.append((key, value))  # noqa: E731
    add("model", f"{plan['model']['name']} (backend {plan['model']['backend']}, template {plan['template']})")
    for stage in plan["data"]:
        names = ", ".join(
            s["source"]
            + ("" if s["found"] is not False else f" (not found here{'; ' + s['origin'] if s['origin'] else ''})")
            for s in stage["sources"]
        )
        add(f"stage {stage['name']}", f"{names}; {stage['switch']}")
    add(
        "rollout",
        f"{r['prompts_per_step']:,} prompts x {r['group_size']} samples = {r['samples_per_step']:,} samples per step, "
        f"up to {r['max_tokens']:,} new tokens each (temperature {_num(r['temperature'])}, top_p {_num(r['top_p'])})"
        + (f"; prompts cut on the left to {r['prompt_max_length']:,} tokens" if r["prompt_max_length"] else ""),
    )
    if r["selection"] == "dynamic":
        cap = (
            f"at most {r['max_gen_batches']} per step ({r['max_samples_generated']:,} samples)"
            if r["max_gen_batches"]
            else "no cap"
        )
        add(
            "selection",
            f"dynamic: generation batches of {r['gen_prompts']:,} prompts ({r['gen_samples_per_batch']:,} samples), "
            f"{cap}; groups with all-equal rewards dropped until {r['prompts_per_step']:,} remain; out of batches: "
            + ("stop the run (verl)" if r["dynamic_cap"] == "stop" else "train on the groups found"),
        )
    else:
        add("selection", SELECTION_TEXT.get(r["selection"], r["selection"]))
    add(
        "update",
        f"mu {u['mu']} x ceil({u['rows']:,} rows / mini-batch {u['minibatch_size']:,} rows) = "
        f"{u['optimizer_steps_per_rollout']} optimizer step(s) per rollout; rows "
        + ("in a seeded permutation per step (oat)" if u["minibatch_shuffle"] == "rows" else "in order (verl)"),
    )
    add(
        "accumulation",
        f"{u['micro_batches_per_optimizer_step']:,} micro-batch(es) of {u['micro_batch_size']} row(s) "
        "per optimizer step",
    )
    add(
        "tokens",
        f"at most {u['max_tokens_per_step']:,} completion tokens per step ({u['rows']:,} x {r['max_tokens']:,}), "
        f"{u['max_tokens_per_optimizer_step']:,} per optimizer step, "
        f"{u['max_tokens_per_micro_batch']:,} per micro-batch",
    )
    tis = f", TIS cap {loss['tis_cap']:g}" if loss.get("tis_cap") else ""
    add("loss", f"{loss['policy_loss']}{tis}, {loss['loss_agg']}: divides by {loss['divides_by']}")
    add("advantage", f"{loss['advantage']}: {loss['advantage_formula']}")
    dual = f", dual clip c {_num(loss['clip_ratio_c'])}" if loss["clip_ratio_c"] else ""
    add("clip", f"eps_low {_num(loss['eps_low'])}, eps_high {_num(loss['eps_high'])}{dual}")
    add("KL", f"beta {_num(loss['beta'])}: {loss['kl']}")
    add(
        "lr",
        f"{opt['lr']:g}, {opt['schedule']}; AdamW betas ({', '.join(_num(b) for b in opt['betas'])}), weight decay "
        f"{_num(opt['weight_decay'])}, eps {opt['adam_eps']:g}, grad clip {_num(opt['grad_clip'])}",
    )
    policy = rew["math_policy"] or "each data source's own"
    add(
        "reward",
        f"math_policy {policy}; correct {_num(rew['reward_correct'])}, wrong {_num(rew['reward_wrong'])}; "
        f"overlong {rew['overlong']}: {rew['overlong_text']}; "
        f"unverifiable verdicts {'masked' if rew['mask_unverifiable'] else 'taught as wrong'}",
    )
    add(
        "precision",
        f"master weights, gradients and AdamW state {prec['master_dtype']}; compute {prec['compute_dtype']}"
        + (" (autocast" + (", loss scaler)" if prec["loss_scaler"] else ")") if prec["autocast"] else "")
        + f"; checkpoints in {prec['checkpoint_dtype']}",
    )
    add(
        "run",
        f"{run['max_steps']:,} steps"
        + (f" or {run['max_generations']:,} generations" if run["max_generations"] else "")
        + f"; eval every {run['eval_every'] or '-'} ({', '.join(run['eval_benchmarks'])}, n {run['eval_n']}, "
        f"temperature {_num(run['eval_temperature'])}, top_p {_num(run['eval_top_p'])}); "
        f"save every {run['save_every'] or 'end only'}",
    )
    lines += _device_lines(dev)
    width = max(len(k) for k, _ in lines[1:]) + 2
    head = f"{lines[0][0]} ({lines[0][1]})"
    return "\n".join([head] + [f"  {k.ljust(width)}{v}" for k, v in lines[1:]])


def _device_lines(dev: dict[str, Any]) -> list[tuple[str, str]]:
    if dev["parameters"] is None:
        return [("devices", f"estimate: parameter count {dev['parameters_from']}")]
    per = dev["bytes_per_parameter"]
    parts = " + ".join(f"{v} {k.replace('_', ' ')}" for k, v in per.items() if v)
    out = [
        (
            "devices",
            f"ESTIMATE: {dev['parameters'] / 1e9:.3g}B parameters (from {dev['parameters_from']}); "
            f"{sum(per.values())} bytes/parameter ({parts}) = {dev['training_state_gb']:,} GB of training state",
        )
    ]
    ddp, fsdp = dev["ddp"], dev["fsdp"]
    budget = f"{dev['training_budget_gb_per_gpu']:g} GB of each {dev['gpu_gb']:g} GB GPU"
    out.append(
        (
            "  ddp",
            f"{ddp['per_gpu_gb']:,} GB per GPU: "
            + ("fits one GPU" if ddp["fits_one_gpu"] else "does not fit")
            + f" ({budget} for training)",
        )
    )
    out.append(("  fsdp", f"{fsdp['sharded_gb']:,} GB sharded: at least {fsdp['min_gpus']} GPU(s) of {budget}"))
    engine = dev.get("vllm_engine")
    if engine:
        out.append(
            (
                "  vllm",
                f"engine weights {engine['weights_gb']:,} GB in a share of {engine['share_gb']:g} GB per GPU: "
                + ("fits" if engine["fits"] else "does NOT fit (raise gpu_memory_utilization or use a smaller model)"),
            )
        )
    out += memory_lines(dev.get("peak"), dev["gpu_gb"])
    out.append(("  note", dev["note"] + f"; parallel: {dev['parallel']}"))
    return out
