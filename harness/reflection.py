"""Self-reflection keyword statistics of responses (one vocabulary for evaluation and training).

* ``drgrpo`` — Dr. GRPO's keyword detector (Liu et al. 2025, App. D; understand-r1-zero
  ``analysis/keyword_count.py``): case-insensitive substring match on its 15-phrase pool.
* ``recheck`` / ``hesitation`` / ``exploration`` — SRPO tracks these three pattern categories
  during RL (Zhang et al. 2025, Sec. on reflection patterns) but publishes no keyword lists. The
  lists below are **our reconstruction**, not the paper's: ``recheck`` borrows Dr. GRPO's
  verification phrases, ``hesitation`` and ``exploration`` are common markers of pausing and
  of switching approach.

A response counts once per category however many phrases it contains (response-level rate).
"""

from __future__ import annotations

from typing import Iterable

DRGRPO_KEYWORDS = (
    "recheck",
    "rethink",
    "reassess",
    "reevaluate",
    "re-evaluate",
    "reevaluation",
    "re-examine",
    "reexamine",
    "reconsider",
    "reanalyze",
    "double-check",
    "check again",
    "think again",
    "verify again",
    "go over the steps",
)

#: Our reconstruction of SRPO's categories (the paper's lists are unpublished).
SRPO_PATTERNS = {
    "recheck": (
        "recheck",
        "double-check",
        "double check",
        "check again",
        "verify",
        "let me check",
        "let's check",
        "re-examine",
        "go over the steps",
    ),
    "hesitation": ("wait", "hmm", "hold on", "actually", "but wait", "on second thought", "not sure"),
    "exploration": (
        "alternatively",
        "another approach",
        "another way",
        "let's try",
        "let me try",
        "instead",
        "what if",
        "a different approach",
    ),
}

CATEGORIES = ("drgrpo", *SRPO_PATTERNS)


def hits(text: str) -> dict[str, bool]:
    """Which categories a response shows."""
    lowered = text.lower()
    out = {"drgrpo": any(k in lowered for k in DRGRPO_KEYWORDS)}
    for name, phrases in SRPO_PATTERNS.items():
        out[name] = any(p in lowered for p in phrases)
    return out


def reflection_rates(texts: Iterable[str]) -> dict[str, float | None]:
    """Share of responses showing each category (None for no responses)."""
    counts = dict.fromkeys(CATEGORIES, 0)
    total = 0
    for text in texts:
        total += 1
        for name, hit in hits(text).items():
            counts[name] += hit
    return {name: (round(counts[name] / total, 6) if total else None) for name in CATEGORIES}
