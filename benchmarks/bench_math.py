"""Accuracy and throughput of our math verifier against math-verify, measured in one run.

Workloads (every pair labelled):
  reference-79   the 79 hard pairs of the verifier survey (tests/fixtures), labels from the file
  benchmarks     every shipped math benchmark row: its gold boxed in a completion (label: correct)
                 and the next row's gold boxed (label: correct only when the two golds are the
                 same string or the pair is listed as equivalent in the self-consistency test)

Both graders see the same completions and gold strings. math-verify runs as its users run it
(``verify(parse(gold), parse(completion))`` in one process, its own timeouts; a bare answer that
its extractors miss is retried wrapped in ``$...$``, as the survey did); ours runs through
``MathGrader.verify_batch`` with a warm pool.

``--pool`` compares pool against pool on the same cores: math-verify on a process pool of
``--workers`` processes (``ProcessPoolExecutor.map``, chunks of 32) against ours with as many
symbolic workers and shards, on 10,000 labelled pairs of each kind from
``benchmarks/math_workloads.py`` (``reasoning``: a boxed answer after >= 1 KB of worked
solution; ``short``: one sentence), then our throughput with 1..N shards. Usage:

    python benchmarks/bench_math.py [--workers 2] [--limit N] [--skip-math-verify]
    python benchmarks/bench_math.py --pool [--workers 2] [--pairs 10000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from rlvr.sandbox import MathGrader  # noqa: E402

POLICY = {"gsm8k": "gsm8k", "minerva_math": "minerva", "olympiadbench": "olympiadbench"}
BENCHMARKS = ["aime2024", "aime2025", "amc2023", "gsm8k", "math500", "minerva_math", "olympiadbench"]


def reference_pairs() -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "verifier_cases_math.jsonl").open()]
    return [{"completion": r["pred"], "answer": r["gold"], "label": r["expected"]} for r in rows]


def benchmark_pairs(limit: int | None) -> list[dict]:
    from test_math_selfconsistency import HAND_CHECKED_EQUIVALENT

    pairs = []
    for name in BENCHMARKS:
        with gzip.open(ROOT / "harness" / "data" / "math" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh][:limit]
        for i, row in enumerate(rows):
            other = rows[(i + 1) % len(rows)]
            extra = {}
            if name == "olympiadbench":
                extra = {
                    "answer_type": row.get("answer_type"),
                    "tolerance": row.get("error"),
                    "multiple": row.get("is_multiple_answer"),
                }
            for answer, label in (
                (row["answer"], True),
                (
                    other["answer"],
                    other["answer"].strip() == row["answer"].strip()
                    or (row["id"], other["answer"]) in HAND_CHECKED_EQUIVALENT,
                ),
            ):
                pairs.append(
                    {
                        "completion": f"So the final answer is $\\boxed{{{answer}}}$.",
                        "answer": row["answer"],
                        "label": label,
                        "policy": POLICY.get(name, "math"),
                        **extra,
                    }
                )
    return pairs


def run_ours(pairs: list[dict], workers: int) -> tuple[list[bool], float, list[float]]:
    grader = MathGrader(workers=workers)
    grader.warm_up()
    grader.verify_batch([{"completion": r"\boxed{1}", "answer": "1"}])
    start = time.perf_counter()
    verdicts = grader.verify_batch(pairs)
    seconds = time.perf_counter() - start
    grader.close()
    return [v.correct for v in verdicts], seconds, [v.elapsed_ms for v in verdicts]


def run_math_verify(pairs: list[dict]) -> tuple[list[bool], float, list[float]]:
    from math_verify import parse, verify

    verify(parse("$1$"), parse(r"\boxed{1}"))
    results, latencies = [], []
    start = time.perf_counter()
    for pair in pairs:
        t0 = time.perf_counter()
        try:
            predicted = parse(pair["completion"]) or parse(f"${pair['completion']}$")
            ok = bool(verify(parse(f"${pair['answer']}$"), predicted))
        except BaseException:  # its timeout exception derives from BaseException
            ok = False
        latencies.append((time.perf_counter() - t0) * 1000)
        results.append(ok)
    return results, time.perf_counter() - start, latencies


def _math_verify_one(pair: dict) -> bool:
    from math_verify import parse, verify

    try:
        predicted = parse(pair["completion"]) or parse(f"${pair['completion']}$")
        return bool(verify(parse(f"${pair['answer']}$"), predicted))
    except BaseException:  # its timeout exception derives from BaseException
        return False


def run_math_verify_pool(pairs: list[dict], workers: int) -> tuple[list[bool], float, list[float]]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_math_verify_one, pairs[: 8 * workers], chunksize=4))  # import and warm every process
        start = time.perf_counter()
        results = list(pool.map(_math_verify_one, pairs, chunksize=32))
        seconds = time.perf_counter() - start
    return results, seconds, [seconds * 1000 / len(pairs)] * len(pairs)


def run_ours_sharded(pairs: list[dict], workers: int, shards: int) -> tuple[list[bool], float, list[float]]:
    grader = MathGrader(workers=workers, shards=shards)
    grader.warm_up()
    grader.verify_batch(reference_pairs() * 4)  # warm on other pairs: the timed ones start uncached
    start = time.perf_counter()
    verdicts = grader.verify_batch(pairs)
    seconds = time.perf_counter() - start
    grader.close()
    return [v.correct for v in verdicts], seconds, [v.elapsed_ms for v in verdicts]


def pool_comparison(workers: int, n_pairs: int, skip_math_verify: bool) -> None:
    from math_workloads import pairs as workload

    rows = []
    for kind in ("reasoning", "short"):
        pairs = workload(n_pairs, kind)
        ours = run_ours_sharded(pairs, workers, workers)
        theirs = None if skip_math_verify else run_math_verify_pool(pairs, workers)
        rows.append(summarize(f"{kind} (pool of {workers})", pairs, ours, theirs))
        print(f"[{kind}] done", file=sys.stderr)
    print_table(rows)
    print(f"\nscaling (reasoning, {n_pairs} pairs, {workers} symbolic workers):")
    pairs = workload(n_pairs, "reasoning")
    base = None
    for shards in range(1, workers + 1):
        _, seconds, _ = run_ours_sharded(pairs, workers, shards)
        rate = len(pairs) / seconds
        base = base or rate
        print(f"  shards {shards}: {rate:,.0f} pairs/s ({rate / base:.2f}x of 1 shard)")


def summarize(name: str, pairs: list[dict], ours, theirs) -> dict:
    labels = [p["label"] for p in pairs]
    row = {"workload": name, "n": len(pairs)}
    for tag, result in (("ours", ours), ("math-verify", theirs)):
        if result is None:
            continue
        verdicts, seconds, latencies = result
        row[f"{tag} acc"] = sum(v == lab for v, lab in zip(verdicts, labels)) / len(labels)
        row[f"{tag} false+"] = sum(v and not lab for v, lab in zip(verdicts, labels))
        row[f"{tag} false-"] = sum(lab and not v for v, lab in zip(verdicts, labels))
        row[f"{tag} pairs/s"] = len(pairs) / seconds
        row[f"{tag} p99 ms"] = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]
    if theirs is not None:
        row["ratio"] = row["ours pairs/s"] / row["math-verify pairs/s"]
    return row


def print_table(rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    fmt = {
        k: (lambda v: f"{v:.4f}")
        if k.endswith("acc")
        else (lambda v: f"{v:.1f}")
        if isinstance(rows[0].get(k), float)
        else str
        for k in columns
    }
    cells = [[fmt[k](r[k]) if k in r else "" for k in columns] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(columns)]
    print("  ".join(k.rjust(w) for k, w in zip(columns, widths)))
    for c in cells:
        print("  ".join(v.rjust(w) for v, w in zip(c, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="rows per benchmark (default: all)")
    parser.add_argument("--skip-math-verify", action="store_true")
    parser.add_argument("--pool", action="store_true", help="pool-vs-pool comparison on 10,000-pair workloads")
    parser.add_argument("--pairs", type=int, default=10000, help="pairs per workload with --pool")
    args = parser.parse_args()
    if args.pool:
        pool_comparison(args.workers, args.pairs, args.skip_math_verify)
        return
    workloads = {"reference-79": reference_pairs(), "benchmarks": benchmark_pairs(args.limit)}
    workloads["all"] = workloads["reference-79"] + workloads["benchmarks"]
    rows = []
    for name, pairs in workloads.items():
        ours = run_ours(pairs, args.workers)
        theirs = None if args.skip_math_verify else run_math_verify(pairs)
        rows.append(summarize(name, pairs, ours, theirs))
        print(f"[{name}] done", file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main()
