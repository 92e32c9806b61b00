"""Where the code verifier's time goes, against the floors the speed targets meet (README, "The speed
goal"): the CPU one submission, one further stdin test and one further call cost (kernel workers
included), what a fresh sandbox's building blocks cost, what a LiveCodeBench program costs us end
to end, and how much of the canonical solutions' grading (MBPP+, HumanEval+) is their own computation.

    python benchmarks/code_cost_floor.py                 # overhead, blocks, lcb, mbpp (~3 min on 2 cores)
    python benchmarks/code_cost_floor.py --parts overhead --repeat 300

Run it on a quiet machine, as root inside ``unshare --mount --propagation private`` (the blocks
part creates namespaces). CPU is read machine-wide from ``/proc/stat`` for the grading parts (the
sandboxes are not our children), so anything else running is counted too.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def machine_cpu_s() -> float:
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def per_fork(name: str, child, n: int = 200) -> None:
    """Fork ``n`` children that run ``child`` and exit; CPU per fork, ours and theirs."""
    cpu0, wall0 = children_cpu_s() + time.process_time(), time.perf_counter()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                child()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    cpu = children_cpu_s() + time.process_time() - cpu0
    print(f"  {name:44s} {1e3 * (time.perf_counter() - wall0) / n:6.2f} ms wall {1e3 * cpu / n:6.2f} ms CPU")


def blocks() -> None:
    """The steps every submission's sandbox takes, in a process the size of a judge."""
    import numpy  # noqa: F401  (a judge-sized address space: fork copies its page tables)
    import sympy  # noqa: F401
    from rlvr.sandbox.code.isolation.cgroups import Cgroups
    from rlvr.sandbox.code.isolation.primitives import SANDBOX_NAMESPACES, unshare

    def pid_one() -> None:
        unshare(SANDBOX_NAMESPACES)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    print("sandbox building blocks (per operation):")
    per_fork("fork + exit", lambda: None)
    per_fork("fork + unshare(5 namespaces) + exit", lambda: unshare(SANDBOX_NAMESPACES))
    per_fork("fork + unshare + fork of PID 1 + exit", pid_one)
    cgroups, why = Cgroups.detect()
    if cgroups is None:
        print(f"  cgroups unavailable: {why}")
        return
    n, cpu0, wall0 = 200, time.process_time(), time.perf_counter()
    for _ in range(n):
        cgroups.remove(cgroups.create(256 << 20, 64, 64 << 20))
    print(
        f"  {'cgroup create + remove':44s} {1e3 * (time.perf_counter() - wall0) / n:6.2f} ms wall "
        f"{1e3 * (time.process_time() - cpu0) / n:6.2f} ms CPU"
    )


def _kernel_threads() -> dict[str, int]:
    """CPU ticks of every kernel thread (children of kthreadd): the workers that tear down
    namespaces and mounts, which no process's ``getrusage`` counts."""
    ticks = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == "2":
            ticks[name] = int(fields[11]) + int(fields[12])
    return ticks


def _tree_usage(pid: int) -> tuple[float, int]:
    """A process's CPU seconds and minor page faults, its reaped descendants' included
    (``/proc``). The faults are an exact count, where CPU time on a shared virtual machine
    wanders by ±15% run to run; most of a sandbox's CPU is copy-on-write faults and the exit
    that frees their pages (perf, docs/performance.md)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK"), int(fields[7]) + int(fields[8])


def overhead_worker(repeat: int) -> None:
    """Run in a fresh process: a judge's zygote started before the judge's own modules load (as
    ``judge_main`` does), then trivial submissions graded in this process. CPU per
    submission = this judge's + the zygote's tree (every sandbox is its descendant and reaped) +
    kernel threads (a thread that exits during the run loses its last ticks: a lower bound)."""
    from rlvr.sandbox.code.isolation import box
    from rlvr.sandbox.code.isolation.primitives import isolation_available
    from rlvr.sandbox.code.isolation.zygote import start_zygote

    isolation = isolation_available()
    if not isolation[0]:
        print(f"  isolation unavailable: {isolation[1]}")
        return
    zygote = start_zygote(True)  # before the judge's own modules load, as judge_main does
    from rlvr.sandbox.code.judging import judge
    from rlvr.sandbox.code.verify import CodeGrader

    judge.ISOLATION, box.ZYGOTE = isolation, zygote

    grader = CodeGrader(workers=1)
    kinds = {
        "stdin": lambda n: grader.prepare("print(input())", [{"input": "1\n", "output": "1\n"}] * n),
        "stdin-runner": lambda n: grader.prepare(
            "print(input())", [{"input": "1\n", "output": "1\n"}] * n, stdin_process="submission"
        ),
        "call": lambda n: grader.prepare(
            "def f(x):\n    return x\n",
            [{"args": [i], "expected": i} for i in range(n)],
            fn_name="f",
            compare="livecodebench",
        ),
    }
    tick = os.sysconf("SC_CLK_TCK")
    measured: dict[tuple[str, int], float] = {}
    faults: dict[tuple[str, int], float] = {}
    for kind, n in (("stdin", 1), ("stdin", 4), ("stdin-runner", 1), ("stdin-runner", 4), ("call", 1), ("call", 21)):
        _, request, _ = kinds[kind](n)
        for _ in range(10):
            reply = judge.handle(dict(request))
        assert reply.get("passed") == n, reply
        zygote = box.ZYGOTE[0]
        k0, (z0, f0), own0, wall0 = _kernel_threads(), _tree_usage(zygote), time.process_time(), time.perf_counter()
        for _ in range(repeat):
            judge.handle(dict(request))
        k1, (z1, f1), own1, wall1 = _kernel_threads(), _tree_usage(zygote), time.process_time(), time.perf_counter()
        faults[kind, n] = (f1 - f0) / repeat
        kernel = sum(v - k0.get(p, 0) for p, v in k1.items()) / tick
        parts = [1e3 * x / repeat for x in (own1 - own0, z1 - z0, kernel)]
        measured[kind, n] = sum(parts)
        print(
            f"  {kind} x{n:<3d} {sum(parts):6.2f} CPU-ms per submission (judge {parts[0]:.2f}, sandboxes and zygote "
            f"{parts[1]:.2f}, kernel workers {parts[2]:.2f}); {1e3 * (wall1 - wall0) / repeat:.2f} ms wall; "
            f"{faults[kind, n]:.0f} page faults in the sandboxes and zygote"
        )
    print(
        f"  overhead: {measured['stdin', 1]:.2f} CPU-ms per stdin submission (one test), "
        f"{measured['call', 1]:.2f} per call-based submission (one call), "
        f"{(measured['stdin', 4] - measured['stdin', 1]) / 3:.2f} per further stdin test, "
        f"{(measured['call', 21] - measured['call', 1]) / 20:.2f} per further call; "
        f"with stdin_process=submission {measured['stdin-runner', 1]:.2f} per stdin submission, "
        f"{(measured['stdin-runner', 4] - measured['stdin-runner', 1]) / 3:.2f} per further stdin test"
    )
    print(
        f"  page faults: {faults['stdin', 1]:.0f} per stdin submission (one test), {faults['call', 1]:.0f} per "
        f"call-based submission (one call), {(faults['stdin', 4] - faults['stdin', 1]) / 3:.0f} per further stdin "
        f"test, {(faults['call', 21] - faults['call', 1]) / 20:.1f} per further call"
    )


def overhead(repeat: int) -> None:
    import subprocess

    print(f"per-submission CPU, trivial programs, {repeat} submissions each, one judge:", flush=True)
    subprocess.run([sys.executable, __file__, "--overhead-worker", "--repeat", str(repeat)], check=True, cwd=str(ROOT))


def livecodebench(workers: int) -> None:
    """Each problem's program correct by construction (a lookup: no work of its own)."""
    from lcb_peer import problems_by_id
    from lcb_programs import build
    from rlvr.harness.grading import EvalGrader

    problems = problems_by_id()
    rows = [r for r in build(list(problems.values()), 1) if r["class"] == "correct"]
    tests = sum(len(problems[r["problem_id"]].gold["tests"]) for r in rows)
    grader = EvalGrader(workers=workers)
    try:
        grader.service.code.warm_up()
        cpu0, wall0 = machine_cpu_s(), time.perf_counter()
        verdicts = grader.grade([(problems[r["problem_id"]], f"```python\n{r['program']}\n```") for r in rows])
        wall, cpu = time.perf_counter() - wall0, machine_cpu_s() - cpu0
    finally:
        grader.close()
    print(
        f"LiveCodeBench, {len(rows)} correct programs, {tests} tests, {workers} judges: {wall:.2f} s wall, "
        f"{cpu:.2f} s CPU = {1e3 * cpu / len(rows):.1f} ms per program, {1e3 * cpu / tests:.2f} ms per test; "
        f"{sum(v.correct for v in verdicts)} pass"
    )


def canonical(dataset: str) -> None:
    """Every canonical solution of ``dataset`` graded alone (one judge), and the same function run
    in-process on the same inputs with nothing around it."""
    from bench_code_peers import build_programs, load_rows
    from rlvr.harness.benchmarks.evalplus import inputs_of, reference_program
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.grading import EvalGrader

    rows = {r["task_id"]: r for r in load_rows(dataset)}
    _, programs = build_programs([dataset], None, 0, 0)
    problems = {p.id: p for p in load_problems(dataset)}
    grader = EvalGrader(workers=1)
    measured = []
    try:
        grader.prepare(list(problems.values()))
        grader.service.code.warm_up()
        for program in (p for p in programs if p["class"] == "canonical"):
            row = rows[program["task_id"]]
            start = time.perf_counter()
            grader.grade([(problems[row["task_id"]], f"```python\n{program['program']}\n```")])
            graded = time.perf_counter() - start
            namespace: dict = {}
            exec(compile(reference_program(row), row["task_id"], "exec"), namespace)  # trusted dataset code
            function, inputs = namespace[row["entry_point"]], inputs_of(row)
            start = time.perf_counter()
            for args in inputs:
                try:
                    function(*copy.deepcopy(args))
                except Exception:
                    pass
            measured.append((graded, time.perf_counter() - start, len(inputs), row["task_id"]))
    finally:
        grader.close()
    graded, own, calls = (sum(m[i] for m in measured) for i in range(3))
    print(
        f"{dataset} canonical, {len(measured)} programs, {calls} calls: graded {graded:.1f} s, their own computation "
        f"{own:.1f} s, ours {graded - own:.1f} s ({1e3 * (graded - own) / len(measured):.1f} ms per program)"
    )
    for g, o, n, task in sorted(measured, reverse=True)[:5]:
        print(f"  {task:10s} graded {g:6.2f} s, own {o:6.2f} s, {n} calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--parts", default="overhead,blocks,lcb,mbpp", help="overhead, blocks, lcb, mbpp, humaneval (comma-separated)"
    )
    parser.add_argument("--workers", type=int, default=2, help="judges for the LiveCodeBench part")
    parser.add_argument("--repeat", type=int, default=200, help="submissions per kind for the overhead part")
    parser.add_argument("--overhead-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.overhead_worker:
        overhead_worker(args.repeat)
        return
    parts = set(args.parts.split(","))
    if "overhead" in parts:
        overhead(args.repeat)
    if "blocks" in parts:
        blocks()
    if "lcb" in parts:
        livecodebench(args.workers)
    if "mbpp" in parts:
        canonical("mbppplus")
    if "humaneval" in parts:
        canonical("humanevalplus")


if __name__ == "__main__":
    main()
