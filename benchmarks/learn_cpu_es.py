"""Gradient-free post-training on a CPU: RandOpt vs CoRP on SmolLM2-135M-Instruct (embedded).

Both use their ``cpu-demo`` presets on the procedural ``arith`` task: support = the first 48
training problems (CoRP's probe = the next 32), test = the 110 held-out problems, greedy
decoding, 12 new tokens. RandOpt gets a population of N; CoRP gets N/10. Reported on the
held-out split, with 95% bootstrap CIs and paired gains over the base: base, RandOpt top-1,
RandOpt top-K majority vote, CoRP; plus forward passes spent (one greedy generation of one
problem = one pass), inference passes per test example, and RandOpt's solution density.

    python benchmarks/learn_cpu_es.py [--population 100] [--top-k 1,5,9] [--set KEY=VALUE ...] [--resume]

``--set`` overrides a config field for both runs (e.g. ``--set support_size=192``; CoRP-only
fields such as ``probe_size`` or ``local_population`` are ignored by RandOpt). ``--resume`` keeps a
run directory whose ``report.json`` exists and whose ``config.yaml`` equals the resolved config
(except ``out``) and continues an unfinished one from its generation journal, so a long
comparison can be killed and finished in parts, with the numbers of one uninterrupted run.

Writes run directories to results/learn_cpu_es/ and the table to leaderboards/learn_cpu_es/.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from harness.report_format import percent_ci as pct  # noqa: E402


def gain(entry: dict) -> str:
    if "gain_vs_base" not in entry:
        return "—"
    return pct(entry["gain_vs_base"], signed=True)


def render(randopt: dict, corp: dict, command: str) -> str:
    rows = [("base", randopt["test"]["base"], 0, 1)]
    for name, entry in randopt["test"].items():
        if name != "base":
            rows.append(
                (
                    f"RandOpt {name} (N={randopt['population']})",
                    entry,
                    randopt["search_generations"],
                    entry["inference_passes_per_example"],
                )
            )
    rows.append(
        (
            f"CoRP top-1 reference (N={corp['population']})",
            corp["test"]["top1_reference"],
            corp["search_generations"],
            1,
        )
    )
    rows.append((f"CoRP Stage 1 only (N={corp['population']})", corp["test"]["stage1"], corp["search_generations"], 1))
    rows.append((f"**CoRP** (N={corp['population']})", corp["test"]["corp"], corp["search_generations"], 1))
    lines = [
        "# Gradient-free post-training on a CPU: RandOpt vs CoRP on SmolLM2-135M-Instruct",
        "",
        f"`{command}` on 2 CPU cores; task `arith` (support {randopt['splits']['support']}, "
        f"CoRP probe {corp['splits']['probe']}, held-out test {randopt['splits']['test']}); greedy decoding; "
        f"verifier {randopt['grading']['math_verifier']}. Accuracy and gains in points with 95% bootstrap CIs (gain = "
        "paired "
        "difference vs the base on the same problems). Forward passes = greedy generations spent selecting (training).",
        "",
        "| model | held-out accuracy % [95% CI] | gain vs base, points [95% CI] | forward passes to train | inference "
        "passes / example |",
        "|---|---|---|---|---|",
    ]
    for name, entry, passes, inference in rows:
        lines.append(f"| {name} | {pct(entry['accuracy'])} | {gain(entry)} | {passes} | {inference} |")
    density = randopt["solution_density"]
    lines += [
        "",
        "RandOpt solution density (share of perturbations beating the base on support, base "
        f"{100 * density['base_support_accuracy']:.1f}%): "
        f"{100 * density['density']:.1f}% overall; per σ: "
        + ", ".join(f"σ={s}: {100 * d['density']:.0f}% (n={d['n']})" for s, d in density["per_sigma"].items())
        + ".",
        f"CoRP: Stage 1 chose q={corp['stage1']['q']}, β={corp['stage1']['beta']}, s={corp['stage1']['s']} (probe "
        f"{100 * corp['stage1']['probe_accuracy']:.1f}% vs "
        f"base {100 * corp['stage1']['base_probe_accuracy']:.1f}%; effective rank {corp['stage1']['effective_rank']}, "
        f"κ {corp['stage1']['kappa']}); "
        f"Stage 2 accepted {corp['stage2']['accepted']} of {len(corp['stage2']['rounds'])} rounds. Minutes: RandOpt "
        f"{randopt['minutes']}, CoRP {corp['minutes']}.",
        "Split-half low-rank analysis (our reconstruction) on the RandOpt population: "
        f"{json.dumps(randopt['split_half'])}.",
        "",
    ]
    return "\n".join(lines) + "\n"


def finished_with(out: Path, cfg) -> bool:
    """True when ``out`` holds a finished run of this config (up to settings that change no
    completion: the output path, worker count, noise cache), so its records are left as written."""
    from trainers.config import settings_differing_from_saved
    from trainers.es_loop import RESUMABLE_CHANGES

    return (
        (out / "report.json").is_file()
        and (out / "config.yaml").is_file()
        and not settings_differing_from_saved(out, cfg, ignore=RESUMABLE_CHANGES)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--population", type=int, default=100, help="RandOpt's population; CoRP gets a tenth")
    parser.add_argument("--top-k", default="1,5,9")
    parser.add_argument("--results", default=str(ROOT / "results" / "learn_cpu_es"))
    parser.add_argument("--board", default=str(ROOT / "leaderboards" / "learn_cpu_es"))
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field of both runs (repeatable)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep finished runs whose saved config equals the resolved one; continue unfinished ones",
    )
    args = parser.parse_args()

    import importlib

    from trainers.config import parse_overrides
    from trainers.es_config import build_es_config

    shared = parse_overrides(args.overrides)

    results, board = Path(args.results), Path(args.board)
    board.mkdir(parents=True, exist_ok=True)
    reports = {}
    for algorithm, overrides in (
        ("randopt", {"population": args.population, "top_k": [int(k) for k in args.top_k.split(",")]}),
        ("corp", {"population": max(2, args.population // 10)}),
    ):
        out = results / algorithm
        cfg = build_es_config(algorithm, "cpu-demo", {**shared, **overrides, "out": str(out)})
        if args.resume and finished_with(out, cfg):
            print(f"{algorithm}: reusing {out}")
        else:
            if out.exists() and not args.resume:
                shutil.rmtree(out)
            importlib.import_module(f"trainers.{algorithm}").train(cfg, resume=args.resume)
        reports[algorithm] = json.loads((out / "report.json").read_text())
        (board / "results.json").write_text(json.dumps(reports, indent=1))
    shown = (shlex.quote(a) for a in sys.argv[1:] if a != "--resume")
    command = " ".join(["python benchmarks/learn_cpu_es.py", *shown])
    text = render(reports["randopt"], reports["corp"], command)
    (board / "README.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
