"""Data-parallel training under ``torchrun`` on the CPU (gloo, 2 ranks) against one process on
the same batches: DDP (Dr. GRPO) and FSDP2 (DAPO: dynamic sampling, token-mean loss, a KL term
with a sharded reference, and a minibatch one rank has no group of) end with the single-process
weights (atol 1e-5) and log the same metrics every step; a rank killed mid-step ends the run
promptly with a one-line message, and ``--resume`` then gives the uninterrupted run's weights
bit for bit; the exported Hugging Face directory loads with ``rlvr.harness.backends.hf.load_model``;
one process resumes a sharded checkpoint. Unit checks: groups split whole and balanced, local
token weights rescaled to the global normalisation for every aggregation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from rlvr.harness.errors import UserError
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.policy_gradient.distributed_rows import Shard, split_groups
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.policy_gradient.losses import AGGREGATIONS, token_weights
from rlvr.trainers.runtime.checkpoint import load_trainer_state
from rlvr.trainers.runtime.distributed import FAIL_ENV, TIMEOUT_ENV
from rlvr.trainers.runtime.telemetry import read_log
from safetensors.torch import load_file

TIMINGS = {"time_generate", "time_score", "time_learn", "time_sync", "time_probe", "tokens_per_s"}
STEPS = 3
#: Adam moves every weight by ~lr per step whatever its gradient's size, so summation-order noise
#: in a near-zero gradient shows at the scale of lr; lr 1e-3 (eps 1e-6) keeps it under 1e-5
ATOL = 1e-5


def _settings(data: str, **extra) -> dict:
    return {
        "stages": [{"name": "main", "sources": [data]}],
        "prompts_per_step": 4,
        "group_size": 4,
        "max_tokens": 8,
        "minibatch_size": 8,  # two groups: two optimizer steps per step, one group per rank each
        "micro_batch_size": 2,  # gradient accumulation over micro-batches (DDP syncs on the last)
        "lr": 1e-3,
        "adam_eps": 1e-6,
        "save_every": 1,
        "backend": "hf",
        "overlong_cache": 4,
        **extra,
    }


def _torchrun(
    algorithm, model, out, settings, resume=False, env=None, timeout=150, nproc=2
) -> subprocess.CompletedProcess:
    """``rlvr train`` under torchrun (2 ranks; ``nproc`` None: one plain process)."""
    sets = [a for key, value in settings.items() for a in ("--set", f"{key}={value}")]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    command = command[:1] if nproc is None else command
    command += ["-m", "rlvr.cli", "train", algorithm, "--config", "cpu-demo", "--model", model]
    command += ["--out", str(out), "--max-steps", str(STEPS), "--no-progress", *sets] + ["--resume"] * resume
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, TIMEOUT_ENV: "120", **(env or {})},
    )


def _single(algorithm, model, out, settings, steps=STEPS, resume=False):
    """One process, one thread like each torchrun rank (OMP_NUM_THREADS=1; two threads on a busy
    2-core machine make these tiny steps many times slower)."""
    cfg = build_config(algorithm, "cpu-demo", {"model": model, "out": str(out), "max_steps": steps, **settings})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_training(cfg, resume=resume, progress=False)
    finally:
        torch.set_num_threads(threads)


def _weights(out, step=STEPS) -> dict[str, torch.Tensor]:
    return load_file(str(out / f"checkpoint-{step:06d}" / "model.safetensors"))


def _max_gap(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _assert_same_logs(one, many) -> None:
    a, b = read_log(one), read_log(many)
    assert [line["step"] for line in a] == [line["step"] for line in b] == list(range(1, STEPS + 1))
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for key in set(x) - TIMINGS:
            if isinstance(x[key], float):
                assert y[key] == pytest.approx(x[key], rel=1e-4, abs=1e-6), (x["step"], key)
            else:
                assert y[key] == x[key], (x["step"], key)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory, tiny_model, digits_source):
    """Dr. GRPO under torchrun (DDP, 2 ranks) and in one process, on the same settings."""
    root = tmp_path_factory.mktemp("ddp")
    settings = _settings(digits_source, keep_checkpoints=0)  # every checkpoint whole: one resumes from step 2
    t0 = time.perf_counter()
    result = _torchrun("drgrpo", tiny_model, root / "ddp", settings)
    seconds = time.perf_counter() - t0
    assert result.returncode == 0, result.stderr[-4000:]
    return {"root": root, "settings": settings, "out": root / "ddp", "seconds": seconds, "stdout": result.stdout}


@pytest.mark.slow
def test_ddp_two_ranks_make_the_single_process_updates(ddp, tiny_model):
    single = _single("drgrpo", tiny_model, ddp["root"] / "single", ddp["settings"])
    initial = load_file(str(Path(tiny_model) / "model.safetensors"))
    final = _weights(ddp["out"])
    assert _max_gap(_weights(single), final) <= ATOL
    assert _max_gap(initial, final) > 100 * ATOL  # the weights did move
    _assert_same_logs(single, ddp["out"])
    assert all(line["generations"] == 16 and line["optimizer_steps"] == 2 for line in read_log(ddp["out"]))
    assert ddp["stdout"].count("done ->") == 1  # rank 0 alone reports


def _fsdp_run(tmp_path, tiny_model, digits_source):
    """DAPO with a KL term (β > 0: the reference is sharded too), 3 prompts: the second minibatch
    holds one group, so one rank trains on dummy rows only there."""
    settings = _settings(
        digits_source, prompts_per_step=3, gen_prompts=3, max_gen_batches=2, beta=0.04, keep_checkpoints=0
    )
    result = _torchrun("dapo", tiny_model, tmp_path / "fsdp", {**settings, "parallel": "fsdp"})
    assert result.returncode == 0, result.stderr[-4000:]
    single = _single("dapo", tiny_model, tmp_path / "single", settings)
    assert _max_gap(_weights(single), _weights(tmp_path / "fsdp")) <= ATOL
    _assert_same_logs(single, tmp_path / "fsdp")
    assert any(line["effective_batch"] == 3 for line in read_log(single))  # the uneven split did happen
    state = load_trainer_state(tmp_path / "fsdp" / "checkpoint-000003")
    assert state["sharded"] == {"world_size": 2, "parallel": "fsdp", "optimizer": True}
    assert len(state["rng_per_rank"]) == 2 and "optimizer" not in state
    return settings


@pytest.mark.slow
def test_fsdp_two_ranks_make_the_single_process_updates(tmp_path, tiny_model, digits_source):
    """DAPO with a KL term (β > 0: the reference is sharded too), 3 prompts: the second minibatch
    holds one group, so one rank trains on dummy rows only there."""
    _fsdp_run(tmp_path, tiny_model, digits_source)
    shutil.rmtree(tmp_path)


@pytest.mark.slow
def test_fsdp_save_and_resume_is_bit_for_bit(tmp_path, tiny_model, digits_source):
    """``--resume`` from the step-1 checkpoint (DCP shards) ends bit for bit where the
    uninterrupted FSDP2 run did."""
    settings = _fsdp_run(tmp_path, tiny_model, digits_source)
    # save + --resume under FSDP2: from checkpoint 1 to the uninterrupted run's weights and log, bit for bit
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in ("config.yaml", "train_log.jsonl"):
        shutil.copy(tmp_path / "fsdp" / name, resumed / name)
    shutil.copytree(tmp_path / "fsdp" / "checkpoint-000001", resumed / "checkpoint-000001")
    again = _torchrun("dapo", tiny_model, resumed, {**settings, "parallel": "fsdp"}, resume=True)
    assert again.returncode == 0, again.stderr[-4000:]
    a, b = _weights(tmp_path / "fsdp"), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda log: [{k: v for k, v in line.items() if k not in TIMINGS} for line in log]  # noqa: E731
    assert strip(read_log(tmp_path / "fsdp")) == strip(read_log(resumed))
    shutil.rmtree(tmp_path)


@pytest.mark.slow
def test_a_killed_rank_fails_the_run_cleanly_and_resume_is_exact(ddp, tiny_model):
    out = ddp["root"] / "killed"
    t0 = time.perf_counter()
    killed = _torchrun("drgrpo", tiny_model, out, ddp["settings"], env={FAIL_ENV: "1:2"})
    seconds = time.perf_counter() - t0
    assert killed.returncode != 0
    assert seconds < 60 + ddp["seconds"], seconds  # no hang: torchrun tears the group down
    assert "rank 1: RLVR_TEST_FAIL_RANK_AT_STEP: exiting in step 2" in killed.stderr
    lines = [line for line in killed.stderr.splitlines() if line.startswith("rlvr train: error: rank 0/2: ")]
    assert len(lines) == 1 and lines[0].endswith("continue the run with --resume"), killed.stderr[-3000:]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-000001"]
    resumed = _torchrun("drgrpo", tiny_model, out, ddp["settings"], resume=True)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    a, b = _weights(ddp["out"]), _weights(out)
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda log: [{k: v for k, v in line.items() if k not in TIMINGS} for line in log]  # noqa: E731
    assert strip(read_log(ddp["out"])) == strip(read_log(out))


@pytest.mark.slow
def test_fsdp_checkpoint_kill_and_resume_equal_the_uninterrupted_run_bit_for_bit(tmp_path, tiny_model, digits_source):
    """FSDP2 (DCP shards of weights and AdamW state, per-rank RNG): a run whose rank 1 dies in step
    2 resumes from checkpoint 1 to the uninterrupted run's weights and log, bit for bit."""
    settings = {**_settings(digits_source), "parallel": "fsdp"}
    whole = _torchrun("drgrpo", tiny_model, tmp_path / "whole", settings)
    assert whole.returncode == 0, whole.stderr[-4000:]
    out = tmp_path / "killed"
    killed = _torchrun("drgrpo", tiny_model, out, settings, env={FAIL_ENV: "1:2"})
    assert killed.returncode != 0 and "RLVR_TEST_FAIL_RANK_AT_STEP" in killed.stderr
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-000001"]
    resumed = _torchrun("drgrpo", tiny_model, out, settings, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    a, b = _weights(tmp_path / "whole"), _weights(out)
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda log: [{k: v for k, v in line.items() if k not in TIMINGS} for line in log]  # noqa: E731
    assert strip(read_log(tmp_path / "whole")) == strip(read_log(out))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo"])
def test_row_based_aggregations_over_an_uneven_split_make_the_single_process_updates(
    tmp_path, tiny_model, digits_source, algorithm
):
    """GRPO's seq_mean_token_mean and Dr. GRPO's seq_mean_token_sum_norm divide by rows: 3 groups
    on 2 ranks in minibatches of 2 groups (the second minibatch's one group sits on one rank, the
    other trains dummy rows), so the global row count, not the local one, must divide."""
    settings = _settings(digits_source, prompts_per_step=3)
    many = _torchrun(algorithm, tiny_model, tmp_path / "ddp", settings)
    assert many.returncode == 0, many.stderr[-4000:]
    single = _single(algorithm, tiny_model, tmp_path / "single", settings)
    assert _max_gap(_weights(single), _weights(tmp_path / "ddp")) <= ATOL
    _assert_same_logs(single, tmp_path / "ddp")
    assert all(line["effective_batch"] == 3 and line["optimizer_steps"] == 2 for line in read_log(single))


@pytest.mark.slow
def test_the_exported_checkpoint_loads_and_one_process_resumes_a_sharded_one(ddp, tiny_model):
    from rlvr.harness.backends.hf import load_model

    final = ddp["out"] / f"checkpoint-{STEPS:06d}"
    assert (final / "dcp" / ".metadata").exists() and (final / "config.json").exists()
    model, tokenizer, _ = load_model(str(final), "float32", "cpu")
    saved = _weights(ddp["out"])
    assert all(torch.equal(p.detach(), saved[name]) for name, p in model.named_parameters())
    assert tokenizer.pad_token_id is not None
    # one process continues the 2-rank run from its step-2 checkpoint (DCP reshards): fp-close
    copy = ddp["root"] / "continued"
    copy.mkdir()
    for name in ("config.yaml", "train_log.jsonl"):
        shutil.copy(ddp["out"] / name, copy / name)
    shutil.copytree(ddp["out"] / "checkpoint-000002", copy / "checkpoint-000002")
    _single("drgrpo", tiny_model, copy, ddp["settings"], resume=True)
    assert _max_gap(saved, _weights(copy)) <= ATOL


@pytest.mark.slow
def test_a_vllm_engine_per_rank_makes_the_single_process_run(tmp_path, digits_source):
    """``backend: vllm`` on vLLM's CPU build: each rank starts its own in-process engine inside the
    torchrun world (vLLM's groups of one rank each), samples its share, is synced after each update."""
    pytest.importorskip("vllm")
    from vllm_helpers import KV_GB, vllm_tiny_model

    model = vllm_tiny_model(tmp_path / "tiny", tie=False)
    settings = _settings(digits_source, backend="vllm", kv_cache_gb=KV_GB)
    many = _torchrun("drgrpo", model, tmp_path / "ddp", settings, timeout=400)
    assert many.returncode == 0, many.stderr[-4000:]
    assert "Invalid process group" not in many.stderr  # vLLM's groups released before the world's
    one = _torchrun("drgrpo", model, tmp_path / "single", settings, timeout=400, nproc=None)
    assert one.returncode == 0, one.stderr[-4000:]
    assert _max_gap(_weights(tmp_path / "single"), _weights(tmp_path / "ddp")) <= ATOL
    _assert_same_logs(tmp_path / "single", tmp_path / "ddp")


def test_parallel_setting_is_checked():
    with pytest.raises(UserError, match="parallel must be ddp or fsdp"):
        build_config("drgrpo", "cpu-demo", {"parallel": "zero3"})


@pytest.mark.parametrize("groups,per_minibatch,world", [(4, 2, 2), (3, 2, 2), (7, 3, 2), (5, 8, 4), (1, 1, 3)])
def test_groups_are_split_whole_and_balanced(groups, per_minibatch, world):
    blocks = split_groups(groups, per_minibatch, world)
    assert [i for block in blocks for part in block for i in part] == list(range(groups))
    for block in blocks:
        sizes = [len(part) for part in block]
        assert max(sizes) - min(sizes) <= 1 and len(block) == world


class _Recorder:
    """A stand-in for the process group: the first pass records each rank's values, the second
    answers every all-reduce with their sum."""

    def __init__(self, world: int):
        self.world, self.seen, self.summed = world, [], None

    def all_reduce(self, values, op="sum"):
        if self.summed is None:
            self.seen.append(list(values))
            return list(values)
        return self.summed


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_local_weights_rescale_to_the_global_normalisation(mode):
    """Rows of a 3-group minibatch split over 2 ranks (one padded with dummy rows): the ranks'
    weights summed (÷ world_size, the DDP/FSDP average) equal one process's on the whole minibatch."""
    torch.manual_seed(0)
    world = 2
    mask = (torch.rand(6, 5) > 0.3).float()
    mask[3] = 0.0  # an overlong-masked row still counts as a sequence
    ctx = _Recorder(world)
    parts = {0: [0, 1, 4, 5], 1: [2, 3, None, None]}  # groups (0, 2) on rank 0, group 1 + dummies on rank 1
    shards = {r: Shard(ctx, rows, [slice(0, 4)], [sum(x is not None for x in rows)]) for r, rows in parts.items()}
    local = {r: torch.stack([mask[i] if i is not None else torch.zeros(5) for i in rows]) for r, rows in parts.items()}
    for r in parts:
        shards[r].scales(local[r], mode)
    ctx.summed = [sum(v) for v in zip(*ctx.seen)]
    expected = token_weights(mask, mode, 8.0)
    combined = torch.zeros_like(mask)
    for r, rows in parts.items():
        weights = token_weights(local[r], mode, 8.0) * shards[r].scales(local[r], mode)[0] / world
        for k, i in enumerate(rows):
            if i is not None:
                combined[i] += weights[k]
            else:
                assert float(weights[k].abs().sum()) == 0.0
    assert torch.allclose(combined, expected, atol=1e-7)
