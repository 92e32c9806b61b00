"""The help of the settings that pick a rule (``loss_agg``, ``policy_loss``, ``advantage``),
written from the tables when it is shown: a new entry appears in ``--settings`` with no edit here.
The tables are imported only then (they need torch; the config module does not)."""

from __future__ import annotations

from trainers.rules import labelled


def aggregation_help() -> str:
    from trainers.losses import AGGREGATIONS

    return f"how token losses are averaged: {labelled(AGGREGATIONS)}"


def policy_loss_help() -> str:
    from trainers.losses import POLICY_LOSSES

    return f"{labelled(POLICY_LOSSES)}; trainers.losses.POLICY_LOSSES"


def advantage_help() -> str:
    from trainers.advantages import ADVANTAGES

    return f"advantage: {labelled(ADVANTAGES)} (trainers.advantages)"
