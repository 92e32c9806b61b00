"""A registered benchmark or local data: where a source's problems come from, decided once.

Evaluation (``--benchmarks``), both training loops (``stages``, ``eval_benchmarks``,
``train_source`` / ``test_source``) and the config checks name their data the same way, so they
resolve it through these two functions and a name means the same problems everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.harness.benchmarks.custom import is_custom_source, load_custom, parse_fields
from rlvr.harness.benchmarks.problems import (
    CODE_INSTRUCTION,
    MATH_INSTRUCTION,
    BenchmarkSpec,
    Problem,
    with_math_policy,
)
from rlvr.harness.benchmarks.registry import get_benchmark, load_problems
from rlvr.harness.errors import UserError


@dataclass(frozen=True)
class Source:
    """One source's problems and how a prompt asks for their answers."""

    #: the benchmark name the problems carry (a local file's stem, or a dict entry's ``name``)
    name: str
    #: ``math``, ``code``, or ``mixed`` for local data holding both
    kind: str
    #: what the chat template asks for (mixed data: the code instruction)
    instruction: str
    #: every problem, in file order
    problems: list[Problem]
    notes: str = ""
    #: the registered benchmark; None for local data
    spec: BenchmarkSpec | None = None


def find_source(entry: str) -> BenchmarkSpec | None:
    """The registered benchmark ``entry`` names, or None for local data (a data file, a
    ``save_to_disk`` directory or ``hf:NAME``); reads nothing. An unknown name is one line with
    the closest registered one."""
    return None if is_custom_source(entry) else get_benchmark(entry)


def local_path(entry: str) -> Path | None:
    """The data file or directory ``entry`` names; None for a registered benchmark or a hub
    dataset (which is only checked by reading it)."""
    return None if find_source(entry) is not None or entry.startswith("hf:") else Path(entry)


def resolve_source(
    entry: str | Mapping[str, Any],
    fields: str | dict[str, str] | None = None,
    kind: str | None = None,
    policy: str | None = None,
) -> Source:
    """``entry``'s problems: a registered benchmark, a data file or ``hf:NAME``, or a mapping
    ``{path, fields?, kind?, policy?, name?}`` (a YAML ``benchmarks`` entry). ``fields``, ``kind``
    and ``policy`` apply to local data unless the mapping sets its own; ``policy`` also replaces
    a registered benchmark's math policy (None keeps each problem's own)."""
    spec = None if isinstance(entry, Mapping) else find_source(str(entry))
    if spec is None:
        local = dict(entry) if isinstance(entry, Mapping) else {"path": entry}
        if "path" not in local:
            raise UserError(f"benchmark entry {entry!r} needs a 'path' (a .jsonl/.parquet file or hf:NAME)")
        problems = load_custom(
            str(local["path"]),
            parse_fields(local.get("fields", fields)),
            local.get("kind", kind),
            local.get("policy", policy),
            local.get("name"),
        )
        kinds = {p.kind for p in problems}
        data_kind = kinds.pop() if len(kinds) == 1 else "mixed"
        instruction = MATH_INSTRUCTION if data_kind == "math" else CODE_INSTRUCTION
        return Source(problems[0].benchmark, data_kind, instruction, problems, "local data")
    problems = with_math_policy(load_problems(spec.name), policy)
    return Source(spec.name, spec.kind, spec.instruction, problems, spec.notes, spec)


def source_instructions(entries: Iterable[str]) -> dict[str, str]:
    """``{benchmark name: instruction}`` for the sources a run prompts from (the chat template's
    instruction is looked up by the benchmark name each problem carries)."""
    return {source.name: source.instruction for source in map(resolve_source, entries)}
