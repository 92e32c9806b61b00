"""Per-benchmark metrics of a run from its sample records, and the table printed at the end.

``benchmarks.<name>`` in ``summary.json`` holds: ``n_problems``, ``n_samples``,
``mean_at_n`` {value, ci95}, ``pass_at_k`` {"k": {value, ci95}}, ``maj_at_k`` (math only),
``truncation_rate``, ``no_answer_rate``, ``timeout_rate``, ``grader_error_rate``, ``answer_rate``,
``length`` (tokens, for correct / incorrect / all samples), ``length_histogram`` (20 bins over
the token budget, correct vs incorrect) and ``reflection`` (self-reflection keyword rates, see
``rlvr.harness.reflection``). These names are a contract: leaderboards are built from them alone.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Sequence

from rlvr.harness.metrics import bootstrap_mean, length_stats, maj_at_k_problem, mean_at_n, pass_at_ks
from rlvr.harness.reflection import reflection_rates
from rlvr.harness.report_format import benchmark_label, percent_ci

NO_ANSWER = {"no_answer", "no_code"}
TIMEOUT = {"timeout"}  # the math grader hit its deadline (a code time_limit is the program's)
GRADER_ERROR = {"grader_error", "sandbox_error", "bad_input"}


def _rate(rows: Sequence[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> float | None:
    return round(sum(1 for r in rows if test(r)) / len(rows), 6) if rows else None


def vote_clusters(rows: Sequence[dict[str, Any]], same: Callable[[str, str], bool]) -> list[int]:
    """Cluster index per sample: samples whose extracted answers the verifier calls equal share
    a cluster; samples without an answer get -1."""
    representatives: list[str] = []
    out = []
    for row in rows:
        answer = row.get("extracted")
        if not answer or row.get("reason") in NO_ANSWER:
            out.append(-1)
            continue
        for index, rep in enumerate(representatives):
            if same(answer, rep):
                out.append(index)
                break
        else:
            representatives.append(answer)
            out.append(len(representatives) - 1)
    return out


def maj_ks(n: int) -> list[int]:
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256) if k <= n]
    return ks + ([n] if n not in ks else [])


def length_histogram(rows: Sequence[dict[str, Any]], max_tokens: int | None, bins: int = 20) -> dict[str, Any]:
    """Token-length counts for correct and incorrect samples on fixed bins over the budget."""
    lengths = [r["n_tokens"] for r in rows if r.get("n_tokens") is not None]
    top = max_tokens or max(lengths, default=1)
    edges = [round(top * i / bins, 2) for i in range(bins + 1)]

    def counts(values: list[int]) -> list[int]:
        out = [0] * bins
        for v in values:
            out[min(bins - 1, int(v * bins / top)) if top else 0] += 1
        return out

    return {
        "edges": edges,
        "correct": counts([r["n_tokens"] for r in rows if r["correct"] and r.get("n_tokens") is not None]),
        "incorrect": counts([r["n_tokens"] for r in rows if not r["correct"] and r.get("n_tokens") is not None]),
    }


def benchmark_metrics(
    kind: str,
    problem_ids: Sequence[str],
    rows: Sequence[dict[str, Any]],
    same_answer: Callable[[str, str, str], bool] | None = None,
    pass_k: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """Metrics for one benchmark. ``same_answer(problem_id, a, b)`` groups votes for maj@k."""
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_problem[row["id"]].append(row)
    ids = [pid for pid in problem_ids if by_problem.get(pid)]
    groups = [sorted(by_problem[pid], key=lambda r: r["sample_idx"]) for pid in ids]
    outcomes = [[1.0 if r["correct"] else 0.0 for r in g] for g in groups]
    flat = [r for g in groups for r in g]
    n_min = min((len(g) for g in groups), default=0)
    result: dict[str, Any] = {
        "n_problems": len(groups),
        "n_samples": len(flat),
        "samples_per_problem": n_min,
        "mean_at_n": mean_at_n(outcomes),
        "pass_at_k": pass_at_ks(outcomes, [k for k in (pass_k or range(1, n_min + 1)) if k <= n_min]) if groups else {},
        "maj_at_k": None,
        "mean_reward": round(sum(float(r.get("reward") or 0.0) for r in flat) / len(flat), 6) if flat else None,
        "truncation_rate": _rate(flat, lambda r: r.get("finish_reason") == "length"),
        "no_answer_rate": _rate(flat, lambda r: r.get("reason") in NO_ANSWER),
        "timeout_rate": _rate(flat, lambda r: r.get("reason") in TIMEOUT),
        "grader_error_rate": _rate(flat, lambda r: r.get("reason") in GRADER_ERROR),
        "answer_rate": _rate(flat, lambda r: r.get("reason") not in NO_ANSWER),
        "length": {
            "correct": length_stats([r["n_tokens"] for r in flat if r["correct"] and r.get("n_tokens") is not None]),
            "incorrect": length_stats(
                [r["n_tokens"] for r in flat if not r["correct"] and r.get("n_tokens") is not None]
            ),
            "all": length_stats([r["n_tokens"] for r in flat if r.get("n_tokens") is not None]),
        },
        "length_histogram": length_histogram(flat, max_tokens),
        "reflection": reflection_rates(r.get("completion") or "" for r in flat),
        "reasons": dict(sorted(_count(r.get("reason") for r in flat).items())),
    }
    if kind == "math" and same_answer is not None and groups:
        clusters = [vote_clusters(g, lambda a, b, pid=pid: same_answer(pid, a, b)) for pid, g in zip(ids, groups)]
        correct = [[bool(r["correct"]) for r in g] for g in groups]
        result["maj_at_k"] = {
            str(k): bootstrap_mean([maj_at_k_problem(c, ok, k) for c, ok in zip(clusters, correct)])
            for k in maj_ks(n_min)
        }
    return result


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def format_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: accuracy with CIs and the health rates beside it."""
    header = [
        "benchmark",
        "problems",
        "samples",
        "mean@n % [95% CI]",
        "pass@k",
        "maj@k",
        "trunc%",
        "no-ans%",
        "timeout%",
        "len ok/wrong",
    ]
    lines = [header]
    for name, m in summary["benchmarks"].items():
        ks = sorted(m["pass_at_k"], key=int)
        top = ks[-1] if ks else None
        passk = f"@{top} {100 * m['pass_at_k'][top]['value']:.1f}" if top and top != "1" else "-"
        maj = m.get("maj_at_k") or {}
        majk = max(maj, key=int) if maj else None
        majs = f"@{majk} {100 * maj[majk]['value']:.1f}" if majk and majk != "1" else "-"
        lengths = m["length"]
        length = f"{lengths['correct']['mean'] or '-'}/{lengths['incorrect']['mean'] or '-'}"
        rate = lambda v: "-" if v is None else f"{100 * v:.1f}"  # noqa: E731
        lines.append(
            [
                benchmark_label(name, m, summary),
                str(m["n_problems"]),
                str(m["n_samples"]),
                percent_ci(m["mean_at_n"]),
                passk,
                majs,
                rate(m["truncation_rate"]),
                rate(m["no_answer_rate"]),
                rate(m["timeout_rate"]),
                length,
            ]
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)
