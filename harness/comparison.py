"""Paired comparison of two evaluation runs (same problems, per-problem differences)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.metrics import paired_difference
from rlvr.harness.report_format import benchmark_label, flatten
from rlvr.harness.results import read_samples, read_summary


def protocol_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[Any]]:
    fa, fb = flatten(a.get("protocol", {})), flatten(b.get("protocol", {}))
    return {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}


def _outcomes(run_dir: Path) -> dict[str, dict[str, list[float]]]:
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in read_samples(run_dir):
        per[row["benchmark"]][row["id"]].append(1.0 if row["correct"] else 0.0)
    return per


def compare_runs(run_a: Path, run_b: Path) -> dict[str, Any]:
    summaries = []
    for run in (run_a, run_b):
        summary = read_summary(run)
        if summary is None:
            raise UserError(f"{run} has no summary.json; finish (or resume) that `rlvr eval` first")
        summaries.append(summary)
    a, b = _outcomes(run_a), _outcomes(run_b)
    result: dict[str, Any] = {
        "a": {"run": str(run_a), "model": summaries[0]["model"]["name"], "fingerprint": summaries[0]["fingerprint"]},
        "b": {"run": str(run_b), "model": summaries[1]["model"]["name"], "fingerprint": summaries[1]["fingerprint"]},
        "protocol_differences": protocol_differences(*summaries),
        "benchmarks": {},
    }
    for name in sorted(set(a) & set(b)):
        shared = sorted(set(a[name]) & set(b[name]))
        if not shared:
            continue
        diff = paired_difference([a[name][pid] for pid in shared], [b[name][pid] for pid in shared])
        diff["mean_a"] = round(sum(sum(a[name][p]) / len(a[name][p]) for p in shared) / len(shared), 6)
        diff["mean_b"] = round(sum(sum(b[name][p]) / len(b[name][p]) for p in shared) / len(shared), 6)
        diff["label"] = benchmark_label(name, summaries[0]["benchmarks"].get(name, {}), summaries[0])
        result["benchmarks"][name] = diff
    if not result["benchmarks"]:
        raise UserError("the two runs share no evaluated problems")
    return result


def format_comparison(result: dict[str, Any]) -> str:
    lines = [f"A = {result['a']['model']} ({result['a']['run']})", f"B = {result['b']['model']} ({result['b']['run']})"]
    if result["protocol_differences"]:
        lines.append(
            "protocols differ in: "
            + ", ".join(f"{k} {v[0]!r} -> {v[1]!r}" for k, v in result["protocol_differences"].items())
        )
    lines.append(
        f"\n{'benchmark':<16} {'problems':>8} {'A %':>7} {'B %':>7} {'B-A pts [95% CI]':>24} {'B>A':>5} {'A>B':>5}"
    )
    for name, d in result["benchmarks"].items():
        lo, hi = d["ci95"]
        ci = f"{100 * d['value']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        label = d.get("label", name)
        lines.append(
            f"{label:<16} {d['n_problems']:>8} {100 * d['mean_a']:>7.1f} {100 * d['mean_b']:>7.1f} {ci:>24} "
            f"{d['b_better']:>5} {d['a_better']:>5}"
        )
    return "\n".join(lines)
