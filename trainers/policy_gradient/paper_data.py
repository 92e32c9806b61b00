"""Where the papers' training sets come from: the presets name files we cannot ship (licences,
size), so ``--plan`` says where each one is published and what shape the file must have."""

from __future__ import annotations

from pathlib import PurePath

#: what every exported file must hold (``rlvr.harness.benchmarks.sources`` reads these fields)
SHAPE = "export it as JSONL with `problem` and `answer` fields"

ORIGINS: dict[str, str] = {
    "math_lvl3to5_8k.jsonl": "understand-r1-zero's datasets/train/math_lvl3to5_8k (MATH levels 3-5, 8k questions)",
    "math_12k.jsonl": "understand-r1-zero's datasets/train/math_12k (the MATH training split, 12k questions)",
    "dapo_math_17k.jsonl": "BytedTsinghua-SIA/DAPO-Math-17k on the Hugging Face Hub (DAPO, Sec. 4.1)",
    "grpo_math_train.jsonl": "DeepSeekMath's 144K GSM8K/MATH-style RL questions (not released): GSM8K + MATH train",
    "srpo_math.jsonl": "SRPO's math set (not released): e.g. DAPO-Math-17k or MATH train",
    "srpo_code.jsonl": "SRPO's code set (not released): e.g. LiveCodeBench problems before its cut-off",
}


def data_origin(source: str) -> str | None:
    """Where a preset's training file comes from, or None for a file the presets do not name."""
    origin = ORIGINS.get(PurePath(source).name)
    return f"from {origin}; {SHAPE}" if origin else None
