"""Grading policies: what a benchmark declares about extraction and numeric equality.

Every choice that existing graders make silently (which extractor wins, whether 0.333 equals
1/3, whether a percent sign matters) is a named field here, and each benchmark picks a preset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

EXTRACTION_RULES = ("answer_tag", "boxed", "hash", "final_hash", "answer_is", "bare", "last_number")
ANSWER_FORMATS = ("free", "boxed", "r1")


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class MathPolicy:
    """How to find the final answer and when two answers are equal.

    Attributes:
        name: preset name recorded with results.
        extract: extraction rules in precedence order (see ``EXTRACTION_RULES``).
        max_distinct_boxes: more distinct boxed values than this (plus the number of gold
            items minus one) is hedging and graded wrong; two allows one self-correction.
        decimal_rel_tol: a decimal prediction may stand for an exact gold that has no finite
            decimal expansion (1/3, pi) only within this relative error.
        rel_tol, abs_tol: a numeric tolerance the benchmark declares (None = exact).
        sig_figs: gold written as a decimal is matched at the gold's significant figures
            (Minerva's physics answers are rounded measurements).
        allow_complex: read a free ``i`` as the imaginary unit.
        strict_domain: an expression whose denominator vanishes where the gold's does not is
            not equal to it (rejects echoed unsimplified inputs such as (x^2-1)/(x-1) for x+1).
        literal_answer: the final answer must be written as a number (digits, sign, decimal
            point, thousands separators, a/b); an expression that evaluates to the gold, such as
            an echoed "5 + 3", is wrong. For tasks whose point is the computation (``arith``),
            where echoing the question would otherwise be rewarded.
        answer_format: ``free`` (default): ``extract`` searches the completion. ``boxed`` and
            ``r1`` replace extraction by the Dr. GRPO reward functions (understand-r1-zero
            ``math_grader.py``; our notes, docs/algorithms.md §2.6), so a run can be rewarded as the
            original was while equivalence stays ours: ``boxed`` (``boxed_reward_fn``, Qwen-Math
            and no template) reads only the last ``\\boxed{}`` of the whole completion; ``r1``
            (``answer_tag_reward_fn``, R1 template) needs the exact ``</think> <answer>`` and a
            ``</answer>``. Rules in ``rlvr.sandbox.math.extract.extract_original``.
    """

    name: str = "math"
    extract: tuple[str, ...] = ("answer_tag", "boxed", "final_hash", "answer_is", "bare")
    max_distinct_boxes: int = 2
    decimal_rel_tol: float = 1e-8
    rel_tol: float | None = None
    abs_tol: float | None = None
    sig_figs: bool = False
    allow_complex: bool = True
    strict_domain: bool = True
    literal_answer: bool = False
    answer_format: str = "free"

    def __post_init__(self) -> None:
        unknown = [r for r in self.extract if r not in EXTRACTION_RULES]
        if unknown:
            raise ValueError(f"unknown extraction rule(s) {unknown}; choose from {EXTRACTION_RULES}")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"unknown answer_format {self.answer_format!r}; choose from {ANSWER_FORMATS}")
        for name in ("sig_figs", "allow_complex", "strict_domain", "literal_answer"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("decimal_rel_tol", "rel_tol", "abs_tol"):
            value = getattr(self, name)
            if value is None and name != "decimal_rel_tol":
                continue
            if not _finite_number(value) or value < 0:
                raise ValueError(f"{name} must be a finite non-negative number, got {value!r}")
        boxes = self.max_distinct_boxes
        if not _finite_number(boxes) or boxes != int(boxes) or boxes < 1:
            raise ValueError(f"max_distinct_boxes must be a whole number of at least 1, got {boxes!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "extract": list(self.extract),
            "max_distinct_boxes": self.max_distinct_boxes,
            "decimal_rel_tol": self.decimal_rel_tol,
            "rel_tol": self.rel_tol,
            "abs_tol": self.abs_tol,
            "sig_figs": self.sig_figs,
            "allow_complex": self.allow_complex,
            "strict_domain": self.strict_domain,
            "literal_answer": self.literal_answer,
            "answer_format": self.answer_format,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MathPolicy":
        data = dict(data)
        if "extract" in data:
            data["extract"] = tuple(data["extract"])
        return cls(**data)


PRESETS: dict[str, MathPolicy] = {
    "math": MathPolicy(),
    "aime": MathPolicy(name="aime"),
    "gsm8k": MathPolicy(name="gsm8k", extract=("answer_tag", "hash", "boxed", "answer_is", "bare", "last_number")),
    "minerva": MathPolicy(name="minerva", sig_figs=True),
    "olympiadbench": MathPolicy(name="olympiadbench"),
    "arith": MathPolicy(
        name="arith",
        extract=("answer_tag", "boxed", "final_hash", "answer_is", "bare", "last_number"),
        literal_answer=True,
    ),
    # The Dr. GRPO originals' rewards (oat / understand-r1-zero): nothing but the last box, or
    # nothing but the exact R1 format. ``extract`` documents what is read; ``answer_format`` rules.
    "boxed_only": MathPolicy(name="boxed_only", extract=("boxed",), answer_format="boxed"),
    "r1_format": MathPolicy(name="r1_format", extract=("answer_tag", "boxed"), answer_format="r1"),
}


@dataclass(frozen=True)
class GoldSpec:
    """What a dataset row declares about its gold answer (OlympiadBench has all three)."""

    answer: str
    answer_type: str | None = None
    #: absolute numeric tolerance declared for this row (OlympiadBench ``error``)
    tolerance: float | None = None
    multiple: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


def resolve_policy(policy: "str | MathPolicy | None" = None, **overrides: Any) -> MathPolicy:
    """Return a policy from a preset name or instance, with keyword overrides applied."""
    if policy is None:
        base = PRESETS["math"]
    elif isinstance(policy, MathPolicy):
        base = policy
    elif policy in PRESETS:
        base = PRESETS[policy]
    else:
        raise ValueError(f"unknown math policy {policy!r}; choose from {sorted(PRESETS)}")
    if not overrides:
        return base
    if "extract" in overrides and not isinstance(overrides["extract"], tuple):
        extract = overrides["extract"]
        overrides["extract"] = tuple(extract.split(",") if isinstance(extract, str) else extract)
    unknown = set(overrides) - set(MathPolicy.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown math option(s) {sorted(unknown)}")
    return replace(base, **overrides)
