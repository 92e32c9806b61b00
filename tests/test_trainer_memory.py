"""The memory features of the policy-gradient learner change nothing but memory: chunked
log-probs give the unchunked values and gradient, micro-batches cut to their own longest row
and token-budget micro-batches give the padded update, gradient checkpointing gives the same
update, the KL reference loads in the compute dtype, FSDP reduce-scatters every micro-batch
unless told otherwise."""

from __future__ import annotations

import copy
import types

import pytest
import rlvr.trainers.policy_gradient.update
import torch
from hypothesis import given
from hypothesis import strategies as st
from rlvr.trainers.policy_gradient.chunked_logprobs import chunk_stats
from rlvr.trainers.policy_gradient.distributed_rows import Shard
from rlvr.trainers.policy_gradient.losses import completion_logprobs
from rlvr.trainers.policy_gradient.micro_batches import equalize, plan_rows
from rlvr.trainers.policy_gradient.update import policy_update
from test_trainer_objectives import _cfg, _max_gap, model_and_batch


@pytest.fixture(scope="module")
def setup():
    return model_and_batch()


def _logprobs_and_grads(setup, chunk: int, temperature: float = 1.0):
    model, batch = setup
    model = copy.deepcopy(model)
    logp, entropy = completion_logprobs(
        model, batch.input_ids, batch.attention_mask, batch.completion_mask, True, temperature, chunk
    )
    (logp * torch.linspace(0.5, 1.5, logp.shape[1])).sum().backward()  # unequal weights per column
    return logp.detach(), entropy, {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("chunk", [1, 3, 7, 1024])
def test_chunked_logprobs_have_the_unchunked_values_and_gradient(setup, chunk):
    plain, chunked = _logprobs_and_grads(setup, 0), _logprobs_and_grads(setup, chunk)
    assert torch.allclose(plain[0], chunked[0], atol=1e-6) and torch.allclose(plain[1], chunked[1], atol=1e-6)
    assert float(plain[1].sum()) > 0  # entropies were computed
    assert _max_gap(plain[2], chunked[2]) < 1e-5
    assert max(float(g.abs().max()) for g in plain[2].values()) > 1e-3  # a real gradient


def test_temperature_divides_the_logits_of_every_chunk(setup):
    model, batch = setup
    hidden = torch.randn(5, model.config.hidden_size)
    targets = torch.tensor([1, 2, 3, 4, 5])
    logp, entropy = chunk_stats(hidden, model.lm_head, targets, temperature=0.7)
    expected = torch.log_softmax(model.lm_head(hidden).float() / 0.7, dim=-1)
    assert torch.allclose(logp, expected.gather(1, targets[:, None]).squeeze(1), atol=1e-6)
    assert torch.allclose(entropy, -(expected.exp() * expected).sum(-1), atol=1e-5)
    low, high = _logprobs_and_grads(setup, 3, 0.7), _logprobs_and_grads(setup, 0, 0.7)
    assert torch.allclose(low[0], high[0], atol=1e-6) and _max_gap(low[2], high[2]) < 1e-5


def test_the_chunked_forward_never_builds_full_vocabulary_logits(setup):
    """Every vocabulary projection sees at most ``chunk`` positions (forward and recompute)."""
    model, batch = setup
    model = copy.deepcopy(model)
    seen = []
    model.lm_head.register_forward_hook(lambda m, args, out: seen.append(out.shape))  # the patched head's call
    linear_calls = []
    original = torch.nn.functional.linear

    def spy(x, weight, bias=None):
        if weight.shape[0] == model.config.vocab_size:
            linear_calls.append(x.shape[:-1].numel())
        return original(x, weight, bias)

    torch.nn.functional.linear = spy
    try:
        logp, _ = completion_logprobs(
            model, batch.input_ids, batch.attention_mask, batch.completion_mask, True, chunk=4
        )
        logp.sum().backward()
    finally:
        torch.nn.functional.linear = original
    assert linear_calls and max(linear_calls) <= 4
    assert seen[0][-1] == 2  # the model's "logits" are [log π, entropy] per position


def _head_backward_peak(fused: bool, monkeypatch) -> float:
    """Peak memory (torch's CPU allocator, profiler events) of the head's backward over one
    64-token chunk, in logits-sized (64 × 8192 float32) tensors."""
    import rlvr.trainers.policy_gradient.chunked_logprobs as chunked
    from torch.profiler import ProfilerActivity, profile

    if not fused:
        monkeypatch.setattr(chunked, "_fusable", lambda head: False)
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 8192, bias=False)
    hidden = torch.randn(1, 64, 16, requires_grad=True)
    job = chunked.HeadJob(torch.randint(0, 8192, (1, 64)), 64, 1.0, True)
    stats = chunked.token_stats(hidden, head, job)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        stats[..., 0].sum().backward()
    monkeypatch.undo()
    live = peak = 0
    for event in sorted((e for e in prof.events() if e.cpu_memory_usage), key=lambda e: e.time_range.start):
        live += event.cpu_memory_usage
        peak = max(peak, live)
    return peak / (64 * 8192 * 4)


def test_the_fused_head_backward_holds_a_third_of_the_checkpointed_one(monkeypatch):
    """A linear head's chunk goes through ``_LinearHeadTile``: its backward turns the recomputed
    logits into their gradient in place (measured: ~4.3 logits-sized tensors at its peak, the
    profiler's accounting); the checkpointed autograd graph, which also recomputes the entropy,
    ~14 (the path every linear head took before)."""
    fused, checkpointed = _head_backward_peak(True, monkeypatch), _head_backward_peak(False, monkeypatch)
    assert fused < 5 and checkpointed > 3 * fused


def _update(setup, **extra):
    model, batch = setup
    model = copy.deepcopy(model)
    metrics = policy_update(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, _cfg(**extra))
    return {k: v.detach().clone() for k, v in model.named_parameters()}, metrics


def test_micro_batches_cut_to_their_own_longest_row_give_the_padded_update(setup, monkeypatch):
    widths = []
    forward = rlvr.trainers.policy_gradient.update.completion_logprobs

    def spy(model, ids, *args, **kwargs):
        widths.append(ids.shape[1])
        return forward(model, ids, *args, **kwargs)

    monkeypatch.setattr(rlvr.trainers.policy_gradient.update, "completion_logprobs", spy)
    cut, metrics = _update(setup, micro_batch_size=2)
    cut_widths = list(widths)
    full = setup[1].input_ids.shape[1]
    monkeypatch.setattr(
        rlvr.trainers.policy_gradient.update, "row_lengths", lambda mask: [mask.shape[1]] * mask.shape[0]
    )
    widths.clear()
    padded, padded_metrics = _update(setup, micro_batch_size=2)
    assert widths == [full] * 4 and min(cut_widths) < full  # the padded version ran at the batch's width
    assert _max_gap(cut, padded) < 1e-6
    assert metrics["loss"] == pytest.approx(padded_metrics["loss"], abs=1e-7)


@pytest.mark.parametrize("budget", [1, 12, 20, 1000])
def test_token_budget_micro_batches_give_the_update_of_one_pass(setup, budget):
    one_pass, metrics = _update(setup)
    budgeted, budget_metrics = _update(setup, micro_batch_size=1, micro_token_budget=budget)
    assert _max_gap(one_pass, budgeted) < 1e-6
    assert metrics["loss"] == pytest.approx(budget_metrics["loss"], abs=1e-6)


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(1, 120))
def test_a_token_budget_plan_holds_every_row_once_within_the_budget(lengths, budget):
    plan = plan_rows(lengths, range(len(lengths)), 4, budget)
    assert sorted(r for rows in plan for r in rows) == list(range(len(lengths)))
    for rows in plan:
        assert len(rows) == 1 or len(rows) * max(lengths[r] for r in rows) <= budget
    longest_first = [lengths[r] for rows in plan for r in rows]
    assert longest_first == sorted(longest_first, reverse=True)


def test_gradient_checkpointing_gives_the_same_update(setup):
    plain, _ = _update(setup, micro_batch_size=2)
    model, batch = setup
    model = copy.deepcopy(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy_update(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, _cfg(micro_batch_size=2))
    assert _max_gap(plain, dict(model.named_parameters())) < 1e-6


class _FakeFSDP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = []

    def set_requires_gradient_sync(self, sync: bool) -> None:
        self.calls.append(sync)


class _OneRank:
    world = 1

    def all_reduce(self, values, op="sum"):
        return list(values)


@pytest.mark.parametrize(("mode", "expected"), [(True, [True] * 3), (False, [False, False, True])])
def test_fsdp_reduce_scatters_every_micro_batch_unless_told_otherwise(mode, expected):
    model, shard = _FakeFSDP(), Shard(_OneRank(), [0, 1, 2], [slice(0, 3)], [3])
    for k in range(3):
        shard.sync_gradients(model, k == 2, every_micro_batch=mode)
    assert model.calls == expected


def test_padding_passes_even_out_the_ranks():
    ctx = types.SimpleNamespace(all_reduce=lambda values, op="sum": [5.0])
    assert equalize([[0], [1, 2]], types.SimpleNamespace(ctx=ctx)) == [[0], [1, 2], None, None, None]
    assert equalize([[0]], None) == [[0]]


def test_the_reference_model_loads_in_the_compute_dtype(tiny_model):
    from rlvr.trainers.policy_gradient.config import TrainConfig
    from rlvr.trainers.policy_gradient.loop import _load_policy

    cfg = TrainConfig(
        model=tiny_model, temperature=1.0, compute_dtype="bfloat16", device="cpu", gradient_checkpointing=True
    )
    policy = _load_policy(cfg, tiny_model)[0]
    reference = _load_policy(cfg, tiny_model, frozen=True)[0]
    assert next(policy.parameters()).dtype == torch.float32 and policy.is_gradient_checkpointing
    assert next(reference.parameters()).dtype == torch.bfloat16 and not reference.is_gradient_checkpointing


# ---- disk: the last K checkpoints, the best one, one optimizer state -------------------------
def _fake_checkpoint(out, step: int) -> None:
    from rlvr.trainers.runtime.checkpoint import STATE_FILE

    folder = out / f"checkpoint-{step:06d}"
    (folder / "dcp-optim").mkdir(parents=True)
    for name in (STATE_FILE, "optimizer.pt", "model.safetensors"):
        (folder / name).write_text("x")


def test_pruning_keeps_the_last_k_and_the_best_and_one_optimizer_state(tmp_path):
    from rlvr.trainers.runtime.checkpoint_retention import prune, record_score

    for step, score in [(1, 0.2), (2, 0.9), (3, 0.1), (4, None), (5, 0.3)]:
        _fake_checkpoint(tmp_path, step)
        record_score(tmp_path, tmp_path / f"checkpoint-{step:06d}", {"eval_x": score}, "eval_x")
        prune(tmp_path, 2, "eval_x")
    left = sorted(p.name for p in tmp_path.glob("checkpoint-*"))
    assert left == ["checkpoint-000002", "checkpoint-000004", "checkpoint-000005"]
    assert [(tmp_path / n / "optimizer.pt").exists() for n in left] == [False, False, True]
    assert [(tmp_path / n / "dcp-optim").exists() for n in left] == [False, False, True]
    assert all((tmp_path / n / "model.safetensors").exists() for n in left)  # weights stay: evaluable
    assert prune(tmp_path, 0) == [] and len(list(tmp_path.glob("checkpoint-*"))) == 3  # 0 keeps all


@pytest.mark.slow
def test_a_long_run_keeps_its_directory_bounded_and_resumes(tmp_path, tiny_model, digits_source):
    """Ten steps saved every step, ``keep_checkpoints: 2``: two checkpoints on disk, the AdamW
    state in the newest only; the run directory stays within two sets of weights plus one
    optimizer state (plus logs); ``--resume`` continues from the newest."""
    from rlvr.trainers.policy_gradient.loop import run_training
    from test_trainers_e2e import _tiny

    def run(steps, resume=False):
        extra = {"save_every": 1, "save_optimizer": True, "keep_checkpoints": 2}
        return run_training(_tiny("drgrpo", (tiny_model, digits_source), tmp_path, steps, **extra), resume, False)

    run(10)
    left = sorted(p.name for p in tmp_path.glob("checkpoint-*"))
    assert left == ["checkpoint-000009", "checkpoint-000010"]
    weights = (tmp_path / left[-1] / "model.safetensors").stat().st_size
    optimizer = (tmp_path / left[-1] / "optimizer.pt").stat().st_size
    assert not (tmp_path / left[0] / "optimizer.pt").exists() and optimizer > weights
    total = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert total < 2 * weights + optimizer + 8 * 2**20  # tokenizer files and logs: a few MB
    run(11, resume=True)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-000010", "checkpoint-000011"]


# ---- the memory model: --plan's peak, each feature on its component, a measurement -----------
def _dims_7b():
    from rlvr.trainers.policy_gradient.memory import model_dims

    return model_dims("Qwen/Qwen2.5-Math-7B")


def _peak(**settings):
    from rlvr.trainers.policy_gradient.config import TrainConfig
    from rlvr.trainers.policy_gradient.memory import update_peak

    rows = settings.pop("rows", [512 + 3000] * 2)
    world = settings.pop("world", 1)
    cfg = TrainConfig(**{"micro_batch_size": 2, "compute_dtype": "bfloat16", "temperature": 1.0, **settings})
    return update_peak(_dims_7b(), cfg, rows, world=world, parallel="fsdp" if world > 1 else None, prompt=512)


def test_each_memory_feature_lowers_its_own_component():
    dims = _dims_7b()
    assert dims.params == pytest.approx(7.6e9, rel=0.02) and not dims.tied
    base = _peak(logits_chunk=0)
    assert _peak(logits_chunk=0, gradient_checkpointing=True)["activation_bytes"] < base["activation_bytes"] / 5
    # unchunked: 4.4 float32 logits-sized tensors of every kept position; chunked through the fused
    # tile: one chunk of logits and the head weight's gradient for it
    assert base["logits_bytes"] == pytest.approx(4.4 * 4 * 6000 * dims.vocab)
    fused = 4 * 1024 * dims.vocab + 4 * dims.embedding
    assert _peak(logits_chunk=1024)["logits_bytes"] == pytest.approx(fused)
    budget = _peak(logits_chunk=0, micro_token_budget=3512, rows=[3512, 1000])
    assert budget["activation_bytes"] < _peak(logits_chunk=0, rows=[3512, 1000])["activation_bytes"] * 0.55
    sharded = _peak(world=8, micro_batch_size=1, rows=[3512] * 2)
    unsharded = _peak(world=8, micro_batch_size=1, rows=[3512] * 2, fsdp_grad_sync="last_micro_batch")
    assert sharded["gradient_bytes"] == pytest.approx(4 * dims.params / 8)
    assert unsharded["gradient_bytes"] == pytest.approx(4 * dims.params)
    assert _peak(beta=0.04)["reference_bytes"] == pytest.approx(2 * dims.params)  # bfloat16, not float32


@pytest.mark.parametrize("algorithm", ["drgrpo", "dapo"])
def test_the_plan_predicts_a_peak_per_gpu_for_the_paper_presets(algorithm):
    from rlvr.trainers.policy_gradient.config import build_config
    from rlvr.trainers.policy_gradient.plan import format_plan, training_plan

    plan = training_plan(build_config(algorithm, "paper", {}, check_data=False))
    peak = plan["devices"]["peak"]
    assert peak["one_gpu"]["total_bytes"] > 80 and peak["fsdp_min_gpus"] >= 2
    assert peak["fsdp_peak_gb"] + peak["vllm_gb_while_learning"] <= 80
    assert peak["no_sync_full_gradients_gb"] > peak["one_gpu"]["gradient_bytes"] / peak["fsdp_min_gpus"]
    text = format_plan(plan)
    assert "fsdp peak" in text and "fsdp_grad_sync last_micro_batch would hold" in text


@pytest.mark.slow
def test_the_predicted_peak_is_within_15_percent_of_the_measured_one():
    """One point of ``benchmarks/bench_train_memory.py`` (512 response tokens, every feature on)."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_train_memory import run_point

    line = run_point(512, (), 1)
    assert abs(line["error"]) <= 0.15, line


@pytest.mark.parametrize("budget", [None, 12])
def test_old_logprobs_from_the_update_itself_give_the_update_of_a_separate_pass(setup, budget):
    """One pass over one minibatch: π_old is the update's own detached log-prob (the no-gradient
    pass is skipped); the weights, metrics and filled old log-probs equal the separate pass's."""
    from rlvr.trainers.policy_gradient.update import batch_logprobs, old_logp_from_update

    model, batch = setup
    cfg = _cfg(minibatch_size=None, micro_batch_size=2, micro_token_budget=budget, tis_cap=None, beta=0.0)
    assert old_logp_from_update(cfg.mu, cfg.tis_cap, 1) and not old_logp_from_update(2, None, 1)
    results = []
    for separate in (True, False):
        m, b = copy.deepcopy(model), copy.copy(batch)
        b.old_logp = batch_logprobs(m, b, 2, token_budget=budget) if separate else None
        metrics = policy_update(m, torch.optim.SGD(m.parameters(), lr=0.1), b, cfg)
        results.append((dict(m.named_parameters()), metrics, b.old_logp))
    (a, ma, la), (b_, mb, lb) = results
    assert _max_gap(a, b_) < 1e-6 and torch.allclose(la, lb, atol=1e-6)
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-7) and mb["clip_low_fraction"] == 0
    with pytest.raises(ValueError, match="one pass over one minibatch"):
        b = copy.copy(batch)
        b.old_logp = None
        policy_update(copy.deepcopy(model), torch.optim.SGD(model.parameters(), lr=0.1), b, _cfg(mu=2, tis_cap=None))
