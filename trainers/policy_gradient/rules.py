"""The shape of a rule table: each loss aggregation, policy loss and advantage estimator is one
entry, declared once beside its math (``rlvr.trainers.policy_gradient.losses.AGGREGATIONS`` and ``POLICY_LOSSES``,
``rlvr.trainers.policy_gradient.advantages.ADVANTAGES``), and read by everything that needs it: the loss, the
distributed path, ``--plan``, the config's validation and ``--settings`` help. Adding an
aggregation is adding one entry (docs/development.md).

This module imports no torch: the help and the plan read the tables' words, not their math.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

#: what an aggregation's weights divide by on one rank; the distributed path all-reduces it
DENOMINATORS = ("rows", "tokens")


@dataclass(frozen=True)
class Aggregation:
    """How the per-token losses of a minibatch are summed into one number.

    ``weights(mask, constant)``: the weight of every token (float mask (S, T) in, zero outside
    it), computed once per minibatch. ``denominator``: what those weights divide by locally, the
    minibatch's ``rows`` or its ``tokens`` (``rlvr.trainers.policy_gradient.distributed_rows`` rescales by the global
    count). ``divides_by(size, max_tokens, constant)``: the plan's words for it. ``constant``: the
    aggregation divides by ``loss_constant`` (then the plan shows it)."""

    name: str
    weights: Callable[[Any, float | None], Any]
    denominator: str
    label: str
    divides_by: Callable[[int, int, float], str]
    source: str
    constant: bool = False

    def __post_init__(self) -> None:
        if self.denominator not in DENOMINATORS:
            raise ValueError(f"aggregation {self.name}: denominator must be one of {DENOMINATORS}")


@dataclass(frozen=True)
class PolicyLoss:
    """A per-token policy loss ℓ_t. ``terms(logp, old_logp, advantages, mask, eps_low, eps_high,
    clip_ratio_c)`` returns ``loss``, ``clip_low`` and ``clip_high`` (S, T); it may depend only on
    a sequence's own tokens (micro-batches of whole sequences then cannot change it)."""

    name: str
    terms: Callable[..., dict[str, Any]]
    label: str
    source: str


@dataclass(frozen=True)
class Advantage:
    """An advantage estimator: ``compute(rewards, group_size, eps, valid, token_counts)``, one
    value per sample. ``formula``: the plan's words (``{eps}`` is ``std_eps``); ``label``: the
    help's (empty: the name alone)."""

    name: str
    compute: Callable[..., Any]
    formula: str
    source: str
    label: str = ""


Rule = TypeVar("Rule", Aggregation, PolicyLoss, Advantage)


def rule(table: Mapping[str, Rule], name: str, setting: str) -> Rule:
    """The entry ``name`` of ``table``; an unknown one raises a ``ValueError`` listing the names."""
    if name not in table:
        raise ValueError(f"unknown {setting} {name!r}; choose from {tuple(table)}")
    return table[name]


def labelled(table: Mapping[str, Aggregation | PolicyLoss | Advantage]) -> str:
    """``name (label), name, ...`` in table order: the choices part of a setting's help."""
    return ", ".join(f"{e.name} ({e.label})" if e.label else e.name for e in table.values())
