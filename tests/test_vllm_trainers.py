"""vLLM in the trainers, on vLLM's CPU build: rollouts whose engine follows the learner's weights (a
prefix-cache test that fails without the reset, tied LM heads) and populations perturbed in place
and restored exactly, in the default suite; two Dr. GRPO steps with ``backend: vllm`` and
``tis_cap`` (the sampler-learner gap they log is noise), log-probs that match after a sync and not
before, and populations scored as on the hf path, in the slow suite."""

from __future__ import annotations

import json

import pytest
import torch
from rlvr.harness.backends.vllm_engine import push_weights
from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError
from rlvr.harness.templates import load_template
from rlvr.trainers.policy_gradient.config import TrainConfig, build_config
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.populations.perturb import Component
from rlvr.trainers.runtime.telemetry import read_log
from vllm_helpers import KV_GB, learner_logprobs, max_gap, vllm_tiny_model

#: fp32 on both sides, different kernels: the gap seen is ~2e-6; anything above 1e-4 is another model
SYNCED = 1e-4


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return vllm_tiny_model(tmp_path_factory.mktemp("vllm-tiny") / "tiny")


def _cfg(model_dir: str, **extra) -> TrainConfig:
    values = {
        "model": model_dir,
        "backend": "vllm",
        "max_tokens": 8,
        "temperature": 1.0,
        "seed": 3,
        "kv_cache_gb": KV_GB,
    }
    return TrainConfig(**{**values, **extra})


@pytest.fixture(scope="module")
def rollout(model_dir):
    from rlvr.harness.backends.hf import load_model
    from rlvr.trainers.policy_gradient.vllm_rollout import VLLMRollout

    learner, tokenizer, _ = load_model(model_dir, "float32", "cpu")
    problems = [Problem(f"p{i}", "digits", "math", f"What is {i} + 1?", {"answer": str(i + 1)}) for i in range(3)]
    return VLLMRollout(learner, tokenizer, load_template("chat"), {}, _cfg(model_dir)), learner, problems


@torch.no_grad()
def _nudge(model: torch.nn.Module, seed: int, scale: float = 0.05) -> None:
    generator = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(scale * torch.randn(p.shape, generator=generator))


def _gap_to_learner(rows, learner) -> float:
    gaps = [
        max_gap(learner_logprobs(learner, prompt, ids), lps)
        for prompt, completions, _, _, logprobs in rows
        for ids, lps in zip(completions, logprobs)
    ]
    return max(gaps)


@pytest.mark.slow
def test_sampled_logprobs_match_the_learner_after_a_sync_and_not_before(rollout):
    engine, learner, problems = rollout
    assert _gap_to_learner(engine.sample(problems, 2, step=1, logprobs=True), learner) < SYNCED
    _nudge(learner, seed=1)  # an optimiser step the engine has not seen
    assert _gap_to_learner(engine.sample(problems, 2, step=2, logprobs=True), learner) > 1e-2
    engine.sync(learner)
    assert _gap_to_learner(engine.sample(problems, 2, step=2, logprobs=True), learner) < SYNCED


def test_sampled_logprobs_are_at_the_sampling_temperature(rollout):
    """At T = 0.6 vLLM's log-probs of the drawn tokens (``processed_logprobs``) are the learner's
    ``completion_logprobs(..., temperature=0.6)``: the first minibatch's ratio to the sampler is 1.
    vLLM's default ``raw_logprobs`` (before temperature), which the trainer used, were the
    learner's at T = 1 and ~0.1 away from the sampling policy's."""
    import dataclasses

    from rlvr.trainers.policy_gradient.losses import completion_logprobs

    engine, learner, problems = rollout
    engine.sync(learner)
    cfg, engine.cfg = engine.cfg, dataclasses.replace(engine.cfg, temperature=0.6)
    try:
        rows = engine.sample(problems, 2, step=5, logprobs=True)
    finally:
        engine.cfg = cfg
    for temperature, within in ((0.6, True), (1.0, False)):
        for prompt, completions, _, _, logprobs in rows:
            for ids, sampled in zip(completions, logprobs):
                row = torch.tensor([list(prompt) + list(ids)])
                mask = torch.zeros(row.shape)
                mask[0, len(prompt) :] = 1
                with torch.no_grad():
                    logp = completion_logprobs(learner, row, torch.ones_like(row), mask, temperature=temperature)[0]
                gap = max_gap(logp[0, len(prompt) :].tolist(), sampled)
                assert gap < SYNCED if within else gap > 1e-2


def test_a_cached_prompt_is_recomputed_after_a_weight_push(rollout):
    """Greedy decode of a prompt longer than a KV block (so its blocks enter the prefix cache), new
    weights, decode again: without the reset the stale blocks serve the prompt and the log-probs are
    not the learner's; ``push_weights`` (reload + checked reset) gives the learner's."""
    from rlvr.harness.backends.vllm_engine import _repack_kept_weights

    engine, learner, _ = rollout
    llm, prompt = engine.llm, list(range(200, 520))  # 320 tokens: two full 128-token blocks
    # no min_tokens: the rollout engine returns processed log-probs, which min_tokens would renormalise
    # without the end-of-sequence token
    params = engine.params_class(temperature=0.0, max_tokens=6, logprobs=0)

    def decode():
        out = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)[0].outputs[0]
        return list(out.token_ids), [lp[t].logprob for lp, t in zip(out.logprobs, out.token_ids)]

    decode()
    _nudge(learner, seed=2)
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": learner.named_parameters()})
    llm.apply_model(_repack_kept_weights)  # everything push_weights does except the reset
    ids, logprobs = decode()
    assert max_gap(learner_logprobs(learner, prompt, ids), logprobs) > 1e-2  # stale KV served the prompt
    push_weights(llm, learner.named_parameters())
    ids, logprobs = decode()
    assert max_gap(learner_logprobs(learner, prompt, ids), logprobs) < SYNCED


def test_the_heap_is_trimmed_where_the_c_library_can(monkeypatch):
    """glibc's ``malloc_trim`` gives the released weights' pages back; a C library without it
    (musl) still releases the weights, with no error."""
    import ctypes

    from rlvr.harness.backends import vllm_cpu_sleep

    assert vllm_cpu_sleep.trim_heap() is True  # this machine's glibc

    class NoTrim:
        def __getattr__(self, name):
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoTrim())
    assert vllm_cpu_sleep.trim_heap() is False


def test_a_cpu_engine_asleep_holds_no_kv_cache_and_no_weights_and_wakes_to_the_same_samples(rollout):
    """``vllm_sleep`` on a CPU (vLLM has no sleep mode there): the KV cache's storage and the
    weights (parameters and the GEMM kernels' packed copies) are released while the learner
    trains; the sync reallocates the cache, zeroed, and pushes every weight back. The prefix cache
    is dropped with it, so a prompt whose blocks were cached before sleep is recomputed, not read
    from zeroed memory: greedy log-probs and seeded samples after the sync are those before
    sleeping, and the engine refuses to run in between."""
    from rlvr.harness.backends.vllm_cpu_sleep import _kv_storages

    engine, learner, problems = rollout
    engine.sync(learner)
    llm, prompt = engine.llm, list(range(200, 520))  # two full 128-token blocks enter the prefix cache
    params = engine.params_class(temperature=0.0, max_tokens=6, logprobs=0)

    def decode():
        out = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)[0].outputs[0]
        return list(out.token_ids), [lp[t].logprob for lp, t in zip(out.logprobs, out.token_ids)]

    def kv_bytes() -> int:
        return sum(llm.collective_rpc(lambda worker: sum(s.nbytes() for s in _kv_storages(worker))))

    def weight_bytes() -> int:
        return sum(llm.apply_model(lambda model: sum(p.untyped_storage().nbytes() for p in model.parameters())))

    before, samples = decode(), engine.sample(problems, 2, step=9, logprobs=True)
    held, weights = kv_bytes(), weight_bytes()
    assert held >= KV_GB * (1 << 30) * 0.9 and weights > 0
    rss = _resident_bytes()
    engine.sleep()
    assert kv_bytes() == 0 and weight_bytes() == 0
    # the parameters (mostly the tied embedding) and the LM head kernel's packed copy of it
    assert rss - _resident_bytes() > held + 1.5 * weights
    with pytest.raises(RuntimeError, match="released"):
        engine.sample(problems, 2, step=9)
    squatter = torch.ones(held // 4)  # the released pages taken: the cache wakes at another address
    engine.sync(learner)
    assert kv_bytes() == held and weight_bytes() == weights
    assert decode() == before
    assert engine.sample(problems, 2, step=9, logprobs=True) == samples
    del squatter


def _resident_bytes() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


def test_a_budget_the_context_cannot_hold_is_refused_before_the_engine_starts(model_dir):
    from rlvr.harness.backends.hf import load_model
    from rlvr.trainers.policy_gradient.vllm_rollout import VLLMRollout

    learner, tokenizer, _ = load_model(model_dir, "float32", "cpu")
    with pytest.raises(UserError, match="max_tokens 4096 leaves no room.*2048 positions"):
        VLLMRollout(learner, tokenizer, load_template("chat"), {}, _cfg(model_dir, max_tokens=4096))


@pytest.mark.slow
def test_two_drgrpo_steps_with_backend_vllm(tmp_path, digits_source):
    """With truncated importance sampling (``tis_cap: 2``) at temperature 0.6; fp32 on both sides,
    the sampler-learner gap logged each step is numerical noise: no token's weight is capped (with
    the learner at T = 1 or vLLM's raw log-probs the gap was ~0.1 a token)."""
    values = {
        "model": vllm_tiny_model(tmp_path / "untied", tie=False),
        "backend": "vllm",
        "kv_cache_gb": KV_GB,
        "stages": [{"name": "digits", "sources": [digits_source]}],
        "eval_benchmarks": [digits_source],
        "prompts_per_step": 2,
        "group_size": 4,
        "max_tokens": 8,
        "micro_batch_size": 8,
        "max_steps": 2,
        "eval_every": 2,
        "eval_limit": 4,
        "save_optimizer": False,
        "lr": 1e-2,
        "tis_cap": 2.0,
        "temperature": 0.6,
        "out": str(tmp_path / "run"),
    }
    torch.manual_seed(0)
    out = run_training(build_config("drgrpo", "cpu-demo", values), progress=False)
    log = read_log(out)
    assert [line["step"] for line in log] == [1, 2]
    assert all(line["time_sync"] >= 0 and line["generations"] == 8 for line in log)
    assert any(line["grad_norm"] for line in log)  # the tiny model's rewards vary: a real update happened
    for line in log:
        assert line["mismatch_logp_abs_mean"] < 1e-3 and abs(line["mismatch_ratio_max"] - 1) < 0.01
        assert abs(line["mismatch_kl"]) < 1e-4 and line["tis_capped_fraction"] == 0.0
    summary = json.loads(next((out / "eval").glob("step-*/summary.json")).read_text())
    assert summary["protocol"]["backend"]["backend"] == "vllm"  # evaluated on the rollout engine itself
    assert "eval_" + summary["benchmarks"].popitem()[0] in log[-1]


# --- populations -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arith():
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.benchmarks.sources import source_instructions

    return load_problems("arith_train")[:16], source_instructions(["arith_train"])


@pytest.fixture(scope="module", params=["tiny", pytest.param("embedded", marks=pytest.mark.slow)])
def population(request, arith, model_dir):
    """The tiny tied model in the default suite (the mechanics: in-place noise and restore, in
    seconds; scoring on both paths runs in the slow suite); the embedded model in the slow suite
    (a minute of real generation)."""
    from rlvr.harness.models import resolve_model
    from rlvr.trainers.populations.scoring import PopulationScorer

    problems, instructions = arith
    path = model_dir if request.param == "tiny" else resolve_model(None)[0]
    args = (path, "chat", instructions, 12, 16, "float32", 0.0, 1, "float32", "cpu")
    vllm_scorer, hf_scorer = PopulationScorer(*args, "vllm"), PopulationScorer(*args, "hf")
    yield vllm_scorer, hf_scorer
    vllm_scorer.close()
    hf_scorer.close()


SPECS = [[], *[[Component(seed, 0.002)] for seed in (1, 2, 3)]]


@pytest.mark.slow
def test_four_perturbations_score_as_on_the_hf_path(population, arith):
    """Same weights (one Perturber), greedy decoding, fp32: the same texts and verdicts."""
    vllm_scorer, hf_scorer = population
    problems, _ = arith
    ours, theirs = vllm_scorer.score_many(SPECS, problems), hf_scorer.score_many(SPECS, problems)
    assert [s.texts for s in ours] == [s.texts for s in theirs]
    assert [s.correct.tolist() for s in ours] == [s.correct.tolist() for s in theirs]
    assert len({tuple(s.texts) for s in ours}) > 1  # the perturbations changed what the model says


def _with_logprobs(output):
    return list(output.token_ids), [lp[t].logprob for lp, t in zip(output.logprobs, output.token_ids)]


def test_perturbing_in_place_and_restoring_is_exact(population, arith):
    from rlvr.harness.backends.hf import load_model

    generator = population[0].local
    problems, _ = arith
    base = [
        (o.token_ids, [lp[t].logprob for lp, t in zip(o.logprobs, o.token_ids)])
        for o in generator.greedy(problems, True)
    ]
    generator.apply(SPECS[1])
    moved = [list(o.token_ids) for o in generator.greedy(problems)]
    generator.restore()
    after = [
        (o.token_ids, [lp[t].logprob for lp, t in zip(o.logprobs, o.token_ids)])
        for o in generator.greedy(problems, True)
    ]
    assert moved != [list(ids) for ids, _ in base]
    assert after == base  # bit-for-bit: same tokens, identical float log-probs
    checkpoint, _, _ = load_model(generator.perturber.model.name_or_path, "float32", "cpu")
    for name, p in checkpoint.named_parameters():
        assert torch.equal(generator.perturber.base[name], p) and torch.equal(dict(generator.perturber.params)[name], p)
