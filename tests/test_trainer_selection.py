"""Prompt selection on synthetic reward tables (DAPO dynamic sampling, SRPO history resampling,
uniform streams) and curriculum stage switching — no model involved."""

import pytest
from rlvr.harness.benchmarks.problems import Problem
from rlvr.trainers.policy_gradient.curriculum import Curriculum, Stage, probe_set
from rlvr.trainers.policy_gradient.rollout import Group
from rlvr.trainers.policy_gradient.selection import DynamicSampling, HistoryResampling, PromptStream, UniformSelection


def problems(n):
    return [Problem(f"p{i}", "synthetic", "math", f"q{i}", {"answer": "1"}) for i in range(n)]


def table_rollout(table, calls):
    """A rollout whose verdicts come from ``table[problem id]`` (a list of G booleans)."""

    def rollout(batch, key):
        calls.append(([p.id for p in batch], key))
        return [
            Group(
                p,
                [0],
                [[1]] * len(table[p.id]),
                ["x"] * len(table[p.id]),
                [False] * len(table[p.id]),
                list(table[p.id]),
            )
            for p in batch
        ]

    return rollout


def test_prompt_stream_is_a_seeded_shuffle_per_epoch_and_resumes():
    pool = problems(5)
    a = PromptStream(pool, seed=3)
    first = [p.id for p in a.take(5)]
    assert sorted(first) == [p.id for p in pool]
    second = [p.id for p in a.take(5)]
    assert sorted(second) == sorted(first) and a.epoch == 1
    b = PromptStream(pool, seed=3)
    b.take(7)
    state = b.state_dict()
    c = PromptStream(pool, seed=3)
    c.load_state_dict(state, {p.id: p for p in pool})
    assert [p.id for p in c.take(6)] == [p.id for p in b.take(6)]


def test_uniform_trains_every_group():
    pool = problems(4)
    table = {p.id: [True, True] for p in pool}
    groups, stats = UniformSelection(pool, 0).next_groups(table_rollout(table, []), 3, step=1)
    assert len(groups) == 3 and stats["generation_batches"] == 1


def test_dynamic_sampling_keeps_only_mixed_groups_and_refills():
    pool = problems(12)
    # p0..p3 all correct, p4..p7 all wrong, p8..p11 mixed
    table = {
        p.id: ([True] * 4 if i < 4 else [False] * 4 if i < 8 else [True, False, False, True])
        for i, p in enumerate(pool)
    }
    calls = []
    selector = DynamicSampling(pool, seed=1, gen_prompts=4, max_gen_batches=10)
    groups, stats = selector.next_groups(table_rollout(table, calls), 3, step=2)
    assert len(groups) == 3 and all(0 < g.accuracy < 1 for g in groups)
    assert stats["generation_batches"] == len(calls) >= 1 and stats["cap_hit"] is False
    assert stats["prompts_generated"] == 4 * len(calls)
    assert len({key for _, key in calls}) == len(calls)  # each generation batch has its own seeds


def test_dynamic_sampling_respects_the_generation_cap():
    pool = problems(8)
    table = {p.id: ([True, False] if i == 0 else [True, True]) for i, p in enumerate(pool)}
    calls = []
    groups, stats = DynamicSampling(pool, seed=0, gen_prompts=2, max_gen_batches=3).next_groups(
        table_rollout(table, calls), 4, step=1
    )
    assert len(calls) == 3 and stats["cap_hit"] is True
    assert len(groups) <= 1 and all(g.problem.id == "p0" for g in groups)


def test_dynamic_sampling_out_of_batches_trains_on_fewer_or_stops_by_choice():
    """The two conventions for a cap reached first: ``train`` (ours by default) returns the
    mixed groups found; ``stop`` (verl's DAPO recipe, the DAPO paper preset) ends the run in one line."""
    from rlvr.harness.errors import UserError

    pool = problems(8)
    table = {p.id: ([True, False] if i == 0 else [True, True]) for i, p in enumerate(pool)}
    groups, stats = DynamicSampling(pool, 0, 2, 3, "train").next_groups(table_rollout(table, []), 4, step=1)
    assert stats["cap_hit"] and len(groups) < 4
    with pytest.raises(UserError, match=r"step 1: dynamic sampling found \d of 4 groups .* 3 generation batches"):
        DynamicSampling(pool, 0, 2, 3, "stop").next_groups(table_rollout(table, []), 4, step=1)
    groups, stats = DynamicSampling(pool, 0, 8, 3, "stop").next_groups(table_rollout(table, []), 1, step=1)
    assert len(groups) == 1 and not stats["cap_hit"]  # filled in time: no stop


def test_history_resampling_drops_all_correct_prompts_at_the_epoch_boundary_only():
    pool = problems(6)
    table = {
        "p0": [True, True],
        "p1": [True, False],
        "p2": [False, False],
        "p3": [True, True],
        "p4": [False, True],
        "p5": [False, False],
    }
    selector = HistoryResampling(pool, seed=0)
    rollout = table_rollout(table, [])
    trained = []
    groups, stats = selector.next_groups(rollout, 4, step=1)
    trained += groups
    assert len(groups) == 4 and "epoch_dropped" not in stats  # no filtering inside the epoch
    groups, stats = selector.next_groups(rollout, 4, step=2)  # the epoch's last 2 prompts
    trained += groups
    assert len(groups) == 2 and stats["epoch_dropped"] == 2
    assert sorted(p.id for p in selector.stream.pool) == ["p1", "p2", "p4", "p5"]  # all-wrong p2, p5 stay
    assert sorted(selector.dropped) == ["p0", "p3"]
    seen = set()
    for step in range(3, 8):
        seen |= {g.problem.id for g in selector.next_groups(rollout, 3, step)[0]}
    assert seen == {"p1", "p2", "p4", "p5"}  # dropped prompts never return


def test_history_resampling_state_round_trip():
    pool = problems(6)
    table = {p.id: [i % 2 == 0, True] for i, p in enumerate(pool)}
    a = HistoryResampling(pool, seed=4)
    rollout = table_rollout(table, [])
    for step in range(1, 4):
        a.next_groups(rollout, 4, step)
    b = HistoryResampling(pool, seed=4)
    b.load_state_dict(a.state_dict(), {p.id: p for p in pool})
    for step in range(4, 8):
        assert [g.problem.id for g in a.next_groups(rollout, 4, step)[0]] == [
            g.problem.id for g in b.next_groups(rollout, 4, step)[0]
        ]


def test_stage_switch_on_step_count():
    curriculum = Curriculum(
        [Stage("math", ["arith_train"], until_step=3), Stage("mixed", ["arith_train", "pyfunc_train"])]
    )
    switched_at = None
    for step in range(1, 8):
        reason = curriculum.should_switch()
        if reason:
            curriculum.advance(step, reason)
            switched_at = step
        curriculum.record(0.5)
    assert switched_at == 4 and curriculum.stage.name == "mixed"
    assert curriculum.switches[0]["reason"].startswith("step 3")
    assert curriculum.should_switch() is None  # the last stage never ends


def test_stage_switch_on_reward_plateau():
    curriculum = Curriculum([Stage("math", ["a"], plateau_window=3, plateau_delta=0.05), Stage("mixed", ["a", "b"])])
    rewards = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.62, 0.61, 0.63, 0.62]
    switched_at = None
    for step, reward in enumerate(rewards, 1):
        curriculum.record(reward)
        if switched_at is None and curriculum.should_switch():
            switched_at = step
            curriculum.advance(step, "plateau")
    # step 9: mean(0.62, 0.61, 0.63) - mean(0.4, 0.5, 0.6) = +0.12; step 10: 0.62 - mean(0.5, 0.6, 0.62) = +0.047 < 0.05
    assert switched_at == 10
    state = curriculum.state_dict()
    again = Curriculum([Stage("math", ["a"], plateau_window=3), Stage("mixed", ["a", "b"])])
    again.load_state_dict(state)
    assert again.stage.name == "mixed" and again.switches == curriculum.switches


def test_stage_config_is_validated():
    with pytest.raises(ValueError, match="no data sources"):
        Stage.from_dict({"name": "x", "sources": []})
    with pytest.raises(ValueError, match="unknown stage key"):
        Stage.from_dict({"name": "x", "sources": ["a"], "until": 3})
    assert Stage.from_dict({"name": "x", "sources": "a, b", "until_step": 2}).sources == ["a", "b"]


def _learning_table(step):
    """A policy that keeps learning: p0..p3 are solved from the start; p4..p7 have accuracy
    step/10 (10 samples each), so every step the policy is better on the same prompts."""
    hard = [j < step for j in range(10)]
    return {f"p{i}": [True] * 10 if i < 4 else hard for i in range(8)}


def _history_run(stage, steps=8):
    """SRPO stage 1 driven as the loop drives it: select with History Resampling, record the
    trained batch's reward, read the probe when due, switch on a plateau."""
    pool = problems(8)
    curriculum = Curriculum([stage, Stage("math+code", ["a", "b"])])
    selector = HistoryResampling(pool, seed=0)
    probe = probe_set(pool, stage.probe_size, seed=0) if stage.probe_size else []
    batch_rewards, switched_at = [], None
    for step in range(1, steps + 1):
        if switched_at is None and curriculum.should_switch():
            switched_at = step
            break
        rollout = table_rollout(_learning_table(step), [])
        groups, _ = selector.next_groups(rollout, 4, step)
        batch_rewards.append(sum(sum(g.correct) for g in groups) / sum(len(g.correct) for g in groups))
        curriculum.record(batch_rewards[-1])
        if curriculum.probe_due():
            readings = rollout(probe, -step)
            curriculum.record_probe(sum(sum(g.correct) for g in readings) / sum(len(g.correct) for g in readings))
    return switched_at, batch_rewards, curriculum, selector


def test_plateau_reads_the_fixed_probe_not_the_pool_history_resampling_shrinks():
    """Issue 29 part 6: after epoch 1 the solved p0..p3 leave the pool, the batch reward falls
    from ~0.6 to 0.3 while the policy improves at every step. Read on the batch, the plateau
    rule switches stages at step 5 (the old behaviour); read on the fixed probe, whose reward
    rises 0.05 a step, it does not switch."""
    old = Stage("math", ["a"], plateau_window=2, plateau_delta=0.01)
    switched_at, batch, curriculum, selector = _history_run(old)
    assert sorted(selector.dropped) == ["p0", "p1", "p2", "p3"]  # dropped at the end of step 2
    assert batch[2:] == [0.3, 0.4]  # the shrunken pool's reward, below epoch 1's
    assert switched_at == 5 and sum(batch[2:]) < sum(batch[:2])
    probed = Stage("math", ["a"], plateau_window=2, plateau_delta=0.01, probe_size=8, probe_every=1)
    switched_at, batch, curriculum, _ = _history_run(probed)
    assert switched_at is None and len(batch) == 8  # the same shrinking pool, no early switch
    assert curriculum.probe_rewards == pytest.approx([0.5 + 0.05 * s for s in range(1, 9)])
    assert curriculum.state_dict()["probe_rewards"] == curriculum.probe_rewards


def test_probe_plateau_still_switches_when_the_probe_stops_improving():
    stage = Stage("math", ["a"], plateau_window=2, plateau_delta=0.01, probe_size=4, probe_every=3)
    curriculum = Curriculum([stage, Stage("mixed", ["a", "b"])])
    due = []
    for step, reading in enumerate([0.2, 0.2, 0.4, 0.4, 0.4, 0.6, 0.6, 0.6, 0.61, 0.6, 0.6, 0.6], 1):
        curriculum.record(0.0)  # a batch reward that alone would plateau at once
        if curriculum.probe_due():
            due.append(step)
            curriculum.record_probe(reading)
    assert due == [3, 6, 9, 12]
    # readings 0.4, 0.6, 0.61, 0.6: (0.61 + 0.6)/2 - (0.4 + 0.6)/2 = 0.105 -> no switch at 4 readings
    assert curriculum.should_switch() is None
    curriculum.record_probe(0.6)
    curriculum.record_probe(0.6)  # (0.6 + 0.6)/2 - (0.61 + 0.6)/2 < 0.01
    assert "probe readings" in curriculum.should_switch()
    curriculum.advance(13, "plateau")
    assert curriculum.probe_rewards == [] and not curriculum.probe_due()  # the last stage declares no probe


def test_probe_set_is_fixed_by_the_stage_seed():
    pool = problems(20)
    a = [p.id for p in probe_set(pool, 5, seed=3)]
    assert a == [p.id for p in probe_set(list(pool), 5, seed=3)] and len(set(a)) == 5
    assert a != [p.id for p in probe_set(pool, 5, seed=4)]
    assert len(probe_set(pool, 50, seed=3)) == 20


def test_probe_settings_are_validated():
    with pytest.raises(ValueError, match="probe_size and probe_every"):
        Stage.from_dict({"name": "x", "sources": ["a"], "probe_size": 0})
    stage = Stage.from_dict({"name": "x", "sources": ["a"], "plateau_window": 5, "probe_size": 64, "probe_every": 10})
    assert (stage.probe_size, stage.probe_every) == (64, 10)
