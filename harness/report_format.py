"""How results are written in tables, everywhere (run summaries, ablations, leaderboards,
benchmark reports): percentages with their 95% CI, Markdown tables, flattened keys."""

from __future__ import annotations

from typing import Any, Sequence


def percent(value: float | None, signed: bool = False) -> str:
    """``0.625`` -> ``62.5`` (``+62.5`` when signed); ``-`` for a missing value."""
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def percent_ci(metric: dict[str, Any] | None, signed: bool = False) -> str:
    """``{"value": v, "ci95": [lo, hi]}`` -> ``v [lo, hi]`` in percent; ``-`` when there is no value."""
    if not metric or metric.get("value") is None:
        return "-"
    if not metric.get("ci95"):
        return percent(metric["value"], signed)
    lo, hi = metric["ci95"]
    return f"{percent(metric['value'], signed)} [{percent(lo, signed)}, {percent(hi, signed)}]"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (cells are written with ``str``)."""
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> ``{"a.b.c": value}`` (the stable column names of tables and comparisons)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}


def problems_total(name: str, bench: dict[str, Any], summary: dict[str, Any] | None = None) -> int | None:
    """How many problems the whole benchmark has: recorded by ``rlvr eval`` (``n_problems_total``),
    or for older summaries of a ``--limit`` run, the shipped benchmark's size."""
    total = bench.get("n_problems_total")
    if total is None and summary and (summary.get("config") or {}).get("limit"):
        try:
            from rlvr.harness.benchmarks.registry import all_benchmarks, load_problems

            if name in all_benchmarks():
                total = len(load_problems(name))
        except Exception:  # a renamed or broken benchmark: no total, the plain name
            total = None
    return total


def benchmark_label(name: str, bench: dict[str, Any], summary: dict[str, Any] | None = None) -> str:
    """``gsm8k``, or ``gsm8k (4/1319)`` for a run over part of a benchmark (``--limit``)."""
    total = problems_total(name, bench, summary)
    n = bench.get("n_problems")
    if total and n is not None and n < total:
        return f"{name} ({n}/{total})"
    return name
