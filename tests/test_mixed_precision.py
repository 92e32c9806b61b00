"""Mixed precision that trains (``trainers/runtime/precision.py``): float32 master weights and AdamW state
with bfloat16 autocast move the weights as an all-float32 run does, where bfloat16 parameters
under the same AdamW step leave most weights bit-identical; old log-probs, reference log-probs
and the update's first pass agree exactly; float16 gets a loss scaler; bfloat16 master weights
are refused in one line; a run records its dtypes and checkpoints float32 weights; a vLLM engine
samples in the compute dtype from the pushed float32 masters."""

import copy
import json
import types

import pytest
import torch
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.config import TrainConfig, build_config
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.policy_gradient.losses import completion_logprobs
from rlvr.trainers.policy_gradient.update import Batch, batch_logprobs, policy_update
from rlvr.trainers.runtime.checkpoint import load_trainer_state
from rlvr.trainers.runtime.precision import FULL, Precision, compute_dtype_name, master_dtype_name
from safetensors.torch import load_file

LR, STEPS = 1e-6, 4


def _cfg(compute="auto", **extra):
    values = dict(
        dtype="float32",
        compute_dtype=compute,
        minibatch_size=None,
        mu=1,
        micro_batch_size=4,
        loss_agg="token_mean",
        normaliser=16.0,
        eps_low=0.2,
        eps_high=0.2,
        beta=0.0,
        grad_clip=1.0,
        policy_loss="ppo_clip",
        tis_cap=None,
        temperature=1.0,
        clip_ratio_c=None,
    )
    return types.SimpleNamespace(**{**values, **extra})


@pytest.fixture(scope="module")
def base():
    """A small random Llama (initialised as transformers does: weights of order 0.02)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def batch():
    torch.manual_seed(1)
    rows, width = 16, 20
    completion = torch.zeros(rows, width)
    completion[:, 8:] = 1
    ids = torch.randint(0, 256, (rows, width))
    return Batch(ids, torch.ones_like(ids), completion, torch.randn(rows))


def _train(base, batch, compute, params_dtype=torch.float32):
    """``STEPS`` AdamW steps at lr 1e-6 through ``policy_update``; the weights' change."""
    model = copy.deepcopy(base).to(params_dtype).train()
    cfg = _cfg(compute, minibatch_size=batch.input_ids.shape[0] // STEPS)
    precision = Precision(cfg, "cpu") if params_dtype == torch.float32 else FULL
    precision.wrap(model)
    batch = copy.copy(batch)
    batch.old_logp = batch_logprobs(model, batch, cfg.micro_batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.0)
    before = [p.detach().clone() for p in model.parameters()]
    metrics = policy_update(model, optimizer, batch, cfg, precision)
    assert metrics["optimizer_steps"] == STEPS
    delta = torch.cat([(p.detach().double() - b.double()).flatten() for p, b in zip(model.parameters(), before)])
    return model, optimizer, delta


def test_bfloat16_weights_round_an_adamw_step_away():
    """The failure mode on a toy tensor: lr-sized steps vanish in bfloat16, not in float32."""
    torch.manual_seed(0)
    start = torch.randn(4096) * 0.02
    moved = {}
    for dtype in (torch.bfloat16, torch.float32):
        weight = torch.nn.Parameter(start.to(dtype).clone())
        optimizer = torch.optim.AdamW([weight], lr=LR, weight_decay=0.0)
        for _ in range(STEPS):
            weight.grad = torch.randn(4096).to(dtype)
            optimizer.step()
        moved[dtype] = float((weight.detach() != start.to(dtype)).float().mean())
    assert moved[torch.float32] > 0.99  # every weight moved by ~lr per step (a few steps may cancel)
    assert moved[torch.bfloat16] < 0.05  # nearly all bit-identical: the update rounded away


@pytest.fixture(scope="module")
def reference(base, batch):
    """The all-float32 run's change of the weights."""
    return _train(base, batch, "float32")[2]


def test_float32_masters_under_bfloat16_autocast_move_like_float32(base, batch, reference):
    model, optimizer, mixed = _train(base, batch, "bfloat16")
    trained = reference != 0  # embedding rows of tokens absent from the batch get no gradient
    assert trained.double().mean() > 0.3
    ref, mix = reference[trained], mixed[trained]
    cosine = float(torch.nn.functional.cosine_similarity(ref, mix, dim=0))
    ratio = float(mix.norm() / ref.norm())
    assert cosine > 0.99 and abs(ratio - 1) < 0.03, (cosine, ratio)
    assert float((mix - ref).norm() / ref.norm()) < 0.1
    assert float((mix != 0).double().mean()) > 0.99  # the masters moved where float32 moved
    assert all(p.dtype == torch.float32 for p in model.parameters())
    state = next(iter(optimizer.state.values()))
    assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32


def test_bfloat16_parameters_under_plain_adamw_mostly_do_not_move(base, batch, reference):
    """What the fix avoids, on the same model and batch: bfloat16 parameters, the same AdamW."""
    _, _, low = _train(base, batch, "auto", params_dtype=torch.bfloat16)
    trained = reference != 0
    unchanged = float((low[trained] == 0).double().mean())
    assert unchanged > 0.9, unchanged


def test_old_logprobs_reference_and_first_pass_agree_exactly_under_autocast(base, batch):
    cfg = _cfg("bfloat16", beta=0.04)
    precision = Precision(cfg, "cpu")
    model = precision.wrap(copy.deepcopy(base).train())
    reference = precision.wrap(copy.deepcopy(base).eval().requires_grad_(False))
    assert model._rlvr_autocast == "bfloat16"
    b = copy.copy(batch)
    b.old_logp = batch_logprobs(model, b, cfg.micro_batch_size)
    b.ref_logp = batch_logprobs(reference, b, cfg.micro_batch_size)
    assert torch.equal(b.old_logp, b.ref_logp)
    first = completion_logprobs(model, b.input_ids[:4], b.attention_mask[:4], b.completion_mask[:4])[0]
    assert torch.equal(first, b.old_logp[:4])  # train mode, with grad: ratio exactly 1
    assert first.dtype == torch.float32  # the loss math runs in float32
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        plain = completion_logprobs(base, b.input_ids[:4], b.attention_mask[:4], b.completion_mask[:4])[0]
    assert not torch.equal(plain, first)  # autocast did change the numerics
    metrics = policy_update(model, torch.optim.AdamW(model.parameters(), lr=LR), b, cfg, precision)
    assert metrics["kl"] == 0.0 and metrics["clip_low_fraction"] == metrics["clip_high_fraction"] == 0.0


def test_float16_compute_scales_the_loss(base, batch):
    cfg = _cfg("float16")
    precision = Precision(cfg, "cpu")
    assert precision.scaler is not None and Precision(_cfg("bfloat16"), "cpu").scaler is None
    model = precision.wrap(copy.deepcopy(base).train())
    b = copy.copy(batch)
    b.old_logp = batch_logprobs(model, b, cfg.micro_batch_size)
    before = [p.detach().clone() for p in model.parameters()]
    metrics = policy_update(model, torch.optim.AdamW(model.parameters(), lr=1e-4), b, cfg, precision)
    assert metrics["optimizer_steps"] == 1 and torch.isfinite(torch.tensor(metrics["grad_norm"]))
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))
    state = precision.state_dict()
    assert state["compute_dtype"] == "float16" and state["scaler"]["scale"] > 0
    again = Precision(cfg, "cpu")
    again.load_state_dict(state)
    assert again.scaler.get_scale() == precision.scaler.get_scale()


def test_dtype_names_and_the_refusal():
    assert (master_dtype_name(TrainConfig()), compute_dtype_name(TrainConfig())) == ("float32", "float32")
    mixed = TrainConfig(compute_dtype="bf16")
    assert (master_dtype_name(mixed), compute_dtype_name(mixed)) == ("float32", "bfloat16")
    for dtype, compute in (("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("float16", "float16")):
        with pytest.raises(UserError) as info:
            TrainConfig(dtype=dtype, temperature=1.0).validate()
        message = str(info.value)
        assert f"set dtype: float32 and compute_dtype: {compute}" in message and "\n" not in message
    with pytest.raises(UserError, match="compute_dtype must be one of"):
        TrainConfig(compute_dtype="int8", temperature=1.0).validate()


@pytest.mark.slow
def test_a_run_with_bfloat16_compute_records_its_dtypes(tmp_path, tiny_model, digits_source):
    values = {
        "model": tiny_model,
        "compute_dtype": "bfloat16",
        "stages": [{"name": "digits", "sources": [digits_source]}],
        "eval_benchmarks": [digits_source],
        "prompts_per_step": 2,
        "group_size": 4,
        "max_tokens": 6,
        "micro_batch_size": 8,
        "max_steps": 1,
        "eval_every": 1,
        "eval_limit": 2,
        "out": str(tmp_path / "run"),
        "backend": "hf",
    }
    out = run_training(build_config("drgrpo", "cpu-demo", values), progress=False)
    checkpoint = out / "checkpoint-000001"
    state = load_trainer_state(checkpoint)
    assert state["precision"] == {"master_dtype": "float32", "compute_dtype": "bfloat16"}
    assert all(s["exp_avg"].dtype == torch.float32 for s in state["optimizer"]["state"].values())
    weights = load_file(checkpoint / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.float32}  # the float32 masters, for exact resume
    config = json.loads((checkpoint / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "float32"
    summary = json.loads(next((out / "eval").glob("step-*/summary.json")).read_text())
    assert summary["protocol"]["backend"]["dtype"] == "bfloat16"  # evaluated as it samples


@pytest.mark.slow
def test_a_vllm_engine_samples_in_the_compute_dtype_from_the_float32_masters(tmp_path):
    """``backend: vllm`` with bfloat16 compute: the engine runs in bfloat16, the float32 masters are
    cast as they are pushed, and after a sync its log-probs are the autocast learner's (within
    bfloat16's rounding: ~0.02 here, against ~2 for an engine that missed the update)."""
    from rlvr.harness.backends.hf import load_model
    from rlvr.harness.benchmarks.problems import Problem
    from rlvr.harness.templates import load_template
    from rlvr.trainers.policy_gradient.vllm_rollout import VLLMRollout
    from vllm_helpers import KV_GB, learner_logprobs, max_gap, vllm_tiny_model

    model_dir = vllm_tiny_model(tmp_path / "tiny")
    cfg = TrainConfig(
        model=model_dir, backend="vllm", temperature=1.0, max_tokens=8, seed=3, kv_cache_gb=KV_GB, compute_dtype="bf16"
    )
    learner, tokenizer, _ = load_model(model_dir, "float32", "cpu")
    Precision(cfg, "cpu").wrap(learner)
    engine = VLLMRollout(learner, tokenizer, load_template("chat"), {}, cfg)
    assert engine.llm.llm_engine.model_config.dtype == torch.bfloat16
    problems = [Problem(f"p{i}", "digits", "math", f"What is {i} + 1?", {"answer": str(i + 1)}) for i in range(3)]

    def gap(step):
        rows = engine.sample(problems, 2, step=step, logprobs=True)
        return max(
            max_gap(learner_logprobs(learner, prompt, ids), lps)
            for prompt, completions, _, _, logprobs in rows
            for ids, lps in zip(completions, logprobs)
        )

    assert gap(1) < 0.1
    with torch.no_grad():
        generator = torch.Generator().manual_seed(1)
        for p in learner.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    assert gap(2) > 0.5
    engine.sync(learner)
    assert gap(2) < 0.1


def test_fsdp2_float16_uses_the_sharded_scaler_and_skips_an_overflowed_step(tmp_path):
    """Under FSDP2 the float16 scaler is torch's ``ShardedGradScaler`` (it all-reduces the
    overflow check, so every rank skips the same steps); a plain ``GradScaler`` outside FSDP.
    One gloo rank, a model sharded with ``fully_shard``: a finite step moves the weights, an
    infinite gradient skips the step and halves the scale."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    assert type(Precision(_cfg("float16", parallel="fsdp"), "cpu").scaler) is torch.amp.GradScaler  # no world
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        precision = Precision(_cfg("float16", parallel="fsdp"), "cpu")
        assert isinstance(precision.scaler, ShardedGradScaler)
        assert type(Precision(_cfg("float16", parallel="ddp"), "cpu").scaler) is torch.amp.GradScaler
        torch.manual_seed(0)
        model = fully_shard(torch.nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for scale, moved in ((1.0, True), (float("inf"), False)):
            start = [p.full_tensor().clone() for p in model.parameters()]
            optimizer.zero_grad()
            precision.backward(model(torch.ones(3, 4)).sum() * scale)
            precision.unscale(optimizer)
            precision.step(optimizer)
            after = [p.full_tensor() for p in model.parameters()]
            assert any(not torch.equal(a, b) for a, b in zip(start, after)) is moved
        assert precision.scaler.get_scale() == 65536.0 / 2
    finally:
        dist.destroy_process_group()
