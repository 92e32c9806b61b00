"""Leaderboard tables from a directory of runs: one table per protocol fingerprint.

Two numbers share a table only if everything that changes scores except the model is equal
(``protocol_fingerprint``) and, within a column, the evaluated problems are equal (the
per-benchmark fingerprint). ``mix=True`` puts every run in one table and shows the protocol
fields that differ as columns instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.harness.report_format import benchmark_label, flatten, percent, percent_ci

PROTOCOL_COLUMNS = {
    "template.name": "template",
    "sampling.n": "n",
    "sampling.temperature": "temperature",
    "sampling.top_p": "top_p",
    "sampling.max_tokens": "max_tokens",
    "sampling.seed": "seed",
    "backend.backend": "backend",
    "backend.dtype": "dtype",
    "backend.version": "engine",
    "grading.math_verifier": "math verifier",
    "grading.code_verifier": "code verifier",
}


@dataclass
class Run:
    path: Path
    summary: dict[str, Any]

    @property
    def model(self) -> str:
        """The model's name; a bare ``checkpoint-N`` is qualified by its run directory, so
        checkpoints of different training runs stay distinguishable."""
        name = self.summary["model"]["name"]
        path = self.summary["model"].get("path") or ""
        if name.startswith("checkpoint-") and path:
            return f"{Path(path).parent.name}/{name}"
        return name

    @property
    def protocol(self) -> dict[str, Any]:
        return flatten(self.summary.get("protocol", {}))


@dataclass
class Table:
    key: str
    protocol: dict[str, Any]
    columns: list[tuple[str, str]]  # (label, benchmark)
    rows: list[dict[str, Any]] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)  # display names of protocol fields (mixed tables)

    @property
    def title(self) -> str:
        if self.key.startswith("ablation:"):
            return f"Ablation `{self.key.removeprefix('ablation:')}`"
        return f"Protocol `{self.key}`"

    @property
    def description(self) -> str:
        if self.key.startswith("ablation:"):
            return (
                f"one `rlvr ablate` run: rows differ in {', '.join(self.differing) or 'nothing'} (a column); "
                f"shared: {describe_protocol(self.protocol).removeprefix('template (varies), ')}"
            )
        return describe_protocol(self.protocol)


def collect_runs(results: Path) -> tuple[list[Run], list[str]]:
    """Every run directory under ``results`` (any depth) with a readable summary."""
    runs, problems = [], []
    for path in sorted(Path(results).rglob("summary.json")):
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            if "benchmarks" in summary and "protocol_fingerprint" in summary:
                runs.append(Run(path.parent, summary))
        except (OSError, ValueError) as exc:
            problems.append(f"skipped {path}: {exc}")
    return runs, problems


def _data_key(bench: dict[str, Any]) -> str | None:
    """Which problems a cell covers: the data revision (the fingerprint for older summaries)."""
    return bench.get("data_revision") or bench.get("fingerprint")


def _columns(runs: list[Run]) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str]]:
    """Column per (benchmark, data revision); labels say when a column covers part of a benchmark
    (``gsm8k (4/1319)``: a ``--limit`` run) and disambiguate same-name columns (``#2``)."""
    seen: dict[str, list[tuple[str | None, str]]] = {}
    for run in runs:
        for name, bench in run.summary["benchmarks"].items():
            prints = seen.setdefault(name, [])
            if _data_key(bench) not in [fp for fp, _ in prints]:
                prints.append((_data_key(bench), benchmark_label(name, bench, run.summary)))
    columns, label_of = [], {}
    for name, prints in seen.items():
        labels = [label for _, label in prints]
        for index, (fp, label) in enumerate(prints):
            if labels.count(label) > 1:
                label = f"{label} #{labels[: index + 1].count(label)}"
            columns.append((label, name))
            label_of[(name, fp)] = label
    return columns, label_of


def _row(run: Run, label_of: dict[tuple[str, str], str], root: Path) -> dict[str, Any]:
    cells = {}
    for name, bench in run.summary["benchmarks"].items():
        cells[label_of[(name, _data_key(bench))]] = bench
    values = [c["mean_at_n"]["value"] for c in cells.values() if c["mean_at_n"]["value"] is not None]
    return {
        "model": run.model,
        "run": run.path.name,
        "path": run.path,
        "link": str(run.path.relative_to(root)) if run.path.is_relative_to(root) else str(run.path),
        "cells": cells,
        "average": sum(values) / len(values) if values else None,
        "summary": run.summary,
    }


def ablation_of(run: Run) -> str | None:
    """The ablation folder a run is a cell of (``rlvr ablate`` writes ``manifest.json`` beside
    its cells), or None. Its cells differ in the one setting the ablation varies, so they share one
    table with that setting as a column, not one table each."""
    manifest = run.path.parent / "manifest.json"
    try:
        cells = json.loads(manifest.read_text(encoding="utf-8")).get("cells") or []
    except (OSError, ValueError, AttributeError):
        return None
    return str(run.path.parent) if any(c.get("run") == run.path.name for c in cells) else None


def build_tables(runs: list[Run], root: Path, mix: bool = False) -> list[Table]:
    groups: dict[str, list[Run]] = {}
    for run in runs:
        ablation = None if mix else ablation_of(run)
        key = "mixed" if mix else f"ablation:{ablation}" if ablation else run.summary["protocol_fingerprint"]
        groups.setdefault(key, []).append(run)
    tables = []
    for key, members in groups.items():
        columns, label_of = _columns(members)
        protocols = [m.protocol for m in members]
        varied = mix or key.startswith("ablation:")
        differing = (
            [name for k, name in PROTOCOL_COLUMNS.items() if len({json.dumps(p.get(k)) for p in protocols}) > 1]
            if varied
            else []
        )
        shared = {k: v for k, v in protocols[0].items() if all(p.get(k) == v for p in protocols)}
        table = Table(key, protocols[0] if not varied else shared if not mix else {}, columns, differing=differing)
        table.rows = [_row(m, label_of, root) for m in members]
        full = len(columns)
        table.rows.sort(
            key=lambda r: (len(r["cells"]) < full, -(r["average"] if r["average"] is not None else -1), r["model"])
        )
        for rank, row in enumerate(table.rows, 1):
            row["rank"] = rank
            row["complete"] = len(row["cells"]) == full
        tables.append(table)
    tables.sort(key=lambda t: (-len(t.rows), t.key))
    return tables


def protocol_values(summary: dict[str, Any]) -> dict[str, Any]:
    """Display name -> value of the protocol fields a mixed table can show."""
    flat = flatten(summary.get("protocol", {}))
    return {name: flat.get(key) for key, name in PROTOCOL_COLUMNS.items()}


def describe_protocol(protocol: dict[str, Any]) -> str:
    """One line: template, sampling, engine, verifiers."""
    if not protocol:
        return "runs under different protocols (differing settings shown as columns)"

    def get(key: str) -> Any:
        return protocol.get(key, "(varies)")

    sampling = (
        "greedy"
        if not get("sampling.temperature")
        else f"T={get('sampling.temperature')}, top_p={get('sampling.top_p')}"
    )
    return (
        f"template {get('template.name')}, n={get('sampling.n')}, {sampling}, "
        f"max_tokens={get('sampling.max_tokens')}, seed={get('sampling.seed')}, "
        f"{get('backend.backend')} {get('backend.dtype')} ({get('backend.version')}), {get('grading.math_verifier')}, "
        f"{get('grading.code_verifier')}"
    )


def cell_text(bench: dict[str, Any] | None) -> str:
    """``mean [lo, hi]`` plus ``pass@n`` when there are several samples per problem."""
    if not bench:
        return "-"
    text = percent_ci(bench["mean_at_n"])
    ks = sorted(bench.get("pass_at_k") or {}, key=int)
    if ks and ks[-1] != "1":
        text += f" · pass@{ks[-1]} {percent(bench['pass_at_k'][ks[-1]]['value'])}"
    return text
