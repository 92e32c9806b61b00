"""Load and faults for `rlvr serve`, against grading the same items in process.

Workload (fixed, mixed, every item distinct, so the verdict cache never helps): math pairs from
the shipped benchmarks (each row's gold boxed, and the next row's gold boxed, so about half are
wrong), honest code submissions (LiveCodeBench solutions from tests/fixtures, HumanEval+
references on their base inputs) and hostile ones (fork bomb, output flood, infinite loop, memory
hog). In process: one ``GradingService`` grades the batches of ``--batch`` items from two
threads. Served: ``rlvr serve`` on loopback, two client processes sending the batches
concurrently; a grading worker is SIGKILLed mid-run (``--kill``), then the run is repeated
without the fault to show what the fault cost. Prints items/s, request latency p50/p99, errors,
lost items and the throughput ratio (server / in-process).

    python benchmarks/bench_server.py [--math 12288] [--batch 64] [--workers 2] [--kill math|code|both]
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

HOSTILE = [
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "while True:\n    print('x' * 65536)\n",
    "while True:\n    pass\n",
    "chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))\n",
]


def workload(n_math: int) -> list[dict]:
    from fixtures.lcb_solutions import SOLUTIONS

    policies = {"gsm8k": "gsm8k", "minerva_math": "minerva", "olympiadbench": "olympiadbench"}
    math_items = []
    for name in ("math500", "gsm8k", "minerva_math", "olympiadbench", "aime2024", "amc2023"):
        with gzip.open(ROOT / "harness" / "data" / "math" / f"{name}.jsonl.gz", "rt") as fh:
            rows = [json.loads(line) for line in fh]
        for i, row in enumerate(rows):
            for answer in (row["answer"], rows[(i + 1) % len(rows)]["answer"]):
                math_items.append(
                    {
                        "kind": "math",
                        "completion": f"Sample {len(math_items)}. Thus the answer is $\\boxed{{{answer}}}$.",
                        "answer": row["answer"],
                        "policy": policies.get(name, "math"),
                    }
                )
    items = []
    for k in range(n_math):  # cycle through the pairs; the sample prefix keeps every item distinct
        base = math_items[k % len(math_items)]
        items.append({**base, "completion": f"Sample {k}. " + base["completion"].split(". ", 1)[1]})
    with gzip.open(ROOT / "harness" / "data" / "code" / "livecodebench_v5_2408_2502.jsonl.gz", "rt") as fh:
        lcb = {r["id"]: r for r in map(json.loads, fh)}
    for copy in range(4):
        for key, source in SOLUTIONS.items():
            row = lcb[key]
            items.append(
                {
                    "kind": "code",
                    "completion": f"```python\n{source}\n# sample {copy}\n```",
                    "tests": row["tests"],
                    "fn_name": row["metadata"].get("func_name"),
                }
            )
    for copy, program in enumerate(HOSTILE * 2):
        items.append(
            {
                "kind": "code",
                "completion": f"```python\n{program}\n# hostile {copy}\n```",
                "tests": [{"input": "", "output": "1"}],
                "limits": {"time_s": 1, "memory_mb": 256},
            }
        )
    for index, item in enumerate(items):
        item["id"] = index
    # interleave kinds so every batch is mixed
    return sorted(items, key=lambda it: (it["id"] * 7919) % len(items))


def batches(items: list[dict], size: int) -> list[list[dict]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def run_in_process(items: list[dict], size: int, workers: int) -> float:
    """The same batches through one GradingService from two threads (as two trainers would)."""
    from concurrent.futures import ThreadPoolExecutor

    from rlvr.sandbox.service import GradingService, parse_item

    service = GradingService(workers=workers)
    service.warm_up()
    chunks = batches(items, size)

    def run(part: list[list[dict]]) -> None:
        for batch in part:
            service.grade([parse_item(it, i) for i, it in enumerate(batch)])

    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, [chunks[0::2], chunks[1::2]]))
    seconds = time.perf_counter() - start
    service.close()
    return seconds


def client(url: str, chunks: list[list[dict]], out: multiprocessing.Queue) -> None:
    import httpx

    records = []
    with httpx.Client(timeout=600) as session:
        for chunk in chunks:
            start = time.perf_counter()
            try:
                response = session.post(url + "/v1/grade", json={"items": chunk})
                status = response.status_code
                answered = len(response.json().get("results", [])) if status == 200 else 0
            except Exception:  # noqa: BLE001 - a transport failure is an error to count
                status, answered = -1, 0
            records.append((time.perf_counter() - start, status, len(chunk), answered))
    out.put(records)


def run_served(items: list[dict], size: int, workers: int, kill: str = "math") -> tuple[float, list, int, int]:
    import httpx
    from server_helpers import Server

    server = Server("--workers", str(workers)) if workers != 2 else Server()
    warm = {"kind": "math", "completion": r"\boxed{2\sqrt{3}}", "answer": r"\sqrt{12}"}
    httpx.post(
        server.url + "/v1/grade",
        json={"items": [warm, {"kind": "code", "completion": "print(1)", "tests": [{"input": "", "output": "1"}]}]},
        timeout=120,
    )
    chunks = batches(items, size)
    queue: multiprocessing.Queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client, args=(server.url, chunks[k::2], queue)) for k in range(2)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    time.sleep(0.5)
    killed = 0
    for kind in ("math", "code") if kill == "both" else (kill,) if kill != "none" else ():
        victims = [pid for pid, module in server.children().items() if kind in module]
        if victims:
            os.kill(victims[0], signal.SIGKILL)
            killed += 1
    records = []
    for _ in procs:
        records += queue.get()
    for p in procs:
        p.join()
    seconds = time.perf_counter() - start
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    server.stop()
    restarts = sum(
        float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("rlvr_worker_restarts_total{")
    )
    return seconds, records, int(restarts), killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math", type=int, default=12288)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--kill",
        choices=["math", "code", "both"],
        default="math",
        help="which grading worker to SIGKILL mid-run (default: one math worker)",
    )
    args = parser.parse_args()
    items = workload(args.math)
    n = len(items)
    local_rate = n / run_in_process(items, args.batch, args.workers)
    print(
        f"items {n} ({sum(it['kind'] == 'math' for it in items)} math, {sum(it['kind'] == 'code' for it in items)} "
        f"code), batch {args.batch}, {args.workers} workers, 2 client processes"
    )
    print(
        f"{'mode':>22} {'items/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'5xx':>4} {'4xx':>4} {'lost':>5} {'killed':>6} "
        f"{'restarts':>8} {'ratio':>6}"
    )
    print(f"{'in-process':>22} {local_rate:>9.1f} {'':>8} {'':>8} {'':>4} {'':>4} {'':>5} {'':>6} {'':>8} {1.0:>6.3f}")
    for label, kill in (("served, worker killed", args.kill), ("served, no fault", "none")):
        served, records, restarts, killed = run_served(items, args.batch, args.workers, kill)
        latencies = sorted(r[0] for r in records)
        errors_5xx = sum(1 for r in records if r[1] >= 500 or r[1] < 0)
        errors_4xx = sum(1 for r in records if 400 <= r[1] < 500)
        lost = sum(r[2] - r[3] for r in records)
        rate = n / served
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
        print(
            f"{label:>22} {rate:>9.1f} {p50:>8.1f} {p99:>8.1f} {errors_5xx:>4} {errors_4xx:>4} {lost:>5} {killed:>6} "
            f"{restarts:>8} {rate / local_rate:>6.3f}"
        )


if __name__ == "__main__":
    main()
