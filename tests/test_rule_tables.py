"""Each loss aggregation, policy loss and advantage is one table entry: an entry registered in
``rlvr.trainers.policy_gradient.losses.AGGREGATIONS`` alone reaches the loss, the distributed path, ``--plan``, the
config's validation and the ``--settings`` help, so the "one place" claim cannot silently break."""

import pytest
import torch
from rlvr.trainers.cli import settings_text
from rlvr.trainers.policy_gradient import losses
from rlvr.trainers.policy_gradient.advantages import ADVANTAGES
from rlvr.trainers.policy_gradient.config import build_config
from rlvr.trainers.policy_gradient.distributed_rows import Shard
from rlvr.trainers.policy_gradient.plan import format_plan, training_plan
from rlvr.trainers.policy_gradient.rules import Aggregation


def _seq_mean_token_sum(mask: torch.Tensor, constant: float | None) -> torch.Tensor:
    return mask / mask.shape[0]


@pytest.fixture
def new_aggregation(monkeypatch):
    """A newcomer's aggregation, (1/S) Σ_s Σ_t ℓ: one entry, removed after the test."""
    entry = Aggregation(
        "seq_mean_token_sum",
        _seq_mean_token_sum,
        "rows",
        "token sums, no length normalisation",
        lambda size, max_tokens, constant: f"the {size} responses of the mini-batch only",
        "a test",
    )
    monkeypatch.setitem(losses.AGGREGATIONS, entry.name, entry)
    return entry.name


class _Sum:
    world = 2

    def all_reduce(self, values, op="sum"):
        return [2 * v for v in values]  # two ranks holding the same rows


def test_an_aggregation_added_to_the_table_alone_reaches_loss_distribution_plan_and_help(new_aggregation):
    mask = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
    assert losses.token_weights(mask, new_aggregation).tolist() == [[0.5, 0.5, 0.0], [0.5, 0.5, 0.5]]
    assert float(losses.aggregate(torch.ones(2, 3), mask, new_aggregation)) == pytest.approx(2.5)
    shard = Shard(_Sum(), [0, 1], [slice(0, 2)], [2])
    assert shard.scales(mask, new_aggregation) == [1.0]  # world · 2 local rows / 4 global rows
    cfg = build_config("grpo", None, {"loss_agg": new_aggregation}, check_data=False)
    plan = training_plan(cfg)
    assert plan["loss"]["divides_by"] == "the 32 responses of the mini-batch only"
    assert plan["loss"]["loss_constant"] is None
    assert f"{new_aggregation}: divides by the 32 responses" in format_plan(plan)
    assert f"{new_aggregation} (token sums, no length" in settings_text("grpo")


def test_an_unknown_rule_is_refused_with_the_tables_names():
    from rlvr.harness.errors import UserError

    with pytest.raises(UserError, match="loss_agg must be one of .*seq_mean_token_sum_norm"):
        build_config("grpo", None, {"loss_agg": "seq_mean_token_sum"}, check_data=False)
    with pytest.raises(ValueError, match="unknown loss aggregation 'nope'; choose from"):
        losses.token_weights(torch.ones(1, 1), "nope")
    with pytest.raises(ValueError, match="denominator"):
        Aggregation("x", _seq_mean_token_sum, "groups", "", lambda *a: "", "")


@pytest.mark.parametrize("advantage", list(ADVANTAGES))
def test_the_plan_states_every_advantage_of_the_table(advantage):
    """Every estimator has its formula in the plan (the batch modes had none: --plan failed)."""
    plan = training_plan(build_config("grpo", None, {"advantage": advantage}, check_data=False))
    assert plan["loss"]["advantage_formula"] == ADVANTAGES[advantage].formula.format(eps=1e-8)
    assert "{" not in plan["loss"]["advantage_formula"]
