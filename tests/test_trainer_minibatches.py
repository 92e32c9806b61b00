"""Mini-batches drawn as oat draws them: a permutation of the rollout step's rows, seeded by (run
seed, step) so that a resumed run and every torchrun rank draw the same one; ``none`` keeps the
rows in order (verl's actor). The DAPO preset (verl's recipe) keeps them in order."""

from __future__ import annotations

import pytest
import rlvr.trainers.policy_gradient.loop as loop
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.policy_gradient.loop import run_training
from rlvr.trainers.policy_gradient.update import minibatch_order


def test_the_order_is_a_seeded_permutation_of_the_rows():
    order = minibatch_order("rows", 0, 3, 32)
    assert sorted(order) == list(range(32)) and order != list(range(32))
    assert order == minibatch_order("rows", 0, 3, 32)  # no RNG state: a resume draws it again
    assert order != minibatch_order("rows", 0, 4, 32) and order != minibatch_order("rows", 1, 3, 32)
    assert minibatch_order("none", 0, 3, 32) == list(range(32))
    with pytest.raises(ValueError, match="minibatch_shuffle"):
        minibatch_order("groups", 0, 3, 32)


def _packed_rows(tmp_path, tiny_model, digits_source, monkeypatch, shuffle):
    seen = []
    real = loop.pack

    def recording(prompts, completions, *args, **kwargs):
        seen.append([tuple(p + c) for p, c in zip(prompts, completions)])
        return real(prompts, completions, *args, **kwargs)

    monkeypatch.setattr(loop, "pack", recording)
    values = {
        "model": tiny_model,
        "stages": [{"name": "digits", "sources": [digits_source]}],
        "prompts_per_step": 3,
        "group_size": 4,
        "max_tokens": 6,
        "minibatch_size": 4,
        "micro_batch_size": 4,
        "max_steps": 1,
        "save_optimizer": False,
        "minibatch_shuffle": shuffle,
        "out": str(tmp_path / shuffle),
    }
    run_training(build_config("drgrpo", "cpu-demo", values), progress=False)
    return seen[0]


def test_a_step_trains_its_rows_in_the_seeded_order(tmp_path, tiny_model, digits_source, monkeypatch):
    """Same rollouts (per-sample seeds); with ``rows`` the update sees them permuted by
    ``minibatch_order(seed, step 1)``, with ``none`` group by group. The old trainer took whole
    groups in order whatever it was asked."""
    in_order = _packed_rows(tmp_path, tiny_model, digits_source, monkeypatch, "none")
    shuffled = _packed_rows(tmp_path, tiny_model, digits_source, monkeypatch, "rows")
    assert shuffled == [in_order[i] for i in minibatch_order("rows", 0, 1, 12)] != in_order


def test_presets_name_their_order():
    assert build_config("drgrpo", "paper", {}, check_data=False).minibatch_shuffle == "rows"  # oat
    assert build_config("dapo", "paper", {}, check_data=False).minibatch_shuffle == "none"  # verl's actor
    with pytest.raises(Exception, match="minibatch_shuffle"):
        build_config("drgrpo", "cpu-demo", {"minibatch_shuffle": "sometimes"})


def test_prompts_longer_than_prompt_max_length_keep_their_end(tiny_model):
    """verl's left truncation (the DAPO preset's 2,048, Dr. GRPO's 1,024): the template's
    assistant header at the end survives; a short prompt is untouched."""
    from rlvr.harness.benchmarks.problems import Problem
    from rlvr.harness.templates import load_template
    from rlvr.trainers.policy_gradient.rollout import PromptCache
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    problem = Problem("p", "digits", "math", "What is " + " + ".join(["1"] * 40) + "?", {"answer": "40"})
    full = PromptCache(tokenizer, load_template("chat"), {})(problem)
    cut = PromptCache(tokenizer, load_template("chat"), {}, max_length=20)(problem)
    assert len(full) > 40 and cut == full[-20:]
    assert PromptCache(tokenizer, load_template("chat"), {}, max_length=len(full))(problem) == full
    with pytest.raises(Exception, match="prompt_max_length"):
        build_config("drgrpo", "cpu-demo", {"prompt_max_length": 0})
