"""Throughput of the sandboxed code verifier against a naive per-test subprocess runner.

Workload, identical for both runners, graded in one run:
  humaneval+   HumanEval+ reference solutions against their base + plus inputs (expected outputs
               from the reference, computed once in the sandbox beforehand and not timed)
  livecodebench public tests of LiveCodeBench problems with the correct solutions in
               tests/fixtures/lcb_solutions.py (Python: stdin and functional)
  lcb c++      two of them in C++ (compile once, run per test: dominated by g++ on both sides)
Each LiveCodeBench problem is graded ``--samples`` times, as an RL step grades G completions.

Ours: ``CodeGrader`` with every isolation feature on (namespaces, chroot, uid switch, rlimits,
output caps), warm pool. Naive: ``subprocess.run([python, file])`` per test (``g++`` once per
C++ program, then the binary per test) with no isolation at all, on the same number of threads.

    python benchmarks/bench_code.py [--workers 2] [--problems 40] [--inputs-per-problem 50]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.lcb_solutions import CPP_SOLUTIONS, SOLUTIONS  # noqa: E402
from rlvr.harness.benchmarks.evalplus import inputs_of, reference_program  # noqa: E402
from rlvr.sandbox import CodeGrader  # noqa: E402
from rlvr.sandbox.code.judging.compare import stdout_matches  # noqa: E402
from rlvr.sandbox.code.judging.decoding import decode  # noqa: E402
from rlvr.sandbox.code.judging.reference import differential_tests, expected_outputs  # noqa: E402


def load(name: str) -> list[dict]:
    with gzip.open(ROOT / "harness" / "data" / "code" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def humaneval_jobs(grader: CodeGrader, problems: int, per_problem: int) -> list[dict]:
    jobs = []
    for row in load("humanevalplus")[:problems]:
        program = reference_program(row)
        inputs = inputs_of(row)[:per_problem]
        encoded, expected = expected_outputs(program, inputs, row["entry_point"], grader)
        tests = differential_tests(encoded, expected)
        for test, args, e in zip(tests, inputs, expected):
            test["args"], test["want"] = args, decode(e.raw(), None)  # for the naive runner
        jobs.append(
            {
                "language": "python",
                "program": program,
                "fn_name": row["entry_point"],
                "tests": tests,
                "compare": {"rule": "evalplus", "atol": float(row.get("atol") or 0)},
            }
        )
    return jobs


def lcb_jobs(language: str) -> list[dict]:
    rows = {r["id"]: r for r in load("livecodebench_v5_2408_2502")}
    if language == "cpp":
        return [
            {"language": "cpp", "program": source, "fn_name": None, "tests": rows[key]["tests"]}
            for key, source in CPP_SOLUTIONS.items()
        ]
    return [
        {
            "language": "python",
            "program": source,
            "fn_name": rows[key]["metadata"].get("func_name"),
            "tests": rows[key]["tests"],
        }
        for key, source in SOLUTIONS.items()
    ]


def run_ours(grader: CodeGrader, jobs: list[dict]) -> tuple[int, int, float]:
    items = [
        {
            "completion": f"```{j['language']}\n{j['program']}\n```",
            "tests": [
                {k: v for k, v in t.items() if k not in ("args", "want")} if "args_encoded" in t else t
                for t in j["tests"]
            ],
            "fn_name": j["fn_name"],
            "language": j["language"],
            "compare": j.get("compare"),
        }
        for j in jobs
    ]
    start = time.perf_counter()
    verdicts = grader.verify_batch(items)
    seconds = time.perf_counter() - start
    return sum(v.passed or 0 for v in verdicts), sum(v.total or 0 for v in verdicts), seconds


def _naive_test(job: dict, test: dict, workdir: str, binary: str | None) -> bool:
    kind = test.get("testtype", "functional" if "args" in test else "stdin")
    if job["language"] == "cpp":
        proc = subprocess.run([binary], input=test["input"], capture_output=True, text=True, timeout=10)
        return stdout_matches(proc.stdout, test["output"])[0]
    path = os.path.join(workdir, f"t{os.getpid()}_{id(test)}.py")
    if kind == "stdin":
        Path(path).write_text(job["program"])
        proc = subprocess.run([sys.executable, path], input=test["input"], capture_output=True, text=True, timeout=10)
        return stdout_matches(proc.stdout, test["output"])[0]
    call = f"Solution().{job['fn_name']}" if "class Solution" in job["program"] else job["fn_name"]
    Path(path).write_text(
        job["program"] + f"\nimport json, sys\nprint(json.dumps({call}(*json.loads(sys.stdin.read()))))\n"
    )
    args = (
        json.dumps(test["args"])
        if "args" in test
        else "[" + ",".join(line for line in test["input"].split("\n") if line.strip()) + "]"
    )
    proc = subprocess.run([sys.executable, path], input=args, capture_output=True, text=True, timeout=10)
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False
    want = json.loads(json.dumps(test["want"])) if "want" in test else json.loads(test["output"])
    return got == want


def run_naive(jobs: list[dict], workers: int) -> tuple[int, int, float]:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        binaries = {}
        for index, job in enumerate(jobs):
            if job["language"] == "cpp":
                source = os.path.join(workdir, f"p{index}.cpp")
                Path(source).write_text(job["program"])
                binaries[index] = os.path.join(workdir, f"p{index}")
                subprocess.run(["g++", "-O2", "-o", binaries[index], source], check=True)
        units = [(job, test, binaries.get(i)) for i, job in enumerate(jobs) for test in job["tests"]]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            passed = sum(pool.map(lambda u: _naive_test(u[0], u[1], workdir, u[2]), units))
    return passed, len(units), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--problems", type=int, default=40, help="HumanEval+ problems")
    parser.add_argument("--inputs-per-problem", type=int, default=50)
    parser.add_argument(
        "--samples", type=int, default=8, help="LiveCodeBench submissions per problem (as in RL, G samples each)"
    )
    args = parser.parse_args()
    grader = CodeGrader(workers=args.workers)
    grader.warm_up()
    workloads = {
        "humaneval+": humaneval_jobs(grader, args.problems, args.inputs_per_problem),
        "livecodebench": lcb_jobs("python") * args.samples,
        "lcb c++": lcb_jobs("cpp") * args.samples,
    }
    workloads["all"] = [job for jobs in workloads.values() for job in jobs]
    rows = []
    for name, jobs in workloads.items():
        ours = run_ours(grader, jobs)
        naive = run_naive(jobs, args.workers)
        rows.append((name, ours, naive))
        print(f"[{name}] done", file=sys.stderr)
    grader.close()
    header = (
        f"{'workload':>14} {'tests':>6} {'ours passed':>11} {'ours tests/s':>12} {'naive passed':>12} "
        f"{'naive tests/s':>13} {'ratio':>6}"
    )
    print(header)
    for name, (op, ot, osec), (np_, nt, nsec) in rows:
        print(
            f"{name:>14} {ot:>6} {op:>11} {ot / osec:>12.1f} {np_:>12} {nt / nsec:>13.1f} "
            f"{(ot / osec) / (nt / nsec):>6.1f}"
        )


if __name__ == "__main__":
    main()
