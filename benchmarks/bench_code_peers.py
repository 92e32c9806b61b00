"""Our code verifier against its peers on the same programs, in one run: EvalPlus 0.3.1's own
evaluator on HumanEval+ / MBPP+, and LiveCodeBench's runner (``nvidia-livecodebench``) on
LiveCodeBench.

Programs: every selected HumanEval+ / MBPP+ task's canonical solution plus mutants of the classes
in ``code_mutants.py`` (types, floats, numpy, oracles, exceptions, time-outs, ``__eq__`` tricks).
EvalPlus runs as its users run it (``evalplus.evaluate.evaluate``, ``--parallel W``), pointed at
our shipped data through ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH`` with a fresh cache,
no network. Ours runs through the project's benchmark path (``rlvr.harness.grading.EvalGrader``, the
function evaluations and rewards use) with ``W`` judges and every isolation feature on.

LiveCodeBench's runner runs as in ``lcb_peer.py`` (a subprocess inside ``unshare --mount``) on
the programs of ``lcb_programs.py`` (``--lcb-slow`` adds the classes that wait out a 6 s limit).

Printed: verdict agreement (base+plus pass, EvalPlus's pass@1 unit) overall, per dataset and per
class; every disagreement with its class, and whether it is one of our named deviations (where
EvalPlus is demonstrably wrong); cold expected-output time and warm grading throughput of both,
and their ratio; then one line per set with its warm ratio, the floor F
(``peer_floor.py``), both tools as multiples of F and (peer - F) / (ours - F), under one exclusion
rule for both peers (the classes built to wait out a time limit are graded, untimed).
``--rounds N`` times each set's two tools N times, alternating (peer, ours, peer, ours, ...), and
reports the median of each tool's seconds and the range of the per-round ratios: on a shared
virtual machine a peer that forks a large process per program slows far more than ours when the
machine does (page faults cost more), so one round can flatter either side.
``--write-fixture`` stores EvalPlus's verdicts for the conformance test.

    python benchmarks/bench_code_peers.py                       # all 542 tasks, canonical + 2 mutants, and LCB
    python benchmarks/bench_code_peers.py --sets livecodebench  # one set only
    python benchmarks/bench_code_peers.py --sets humanevalplus,livecodebench --rounds 3
    python benchmarks/bench_code_peers.py --limit 40 --per-task 8 --write-fixture tests/fixtures/evalplus_verdicts.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from code_mutants import PEER_WRONG, PEER_WRONG_TASKS, programs_for, result_kind  # noqa: E402
from peer_floor import RULE, canonical_cpu_s, floor_s, timed, untimed, versus_floor  # noqa: E402

LCB = "livecodebench"
DATASETS = {"humanevalplus": ("humaneval", "HUMANEVAL_OVERRIDE_PATH"), "mbppplus": ("mbpp", "MBPP_OVERRIDE_PATH")}
EVALPLUS_RUNNER = """
import json, sys, time
import evalplus.evaluate as E
t = time.perf_counter()
E.evaluate(dataset=sys.argv[1], samples=sys.argv[2], parallel=int(sys.argv[3]), i_just_wanna_run=True)
print("RLVR_SECONDS", time.perf_counter() - t)
"""


def load_rows(name: str) -> list[dict]:
    with gzip.open(ROOT / "harness" / "data" / "code" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def reference_kind(row: dict) -> str:
    """The type of the canonical solution's result on its first input (trusted code, run here)."""
    from rlvr.harness.benchmarks.evalplus import inputs_of, reference_program

    namespace: dict = {}
    exec(compile(reference_program(row), row["task_id"], "exec"), namespace)  # trusted dataset code
    inputs = inputs_of(row)
    return result_kind(namespace[row["entry_point"]](*inputs[0])) if inputs else "none"


def build_programs(
    datasets: list[str],
    limit: int | None,
    per_task: int,
    seed: int,
    tasks: set[str] | None = None,
    skip: set[str] = frozenset(),
) -> tuple[dict[str, list[dict]], list[dict]]:
    from rlvr.harness.benchmarks.evalplus import reference_program

    rng = random.Random(seed)
    chosen_rows, programs = {}, []
    for dataset in datasets:
        rows = [r for r in load_rows(dataset) if tasks is None or r["task_id"] in tasks]
        rows = rows[:limit] if limit else rows
        chosen_rows[dataset] = rows
        for row in rows:
            kind = reference_kind(row)
            for cls, program in programs_for(
                row["task_id"], reference_program(row), row["entry_point"], kind, per_task, rng, skip
            ):
                programs.append(
                    {
                        "id": f"{row['task_id']}#{cls}",
                        "dataset": dataset,
                        "task_id": row["task_id"],
                        "class": cls,
                        "program": program,
                    }
                )
    return chosen_rows, programs


def run_evalplus(
    dataset: str, rows: list[dict], programs: list[dict], workdir: Path, workers: int, phase: str, tag: str = ""
) -> tuple[dict[str, bool], dict[str, float]]:
    """One EvalPlus run as its users run it: ``cold`` (fresh cache: ground truth computed, its
    own printed time kept) or ``warm`` (ground truth cached, evaluation only). Its verdicts
    (base and plus both pass) and timings."""
    name, override = DATASETS[dataset]
    data = workdir / f"{dataset}{tag}.jsonl"  # EvalPlus wants a sample for every row
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = workdir / f"{dataset}{tag}.samples.jsonl"
    mine = [p for p in programs if p["dataset"] == dataset]
    samples.write_text("".join(json.dumps({"task_id": p["task_id"], "solution": p["program"]}) + "\n" for p in mine))
    runner = workdir / "evalplus_runner.py"
    runner.write_text(EVALPLUS_RUNNER)
    env = {
        **os.environ,
        override: str(data),
        "XDG_CACHE_HOME": str(workdir / f"xdg-{dataset}"),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
    }
    out = Path(str(samples).replace(".jsonl", "_eval_results.json"))  # where EvalPlus 0.3.1 writes
    out.unlink(missing_ok=True)  # else it asks on stdin whether to overwrite
    proc = subprocess.run(
        [sys.executable, str(runner), name, str(samples), str(workers)],
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise SystemExit(f"EvalPlus failed:\n{proc.stderr[-3000:]}")
    timings = {
        phase: float(next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("RLVR_SECONDS")))
    }
    for line in (proc.stdout + proc.stderr).splitlines():
        if "Expected outputs computed in" in line:
            timings["ground_truth"] = float(line.rsplit("in", 1)[1].strip().rstrip("s"))
    results = json.loads(out.read_text())["eval"]
    verdicts = {}
    position: Counter = Counter()
    for program in mine:
        entry = results[program["task_id"]][position[program["task_id"]]]
        position[program["task_id"]] += 1
        verdicts[program["id"]] = entry["base_status"] == "pass" and entry["plus_status"] == "pass"
    return verdicts, timings


def ours_cold(dataset: str, programs: list[dict], workers: int) -> float:
    """Seconds to compute the expected outputs with an empty cache (judge start-up included)."""
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.grading import EvalGrader

    wanted = {p["task_id"] for p in programs if p["dataset"] == dataset}
    t0 = time.perf_counter()
    grader = EvalGrader(workers=workers)
    grader.prepare([p for p in load_problems(dataset) if p.id in wanted])
    seconds = time.perf_counter() - t0
    grader.close()
    return seconds


def ours_warm(dataset: str, programs: list[dict], workers: int) -> tuple[dict[str, dict], float]:
    """Our verdicts through the benchmark path (expected outputs cached), and the seconds that
    grading every program took (data loading and judge start-up included)."""
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.harness.grading import EvalGrader

    mine = [p for p in programs if p["dataset"] == dataset]
    wanted = {p["task_id"] for p in mine}
    t0 = time.perf_counter()
    grader = EvalGrader(workers=workers)
    problems = {p.id: p for p in load_problems(dataset) if p.id in wanted}
    results = grader.grade([(problems[p["task_id"]], f"```python\n{p['program']}\n```") for p in mine])
    seconds = time.perf_counter() - t0
    grader.close()
    verdicts = {
        program["id"]: {"pass": v.correct, "reason": v.reason, "detail": v.detail[:160]}
        for program, v in zip(mine, results)
    }
    return verdicts, seconds


def deviation(program: dict, peer_pass: bool | None = None) -> str | None:
    """Why EvalPlus is demonstrably wrong on this program, if it is."""
    if program["class"] == "canonical" and peer_pass is False:
        return PEER_WRONG_TASKS.get(
            program["task_id"],
            "EvalPlus failed the task's own canonical solution (a time-out under load: it passes when run alone)",
        )
    return PEER_WRONG.get(program["class"]) or PEER_WRONG_TASKS.get(program["task_id"])


def report(programs: list[dict], ours: dict[str, dict], peer: dict[str, bool], timings: dict[str, dict]) -> dict:
    by_class: dict[str, Counter] = defaultdict(Counter)
    disagreements = []
    for p in programs:
        a, b = ours[p["id"]]["pass"], peer[p["id"]]
        row = by_class[p["class"]]
        row["programs"] += 1
        row["evalplus pass"] += b
        row["ours pass"] += a
        if a != b:
            why = deviation(p, b)
            row["named deviation" if why else "disagree"] += 1
            disagreements.append(
                {
                    **{k: p[k] for k in ("id", "dataset", "class")},
                    "evalplus": b,
                    "ours": a,
                    "reason": ours[p["id"]]["reason"],
                    "detail": ours[p["id"]]["detail"],
                    "deviation": why,
                }
            )
    counted = [p for p in programs if not deviation(p, peer[p["id"]])]
    agree = sum(ours[p["id"]]["pass"] == peer[p["id"]] for p in counted)
    summary = {
        "programs": len(programs),
        "compared (EvalPlus not demonstrably wrong)": len(counted),
        "agreement": round(agree / max(len(counted), 1), 4),
        "unexplained disagreements": sum(1 for d in disagreements if not d["deviation"]),
        "sandbox_error verdicts": sum(1 for v in ours.values() if v["reason"] == "sandbox_error"),
        "timings_s": timings,
        "throughput_ratio_warm": round(timings["evalplus"]["warm"] / timings["ours"]["warm"], 2),
        "cold_expected_outputs_ratio": round(
            timings["evalplus"].get("ground_truth", 0.0) / max(timings["ours"]["cold"], 1e-9), 2
        ),
    }
    print(json.dumps(summary, indent=2))
    print("\n| class | programs | EvalPlus pass | ours pass | disagree | named deviation |\n|---|---|---|---|---|---|")
    for cls in sorted(by_class):
        row = by_class[cls]
        print(
            f"| {cls} | {row['programs']} | {row['evalplus pass']} | {row['ours pass']} | {row['disagree']} | "
            f"{row['named deviation']} |"
        )
    for d in disagreements[:60]:
        print(
            f"  {'DEVIATION' if d['deviation'] else 'DISAGREE'} {d['id']}: EvalPlus "
            f"{'pass' if d['evalplus'] else 'fail'}, ours {d['reason']} {d['detail'][:100]}"
        )
    return {"summary": summary, "by_class": {k: dict(v) for k, v in by_class.items()}, "disagreements": disagreements}


def livecodebench_phase(workers: int, per_class: int, slow: bool, limit: int | None, rounds: int = 1) -> dict:
    """LiveCodeBench's runner, then ours, timed on the programs of ``lcb_programs.py`` that the
    exclusion rule keeps (``--lcb-slow`` grades the others too, untimed): agreement outside the
    named departures, both tools' warm seconds and the floor."""
    from lcb_peer import problems_by_id, run_livecodebench, run_ours
    from lcb_peer import report as lcb_report
    from lcb_programs import DEPARTURES, build

    problems = problems_by_id()
    rows = build(list(problems.values()), per_class)
    timed_rows = timed(rows)
    timed_rows = timed_rows[:: max(1, len(timed_rows) // limit)][:limit] if limit else timed_rows
    print(f"{LCB}: {len(timed_rows)} timed programs over {len({r['problem_id'] for r in rows})} problems", flush=True)
    peer_runs: list[float] = []
    ours_runs: list[float] = []
    shared_runs: list[float] = []
    for _ in range(rounds):
        peer, peer_s = run_livecodebench(timed_rows, problems, workers)
        ours, ours_s = run_ours(timed_rows, problems, workers)
        shared, shared_s = run_ours(timed_rows, problems, workers, stdin_process="submission")
        peer_runs.append(peer_s)
        ours_runs.append(ours_s)
        shared_runs.append(shared_s)
        print(
            f"{LCB} warm: LiveCodeBench {peer_s:.1f}s, ours {ours_s:.1f}s (one process per submission: "
            f"{shared_s:.1f}s)",
            flush=True,
        )
    outside = [r for r in timed_rows if r["class"] not in DEPARTURES]
    shared_agree = sum(shared[r["id"]].correct == peer[r["id"]] for r in outside)
    floor = floor_s([(v.correct, v.reason, v.detail, 0.0) for v in ours.values()])
    graded = timed_rows + (untimed(rows) if slow else [])
    if slow:
        peer.update(run_livecodebench(untimed(rows), problems, workers)[0])
        ours.update(run_ours(untimed(rows), problems, workers)[0])
    agreement = lcb_report(graded, ours, peer)
    return {
        "programs": len(graded),
        "timed": len(timed_rows),
        **agreement,
        "peer_runs": peer_runs,
        "ours_runs": ours_runs,
        "shared_runs": shared_runs,
        "shared_agreement": f"{shared_agree}/{len(outside)} outside departures (timed)",
        **floor,
    }


def print_ratios(per_set: dict[str, dict]) -> None:
    """One line per set: its peer, agreement, warm seconds of both and their ratio, the floor F,
    both tools as multiples of F, and (peer - F) / (ours - F)."""
    print(f"\nexclusion rule (both peers): {RULE}")
    print(
        "\n| set | peer | programs (timed) | agreement | peer s | ours s | peer / ours | F s | ours / F | peer / F "
        "| (peer - F) / (ours - F) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for name, row in per_set.items():
        peer_s, ours_s = statistics.median(row["peer_runs"]), statistics.median(row["ours_runs"])
        versus = versus_floor(peer_s, ours_s, row["F_s"])
        multiple = {k: "-" if v is None else f"{v:.2f}" for k, v in versus.items()}
        ratio, above = f"{peer_s / max(ours_s, 1e-9):.2f}x", multiple["above_F_ratio"]
        if len(row["peer_runs"]) > 1:  # the median, then the range of the rounds' own ratios
            rounds = list(zip(row["peer_runs"], row["ours_runs"]))
            ratios = [p / max(o, 1e-9) for p, o in rounds]
            aboves = [versus_floor(p, o, row["F_s"])["above_F_ratio"] for p, o in rounds]
            ratio += f" ({min(ratios):.2f}-{max(ratios):.2f})"
            if None not in aboves:
                above += f" ({min(aboves):.2f}-{max(aboves):.2f})"
        print(
            f"| {name} | {row['peer']} | {row['programs']} ({row['timed']}) | {row['agreement']} | "
            f"{peer_s:.1f} | {ours_s:.1f} | {ratio} | {row['F_s']:.1f} | {multiple['ours_x_F']} | "
            f"{multiple['peer_x_F']} | **{above}** |"
        )
    if any(len(row["peer_runs"]) > 1 for row in per_set.values()):
        print("  seconds: medians over the rounds; in brackets, the lowest and highest ratio of one round")
    for name, row in per_set.items():
        print(
            f"  {name} F: own CPU {row['own_cpu_s']:.1f}s + limits burnt {row['burns_s']:.1f}s, "
            f"over {row['cores']} cores"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", "--datasets", dest="sets", default=f"humanevalplus,mbppplus,{LCB}")
    parser.add_argument("--limit", type=int, default=None, help="first N tasks of each EvalPlus set")
    parser.add_argument("--per-task", type=int, default=2, help="mutants per task, drawn from the classes that apply")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the full report (JSON) here")
    parser.add_argument("--tasks", default=None, help="only these task ids (comma-separated)")
    parser.add_argument("--skip-classes", default="", help="mutant classes to leave out (comma-separated)")
    parser.add_argument("--lcb-per-class", type=int, default=8, help="LiveCodeBench programs per mutant class")
    parser.add_argument("--lcb-limit", type=int, default=None, help="an even sample of N LiveCodeBench programs")
    parser.add_argument("--lcb-slow", action="store_true", help="add the classes that wait out a 6 s limit")
    parser.add_argument(
        "--rounds", type=int, default=1, help="time each set's two tools this many times, alternating (medians)"
    )
    parser.add_argument(
        "--write-fixture", default=None, help="store programs and EvalPlus's verdicts (JSONL) for the conformance test"
    )
    parser.add_argument("--append", action="store_true", help="append to the fixture instead of replacing it")
    args = parser.parse_args()
    rounds = max(1, args.rounds)
    chosen = args.sets.split(",")
    datasets = [d for d in chosen if d in DATASETS]
    tasks = set(args.tasks.split(",")) if args.tasks else None
    rows, programs = build_programs(
        datasets, args.limit, args.per_task, args.seed, tasks, set(filter(None, args.skip_classes.split(",")))
    )
    datasets = [d for d in datasets if rows[d]]
    print(f"{len(programs)} EvalPlus programs over {sum(map(len, rows.values()))} tasks", flush=True)
    per_set: dict[str, dict] = {}
    peer, ours = {}, {}
    ep_times = {"cold": 0.0, "warm": 0.0, "ground_truth": 0.0}
    our_times = {"cold": 0.0, "warm": 0.0}
    with tempfile.TemporaryDirectory(prefix="rlvr-peers-") as tmp:
        work = Path(tmp)
        os.environ["RLVR_CACHE_DIR"] = str(work / "rlvr-cache")
        # Phase by phase, the two tools one after the other, so a drift in the machine's speed
        # (a shared 2-core machine) falls on both alike.
        for dataset in datasets:
            _, times = run_evalplus(dataset, rows[dataset], programs, work, args.workers, "cold")
            ep_times["cold"] += times["cold"]
            ep_times["ground_truth"] += times.get("ground_truth", 0.0)
            our_times["cold"] += ours_cold(dataset, programs, args.workers)
            print(
                f"{dataset} cold: EvalPlus ground truth {times.get('ground_truth', 0.0):.1f}s, ours "
                f"{our_times['cold']:.1f}s (cumulative)",
                flush=True,
            )
            mine_all = [p for p in programs if p["dataset"] == dataset]
            peer_runs: list[float] = []
            ours_runs: list[float] = []
            for _ in range(rounds):
                verdicts, times = run_evalplus(dataset, rows[dataset], timed(mine_all), work, args.workers, "warm")
                mine, seconds = ours_warm(dataset, timed(mine_all), args.workers)
                peer_runs.append(times["warm"])
                ours_runs.append(seconds)
                print(f"{dataset} warm: EvalPlus {times['warm']:.1f}s, ours {seconds:.1f}s", flush=True)
            ep_times["warm"] += statistics.median(peer_runs)
            our_times["warm"] += statistics.median(ours_runs)
            own = canonical_cpu_s(rows[dataset])
            floor = floor_s(
                [
                    (*(mine[p["id"]][k] for k in ("pass", "reason", "detail")), own[p["task_id"]])
                    for p in timed(mine_all)
                ]
            )
            excluded = untimed(mine_all)
            if excluded:  # the exclusion rule's programs: graded by both, not timed
                their_rows = [r for r in rows[dataset] if r["task_id"] in {p["task_id"] for p in excluded}]
                verdicts.update(run_evalplus(dataset, their_rows, excluded, work, args.workers, "warm", ".untimed")[0])
                mine.update(ours_warm(dataset, excluded, args.workers)[0])
            peer.update(verdicts)
            ours.update(mine)
            counted = [p for p in mine_all if not deviation(p, verdicts[p["id"]])]
            agree = sum(mine[p["id"]]["pass"] == verdicts[p["id"]] for p in counted)
            per_set[dataset] = {
                "peer": "EvalPlus 0.3.1",
                "programs": len(mine_all),
                "timed": len(timed(mine_all)),
                "agreement": f"{agree}/{len(counted)}",
                "peer_runs": peer_runs,
                "ours_runs": ours_runs,
                **floor,
            }
        if LCB in chosen:
            lcb = livecodebench_phase(args.workers, args.lcb_per_class, args.lcb_slow, args.lcb_limit, rounds)
            per_set[LCB] = {
                "peer": "LiveCodeBench (nvidia-livecodebench)",
                "programs": lcb["programs"],
                "timed": lcb["timed"],
                "agreement": f"{lcb['agree']}/{lcb['outside']} outside departures",
                "peer_runs": lcb["peer_runs"],
                "ours_runs": lcb["ours_runs"],
                **{k: lcb[k] for k in ("own_cpu_s", "burns_s", "cores", "F_s")},
            }
            per_set[f"{LCB}, stdin_process=submission"] = {
                **per_set[LCB],
                "agreement": lcb["shared_agreement"],
                "programs": lcb["timed"],
                "ours_runs": lcb["shared_runs"],
            }
    result = report(programs, ours, peer, {"evalplus": ep_times, "ours": our_times}) if programs else {}
    print_ratios(per_set)
    if args.out:
        Path(args.out).write_text(json.dumps({**result, "per_set": per_set}, indent=2))
    if args.write_fixture:
        with open(args.write_fixture, "a" if args.append else "w") as fh:
            for p in programs:
                fh.write(
                    json.dumps(
                        {
                            **{k: p[k] for k in ("id", "dataset", "task_id", "class", "program")},
                            "evalplus_pass": peer[p["id"]],
                        }
                    )
                    + "\n"
                )


if __name__ == "__main__":
    main()
