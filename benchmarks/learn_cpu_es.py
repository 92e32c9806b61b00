"""Gradient-free post-training on a CPU: RandOpt vs CoRP on SmolLM2-135M-Instruct (embedded).

Both use their ``cpu-demo`` presets on the procedural ``arith`` task: support = the first 48
training problems (CoRP's probe = the next 32, its hold-out gate the next 64), test = the 110
held-out problems (``--set test_source=arith_test1k``: 1,010), greedy decoding, 12 new tokens.
RandOpt gets a population of N; CoRP gets N/10. Reported on the held-out split, with 95%
bootstrap CIs, paired gains over the base (fixed / broken problems) and, beside every
comparison, its minimum detectable effect (MDE: the paired difference this test would detect
with 80% power at two-sided α = 0.05, given the comparison's own discordance); then CoRP head to
head against every RandOpt model on the same problems; plus forward passes spent (one greedy
generation of one problem = one pass), inference passes per test example, and RandOpt's
solution density.

    python benchmarks/learn_cpu_es.py [--population 100] [--top-k 1,5,9] [--set KEY=VALUE ...] [--resume]
    python benchmarks/learn_cpu_es.py --equal-budget --corp-population 50 [...] [--only corp|randopt]

``--set`` overrides a config field for both runs (e.g. ``--set support_size=192``; CoRP-only
fields such as ``probe_size`` or ``local_population`` are ignored by RandOpt). ``--resume`` keeps a
run directory whose ``report.json`` exists and whose ``config.yaml`` equals the resolved config
(except the settings a resume may change: ``out``, ``workers``, ``noise_cache_gb``) and continues
an unfinished one from its generation journal, so a long comparison can be killed and finished
in parts, with the numbers of one uninterrupted run.

``--equal-budget`` runs CoRP first (population ``--corp-population``, default N/10), then gives
RandOpt as many members as CoRP's forward passes buy at the same support size:
N = ⌊passes_CoRP / support⌋ − 1 (RandOpt spends one support pass on the base and one per member),
so RandOpt spends at most CoRP's passes and less than one member fewer. ``--only corp`` /
``--only randopt`` runs one of the two (in equal-budget mode CoRP's part must come first), so the
comparison can be done in parts; the table is written once both reports exist. Without ``--only``
each part runs in a child process of its own (this script with ``--only``), so the second
part starts with the memory the first one held given back.
``--render-only`` writes the table again from the run directories, running nothing.

Writes run directories to results/learn_cpu_es/ and the table to leaderboards/learn_cpu_es/.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from rlvr.harness.report_format import percent_ci as pct  # noqa: E402


def mde(n: int, discordant: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimum detectable effect (a difference of proportions) of a paired comparison of two
    models on the same ``n`` problems, ``discordant`` of which they answer differently:
    (z_{1−α/2} + z_power) · √(p_d / n) with p_d = discordant / n — McNemar's test in its normal
    approximation, Var(Δ̂) ≈ p_d / n. At α = 0.05 and 80% power the factor is 2.8016. None when
    nothing is discordant (the formula would claim that any effect is detectable)."""
    if n <= 0 or discordant <= 0:
        return None
    z = NormalDist().inv_cdf
    return (z(1 - alpha / 2) + z(power)) * math.sqrt(discordant / n / n)


def equal_budget_population(passes: int, support_size: int) -> int:
    """RandOpt's population for a budget of ``passes`` forward passes on ``support_size``
    problems: the base and each member cost one pass per support problem."""
    return passes // support_size - 1


def gain(entry: dict) -> str:
    if "gain_vs_base" not in entry:
        return "—"
    return pct(entry["gain_vs_base"], signed=True)


def mde_cell(paired: dict | None) -> str:
    """The MDE of a ``rlvr.harness.metrics.paired_difference`` result, in points."""
    if not paired or "n_problems" not in paired:
        return "—"
    value = mde(paired["n_problems"], paired["a_better"] + paired["b_better"])
    return "— (no discordant pairs)" if value is None else f"{100 * value:.1f}"


def fixed_broken(paired: dict | None) -> str:
    if not paired or "n_problems" not in paired:
        return "—"
    return f"{paired['b_better']} / {paired['a_better']}"


def head_to_head(
    randopt_samples: Sequence[dict], corp_samples: Sequence[dict], corp_model: str = "corp"
) -> list[dict[str, Any]]:
    """CoRP minus every RandOpt model, paired on the same test problems (rows of
    ``test_samples.jsonl``): difference with a 95% bootstrap CI, who is better where, MDE."""
    from rlvr.harness.metrics import paired_difference

    if [r["problem_id"] for r in randopt_samples] != [r["problem_id"] for r in corp_samples]:
        return []
    models = [k for k in randopt_samples[0] if k not in ("problem_id", "gold", "base")] if randopt_samples else []
    out = []
    for model in models:
        a = [[float(r[model]["correct"])] for r in randopt_samples]
        b = [[float(r[corp_model]["correct"])] for r in corp_samples]
        out.append({"randopt": model, "corp": corp_model, "difference": paired_difference(a, b)})
    return out


def _read_samples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


MODEL_NAMES = {"smollm2-135m-instruct": "SmolLM2-135M-Instruct"}
CORP_ROWS = (
    ("top1_reference", "CoRP top-1 reference"),
    ("stage1_merge", "CoRP Stage-1 merge, before the hold-out gate"),
    ("stage1", "CoRP Stage 1 only"),
    ("corp", "**CoRP**"),
)


def render(
    randopt: dict,
    corp: dict,
    command: str,
    versus: Sequence[dict] = (),
    equal_budget: dict | None = None,
) -> str:
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
    for key, label in CORP_ROWS:
        if key in corp["test"]:
            rows.append((f"{label} (N={corp['population']})", corp["test"][key], corp["search_generations"], 1))
    splits = corp["splits"]
    model = randopt.get("model", "smollm2-135m-instruct")
    lines = [
        f"# Gradient-free post-training on a CPU: RandOpt vs CoRP on {MODEL_NAMES.get(model, model)}",
        "",
        f"`{command}` on 2 CPU cores; task `arith` (support {randopt['splits']['support']}, "
        f"CoRP probe {splits['probe']}"
        + (f", CoRP hold-out gate {splits['holdout']}" if splits.get("holdout") else "")
        + f", held-out test `{randopt['splits']['test_source']}`: {randopt['splits']['test']} problems); greedy "
        f"decoding; verifier {randopt['grading']['math_verifier']}. Accuracy and gains in points with 95% bootstrap "
        "CIs (gain = paired difference vs the base on the same problems; fixed / broken = problems the model gets "
        "right / wrong that the base got wrong / right). MDE = the smallest paired difference this test detects with "
        "80% power at two-sided α = 0.05, (1.96 + 0.84)·√(discordant / n²) from the comparison's own discordance: a "
        "gain below its MDE is not resolved by this test. Forward passes = greedy generations spent selecting "
        "(training).",
        "",
        "| model | held-out accuracy % [95% CI] | gain vs base, points [95% CI] | fixed / broken | MDE, points "
        "| forward passes to train | inference passes / example |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry, passes, inference in rows:
        paired = entry.get("gain_vs_base")
        lines.append(
            f"| {name} | {pct(entry['accuracy'])} | {gain(entry)} | {fixed_broken(paired)} | {mde_cell(paired)} | "
            f"{passes} | {inference} |"
        )
    if versus:
        lines += [
            "",
            "CoRP head to head against RandOpt, paired on the same test problems:",
            "",
            "| comparison | difference, points [95% CI] | CoRP better / RandOpt better | MDE, points |",
            "|---|---|---|---|",
        ]
        for row in versus:
            diff = row["difference"]
            lines.append(
                f"| CoRP − RandOpt {row['randopt']} | {pct(diff, signed=True)} | {fixed_broken(diff)} | "
                f"{mde_cell(diff)} |"
            )
    if equal_budget:
        lines += [
            "",
            f"Equal budget: CoRP (N={corp['population']}) spent {equal_budget['corp_passes']} forward passes; RandOpt "
            f"got N = ⌊{equal_budget['corp_passes']} / {equal_budget['support_size']}⌋ − 1 = "
            f"{equal_budget['randopt_population']} members and spent {randopt['search_generations']}.",
        ]
    density = randopt["solution_density"]
    stage1 = corp["stage1"]
    held = stage1.get("holdout_gate")
    stage2 = corp["stage2"]
    authors = sum(bool(r.get("accepted_by_authors_gates", r.get("accepted"))) for r in stage2["rounds"])
    shares = [r["low_rank_share"] for r in stage2["rounds"] if r.get("low_rank_share") is not None]
    lines += [
        "",
        "RandOpt solution density (share of perturbations beating the base on support, base "
        f"{100 * density['base_support_accuracy']:.1f}%): "
        f"{100 * density['density']:.1f}% overall; per σ: "
        + ", ".join(f"σ={s}: {100 * d['density']:.0f}% (n={d['n']})" for s, d in density["per_sigma"].items())
        + ".",
        f"CoRP: Stage 1 chose q={stage1['q']}, β={stage1['beta']}, s={stage1['s']} (probe "
        f"{100 * stage1['probe_accuracy']:.1f}% vs "
        f"base {100 * stage1['base_probe_accuracy']:.1f}%; effective rank {stage1['effective_rank']}, "
        f"κ {stage1['kappa']})"
        + (
            f"; hold-out gate: {held['fixes']} fixed / {held['regressions']} broken of {held['n']}, LCB "
            f"{held['lcb']:+.4f} -> {'kept' if held['accepted'] else 'rejected, Stage 2 starts from the base'}"
            if held
            else f"; Stage 1 gated on the probe it was chosen on ({'kept' if stage1.get('kept') else 'rejected'})"
            if stage1.get("gate")
            else "; Stage 1 not gated"
        )
        + f". Stage 2 accepted {stage2['accepted']} of {len(stage2['rounds'])} rounds"
        + (
            f" (the authors' gates {authors}; proposals' low-rank share "
            f"{', '.join(f'{100 * s:.1f}%' for s in shares)} under `{stage2.get('low_rank_scale', 'authors')}`)"
            if shares
            else ""
        )
        + f". Minutes: RandOpt {randopt['minutes']}, CoRP {corp['minutes']}.",
        "Split-half low-rank analysis (our reconstruction) on the RandOpt population: "
        f"{json.dumps(randopt['split_half'])}.",
        "",
    ]
    return "\n".join(lines) + "\n"


def finished_with(out: Path, cfg) -> bool:
    """True when ``out`` holds a finished run of this config (up to the settings a resume may
    change: none changes a completion), so its records are left as written."""
    from rlvr.harness.run_dir import changed_settings

    return (out / "report.json").is_file() and (out / "config.yaml").is_file() and not changed_settings(out, cfg)


def shown_command(argv: Sequence[str]) -> str:
    """The command that writes this table in one go: without ``--resume``, ``--render-only`` and
    ``--only PART`` (how it was run in parts changes no number)."""
    shown, skip = [], False
    for arg in argv:
        if skip or arg in ("--resume", "--render-only"):
            skip = False
            continue
        if arg == "--only" or arg.startswith("--only="):
            skip = arg == "--only"
            continue
        shown.append(shlex.quote(arg))
    return " ".join(["python benchmarks/learn_cpu_es.py", *shown])


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--equal-budget",
        action="store_true",
        help="CoRP first, then RandOpt with as many members as CoRP's forward passes buy",
    )
    parser.add_argument("--corp-population", type=int, default=None, help="CoRP's population (default N/10)")
    parser.add_argument("--only", choices=("randopt", "corp"), default=None, help="run one of the two (in parts)")
    parser.add_argument("--render-only", action="store_true", help="write the table from the run directories")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    from rlvr.harness.config import parse_overrides
    from rlvr.harness.errors import UserError
    from rlvr.trainers import algorithm_card
    from rlvr.trainers.populations.config import build_es_config
    from rlvr.trainers.populations.loop import population_run_dir

    shared = parse_overrides(args.overrides)
    results, board = Path(args.results), Path(args.board)
    board.mkdir(parents=True, exist_ok=True)
    corp_population = args.corp_population or max(2, args.population // 10)
    order = ("corp", "randopt") if args.equal_budget else ("randopt", "corp")
    reports: dict[str, Any] = {}
    equal_budget = None
    parts_elsewhere = args.only is None and not args.render_only
    if parts_elsewhere:
        # Each part in its own process: a finished part's engine and noise cache are not all given back
        # inside one process (the second part of a 160-problem comparison was killed at 22 GB resident).
        raw = list(sys.argv[1:] if argv is None else argv)
        for algorithm in order:
            part = subprocess.run([sys.executable, str(Path(__file__).resolve()), *raw, "--only", algorithm])
            if part.returncode:
                return part.returncode
    for algorithm in order:
        out = results / algorithm
        overrides: dict[str, Any] = {"population": corp_population}
        if algorithm == "randopt":
            overrides = {"population": args.population, "top_k": [int(k) for k in args.top_k.split(",")]}
            if args.equal_budget:
                if "corp" not in reports:
                    raise UserError(
                        f"--equal-budget: RandOpt's budget is CoRP's forward passes, and {results / 'corp'} has no "
                        "report.json yet; run the CoRP part first (--only corp)"
                    )
                support = build_es_config("randopt", "cpu-demo", {**shared, "out": str(out)}).support_size
                passes = int(reports["corp"]["search_generations"])
                population = equal_budget_population(passes, support)
                if population < 2:
                    raise UserError(f"CoRP spent {passes} passes: too few for RandOpt members at support {support}")
                overrides["population"] = population
                equal_budget = {"corp_passes": passes, "support_size": support, "randopt_population": population}
        skip = parts_elsewhere or (args.only is not None and args.only != algorithm)
        if not skip and not args.render_only:
            cfg = build_es_config(algorithm, "cpu-demo", {**shared, **overrides, "out": str(out)})
            if args.resume and finished_with(out, cfg):
                print(f"{algorithm}: reusing {out}")
            else:
                if out.exists() and not args.resume:
                    shutil.rmtree(out)
                # --resume here means "keep what is there": a part not started yet starts fresh.
                continuing = args.resume and population_run_dir(cfg).holds_work()
                algorithm_card(algorithm).train(cfg, resume=continuing)
        if (out / "report.json").is_file():
            reports[algorithm] = json.loads((out / "report.json").read_text())
    command = shown_command(sys.argv[1:] if argv is None else argv)
    if not args.render_only:
        (board / "results.json").write_text(
            json.dumps({**reports, **({"equal_budget": equal_budget} if equal_budget else {})}, indent=1)
        )
    if set(reports) != {"randopt", "corp"}:
        print(f"written: {', '.join(reports) or 'nothing'}; the table waits for both runs")
        return 0
    samples = {name: _read_samples(results / name / "test_samples.jsonl") for name in reports}
    versus = head_to_head(samples["randopt"], samples["corp"])
    text = render(reports["randopt"], reports["corp"], command, versus, equal_budget)
    (board / "README.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    from rlvr.harness.errors import UserError

    try:
        sys.exit(main())
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
