"""The help of the settings that pick a rule (``loss_agg``, ``policy_loss``, ``advantage``),
written from the tables when it is shown: a new entry appears in ``--settings`` with no edit here.
The tables are imported only then (they need torch; the config module does not)."""

from __future__ import annotations

from rlvr.trainers.policy_gradient.rules import labelled


def aggregation_help() -> str:
    from rlvr.trainers.policy_gradient.losses import AGGREGATIONS

    return f"how token losses are averaged: {labelled(AGGREGATIONS)}"


def policy_loss_help() -> str:
    from rlvr.trainers.policy_gradient.losses import POLICY_LOSSES

    return f"{labelled(POLICY_LOSSES)}; rlvr.trainers.policy_gradient.losses.POLICY_LOSSES"


def advantage_help() -> str:
    from rlvr.trainers.policy_gradient.advantages import ADVANTAGES

    return f"advantage: {labelled(ADVANTAGES)} (rlvr.trainers.policy_gradient.advantages)"
