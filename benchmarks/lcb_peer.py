"""Our code verifier against LiveCodeBench's own runner (``nvidia-livecodebench``, the upstream
``lcb_runner`` evaluation code) on the programs of ``lcb_programs.py``, over every shipped
LiveCodeBench problem.

LiveCodeBench's runner executes programs in its own process (``reliability_guard`` is not a
sandbox), so it only ever runs in a subprocess inside ``unshare --mount --propagation private``,
with a scratch directory as its working directory. Ours runs through the project's benchmark
path (``rlvr.harness.grading.EvalGrader``, what ``rlvr eval --benchmarks livecodebench`` and the
rewards use). Printed: agreement overall and per class, every disagreement, and whether it is a
named departure (``lcb_programs.DEPARTURES``). ``--write-fixture`` stores LiveCodeBench's
verdicts (identical over ``--runs`` runs, or the program is left out) for the conformance test.

    python benchmarks/lcb_peer.py                      # every class, LiveCodeBench twice
    python benchmarks/lcb_peer.py --write-fixture tests/fixtures/livecodebench_verdicts.jsonl --runs 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from lcb_programs import DEPARTURES, build  # noqa: E402

#: What ``lcb_runner`` users run: ``codegen_metrics`` (6 s per test), then its per-program grades.
LCB_RUNNER = """
import json, sys, time
from livecodebench.evaluation.compute_code_generation_metrics import codegen_metrics
from livecodebench.evaluation.pass_k_utils import extract_instance_results
job = json.load(open(sys.argv[1]))
start = time.perf_counter()
_, results, _ = codegen_metrics(
    job["samples"], [[p] for p in job["programs"]], k_list=[1], num_process_evaluate=job["workers"], timeout=6
)
grades = extract_instance_results(results)
json.dump({"passed": [bool(grades[i][0]) for i in range(len(job["programs"]))],
           "seconds": time.perf_counter() - start}, open(sys.argv[2], "w"))
"""


def problems_by_id() -> dict[str, Any]:
    from rlvr.harness.benchmarks.registry import load_problems

    return {p.id: p for p in load_problems("livecodebench")}


def lcb_sample(problem: Any) -> dict[str, str]:
    """The problem as LiveCodeBench's ``get_evaluation_sample`` gives it to ``run_test``."""
    tests = problem.gold["tests"]
    return {
        "input_output": json.dumps(
            {
                "inputs": [t["input"] for t in tests],
                "outputs": [t["output"] for t in tests],
                "fn_name": problem.gold.get("fn_name"),
            }
        )
    }


def run_livecodebench(rows: list[dict], problems: dict[str, Any], workers: int = 2) -> tuple[dict[str, bool], float]:
    """LiveCodeBench's verdict on each row (pass = every test passed), and its seconds."""
    if shutil.which("unshare") is None:
        raise RuntimeError("LiveCodeBench's runner runs only inside `unshare --mount` (util-linux)")
    with tempfile.TemporaryDirectory(prefix="rlvr-lcb-") as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        samples = [lcb_sample(problems[r["problem_id"]]) for r in rows]
        job.write_text(json.dumps({"samples": samples, "programs": [r["program"] for r in rows], "workers": workers}))
        scratch = Path(tmp) / "cwd"
        scratch.mkdir()
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            LCB_RUNNER,
            str(job),
            str(out),
        ]
        subprocess.run(command, cwd=scratch, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = json.loads(out.read_text())
    return {r["id"]: passed for r, passed in zip(rows, result["passed"])}, result["seconds"]


def run_ours(
    rows: list[dict], problems: dict[str, Any], workers: int = 2, stdin_process: str = "test"
) -> tuple[dict[str, Any], float]:
    """Our verdicts through the benchmark path, and the seconds they took (judges warm).
    ``stdin_process``: a fresh process per stdin test (``test``, the default) or one per
    submission (``submission``, as LiveCodeBench's runner)."""
    from rlvr.harness.grading import EvalGrader

    grader = EvalGrader(workers=workers, code_stdin_process=stdin_process)
    try:
        grader.service.code.warm_up()
        start = time.perf_counter()
        verdicts = grader.grade([(problems[r["problem_id"]], f"```python\n{r['program']}\n```") for r in rows])
        return {r["id"]: v for r, v in zip(rows, verdicts)}, time.perf_counter() - start
    finally:
        grader.close()


def report(rows: list[dict], ours: dict[str, Any], peer: dict[str, bool]) -> dict[str, Any]:
    by_class: dict[str, Counter] = defaultdict(Counter)
    disagreements = []
    for row in rows:
        got, want = ours[row["id"]].correct, peer[row["id"]]
        counts = by_class[row["class"]]
        counts["programs"] += 1
        counts["lcb_pass"] += want
        counts["ours_pass"] += got
        if got != want:
            named = row["class"] in DEPARTURES
            counts["departures" if named else "disagreements"] += 1
            disagreements.append((row["id"], want, ours[row["id"]].reason, named))
    outside = [r for r in rows if r["class"] not in DEPARTURES]
    agree = sum(ours[r["id"]].correct == peer[r["id"]] for r in outside)
    for row_id, want, reason, named in disagreements:
        print(f"  {'departure' if named else 'DISAGREE '} {row_id}: LiveCodeBench {want}, ours {reason}")
    for kind, counts in sorted(by_class.items()):
        print(f"  {kind:22s} {dict(counts)}")
    print(f"agreement outside the named departures: {agree}/{len(outside)}; programs {len(rows)}")
    return {"agree": agree, "outside": len(outside), "by_class": {k: dict(v) for k, v in by_class.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2, help="LiveCodeBench runs; a verdict must be the same in all")
    parser.add_argument("--classes", default="", help="only these classes (comma-separated)")
    parser.add_argument("--write-fixture", default=None, help="store programs and LiveCodeBench's verdicts (JSONL)")
    args = parser.parse_args()
    problems = problems_by_id()
    rows = build(list(problems.values()), args.per_class)
    if args.classes:
        rows = [r for r in rows if r["class"] in args.classes.split(",")]
    print(f"{len(rows)} programs over {len({r['problem_id'] for r in rows})} problems", flush=True)
    runs = []
    for number in range(args.runs):
        verdicts, seconds = run_livecodebench(rows, problems, args.workers)
        runs.append(verdicts)
        print(f"LiveCodeBench run {number + 1}: {seconds:.1f}s", flush=True)
    unstable = [r["id"] for r in rows if len({run[r["id"]] for run in runs}) > 1]
    if unstable:
        print(f"left out, LiveCodeBench's verdict changed between runs: {unstable}")
    rows = [r for r in rows if r["id"] not in unstable]
    ours, seconds = run_ours(rows, problems, args.workers)
    print(f"ours: {seconds:.1f}s", flush=True)
    report(rows, ours, runs[0])
    if args.write_fixture:
        with open(args.write_fixture, "w") as fh:
            for row in rows:
                fh.write(json.dumps({**row, "lcb_pass": runs[0][row["id"]]}) + "\n")


if __name__ == "__main__":
    main()
