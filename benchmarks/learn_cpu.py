"""Learning you can see on a CPU: the reference trainers on SmolLM2-135M-Instruct (embedded).

Runs, each within about 20 minutes on 2 cores:
  drgrpo   Dr. GRPO on `arith` (procedural small-integer arithmetic)
  grpo     GRPO on `arith`
  srpo     SRPO: stage 1 `arith`, stage 2 `arith` + `pyfunc`, history resampling
  dapo-ds  the same SRPO settings and schedule with DAPO dynamic sampling instead of history
           resampling, at the same rollout budget (generations), stage switch by generations

Before and after, held-out accuracy is measured with the harness (`rlvr eval`, same verifier,
chat template, n samples at temperature 0.7) with 95% bootstrap CIs, and the gain is the paired
difference over the same problems. Also reported: generations spent, zero-variance group
fractions, and the length of wrong answers over training (Dr. GRPO's claim: with Dr. GRPO it
does not grow). Tables, curves and the numbers go to leaderboards/learn_cpu/; eval run summaries
and training logs to results/learn_cpu/ (checkpoints are not committed).

    python benchmarks/learn_cpu.py [--algorithms drgrpo,grpo,srpo,dapo-ds] [--steps 25] [--eval-n 4]
    python benchmarks/learn_cpu.py --updates-per-rollout 4 --board leaderboards/learn_cpu/clip4 \
        --results results/learn_cpu/clip4      # several optimizer steps per rollout: clipping acts

With ``--updates-per-rollout K`` each rollout of R rows is split into minibatches of R/K rows, so
the policy moves between minibatches and the later ones see ratios away from 1 (the clipped
objective acts; its fractions are in the table). K = 1 (the default) is one step per rollout,
where every ratio is exactly 1 and clipping never acts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlvr.harness.report_format import percent_ci as pct  # noqa: E402

ARITH_TOKENS = 24
MIXED_TOKENS = 48


def runs_spec(steps: int, updates_per_rollout: int = 1) -> dict[str, tuple[str, dict]]:
    """name -> (algorithm, overrides of its cpu-demo preset)."""
    half_budget = steps * 8 * 4 // 2
    specs = _runs(steps, half_budget)
    if updates_per_rollout > 1:
        rows = 8 * 4
        if rows % updates_per_rollout:
            raise SystemExit(f"--updates-per-rollout must divide the {rows} rows of a rollout")
        for _, overrides in specs.values():
            overrides["minibatch_size"] = rows // updates_per_rollout
    return specs


def _runs(steps: int, half_budget: int) -> dict[str, tuple[str, dict]]:
    mixed = [
        {"name": "math", "sources": ["arith_train"], "until_generations": half_budget},
        {"name": "math+code", "sources": ["arith_train", "pyfunc_train"]},
    ]
    return {
        "drgrpo": ("drgrpo", {"max_steps": steps, "max_tokens": ARITH_TOKENS}),
        "grpo": ("grpo", {"max_steps": steps, "max_tokens": ARITH_TOKENS}),
        "srpo": (
            "srpo",
            {"max_steps": steps * 10, "max_generations": steps * 32, "max_tokens": MIXED_TOKENS, "stages": mixed},
        ),
        "dapo-ds": (
            "srpo",
            {
                "max_steps": steps * 10,
                "max_generations": steps * 32,
                "max_tokens": MIXED_TOKENS,
                "stages": mixed,
                "selection": "dynamic",
                "gen_prompts": 8,
                "max_gen_batches": 4,
            },
        ),
    }


def evaluate(model: str | None, benchmark: str, max_tokens: int, n: int, out: Path) -> dict:
    from rlvr.harness.eval_config import EvalConfig
    from rlvr.harness.evaluate import run_eval

    summary = run_eval(
        EvalConfig(
            model=model,
            benchmarks=benchmark,
            template="chat",
            n=n,
            temperature=0.7,
            max_tokens=max_tokens,
            out=str(out),
            progress=False,
        )
    )
    return summary["benchmarks"][benchmark]


def outcomes(run: Path, benchmark: str) -> dict[str, list[float]]:
    from rlvr.harness.results import read_samples

    per: dict[str, list[float]] = {}
    for row in read_samples(run):
        if row["benchmark"] == benchmark:
            per.setdefault(row["id"], []).append(1.0 if row["correct"] else 0.0)
    return per


def paired(base: Path, after: Path, benchmark: str) -> dict:
    from rlvr.harness.metrics import paired_difference

    a, b = outcomes(base, benchmark), outcomes(after, benchmark)
    shared = sorted(set(a) & set(b))
    return paired_difference([a[p] for p in shared], [b[p] for p in shared])


def curves(logs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("accuracy", "training accuracy (rollouts)"),
        ("zero_variance_fraction", "zero-variance group fraction"),
        ("length_incorrect", "length of wrong answers (tokens)"),
        ("length_correct", "length of correct answers (tokens)"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(18, 3.8))
    for ax, (key, title) in zip(axes, panels):
        for name, log in logs.items():
            xs = [line["generations_total"] for line in log if line.get(key) is not None]
            ys = [line[key] for line in log if line.get(key) is not None]
            ax.plot(xs, ys, label=name, alpha=0.85)
        ax.set(title=title, xlabel="generations spent")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", default="drgrpo,grpo,srpo,dapo-ds")
    parser.add_argument(
        "--steps", type=int, default=25, help="policy steps of 8 prompts x 4 samples (the rollout budget is steps x 32)"
    )
    parser.add_argument("--eval-n", type=int, default=4)
    parser.add_argument("--results", default=str(ROOT / "results" / "learn_cpu"))
    parser.add_argument("--board", default=str(ROOT / "leaderboards" / "learn_cpu"))
    parser.add_argument("--keep-checkpoints", action="store_true")
    parser.add_argument(
        "--updates-per-rollout",
        type=int,
        default=1,
        help="optimizer steps per rollout (minibatch = rows / K); K > 1 makes the clipped objective act",
    )
    args = parser.parse_args()

    from rlvr.trainers.policy_gradient.config import build_config
    from rlvr.trainers.policy_gradient.loop import run_training
    from rlvr.trainers.runtime.telemetry import read_log

    results, board = Path(args.results), Path(args.board)
    board.mkdir(parents=True, exist_ok=True)
    specs = runs_spec(args.steps, args.updates_per_rollout)
    report: dict = {
        "steps": args.steps,
        "eval_n": args.eval_n,
        "updates_per_rollout": args.updates_per_rollout,
        "runs": {},
    }
    base: dict[tuple[str, int], tuple[Path, dict]] = {}
    for name in args.algorithms.split(","):
        algorithm, overrides = specs[name]
        benches = ["arith"] + (["pyfunc"] if name in ("srpo", "dapo-ds") else [])
        tokens = overrides["max_tokens"]
        for bench in benches:
            if (bench, tokens) not in base:
                path = results / f"eval-base-{bench}-{tokens}tok"
                base[(bench, tokens)] = (path, evaluate(None, bench, tokens, args.eval_n, path))
        out = results / f"train-{name}"
        if out.exists():
            shutil.rmtree(out)
        cfg = build_config(
            algorithm, "cpu-demo", {**overrides, "out": str(out), "save_every": 0, "eval_benchmarks": benches}
        )
        t0 = time.time()
        run_training(cfg)
        minutes = (time.time() - t0) / 60
        log = read_log(out)
        final = sorted(out.glob("checkpoint-*"))[-1]
        entry = {
            "algorithm": algorithm,
            "settings": overrides,
            "minutes": round(minutes, 1),
            "steps": len(log),
            "generations": log[-1]["generations_total"],
            "optimizer_steps_per_rollout": _mean([line["optimizer_steps"] for line in log if line["optimizer_steps"]]),
            "clip_low_mean": _mean([line["clip_low_fraction"] for line in log], 4),
            "clip_high_mean": _mean([line["clip_high_fraction"] for line in log], 4),
            "zero_variance_mean": round(sum(line["zero_variance_fraction"] or 0 for line in log) / len(log), 3),
            "wrong_length_first5": _mean([line["length_incorrect"] for line in log[:5]]),
            "wrong_length_last5": _mean([line["length_incorrect"] for line in log[-5:]]),
            "stage_switches": [line["stage"] for line in log],
            "benchmarks": {},
        }
        for bench in benches:
            base_path, base_metrics = base[(bench, tokens)]
            after_path = results / f"eval-{name}-{bench}"
            after = evaluate(str(final), bench, tokens, args.eval_n, after_path)
            entry["benchmarks"][bench] = {
                "before": base_metrics["mean_at_n"],
                "after": after["mean_at_n"],
                "gain": paired(base_path, after_path, bench),
                "truncation_before": base_metrics["truncation_rate"],
                "truncation_after": after["truncation_rate"],
            }
        report["runs"][name] = entry
        if not args.keep_checkpoints:
            for ckpt in out.glob("checkpoint-*"):
                shutil.rmtree(ckpt)
        (board / "results.json").write_text(json.dumps(report, indent=2))
        print(json.dumps({name: entry["benchmarks"]}, indent=1))
    curves({name: read_log(results / f"train-{name}") for name in report["runs"]}, board / "curves.svg")
    (board / "README.md").write_text(render(report))
    print(render(report))
    return 0


def _mean(values, digits: int = 2) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), digits) if values else None


def render(report: dict) -> str:
    lines = [
        "# Learning on a CPU: reference trainers on SmolLM2-135M-Instruct",
        "",
        f"`python benchmarks/learn_cpu.py --updates-per-rollout {report.get('updates_per_rollout', 1)}` (2 CPU cores). "
        "Policy steps of 8 prompts x 4 samples; held-out accuracy by "
        "`rlvr eval` "
        f"(chat template, n={report['eval_n']} at temperature 0.7, 95% bootstrap CIs); gain = paired difference over "
        "the same problems. "
        "Curves: [curves.svg](curves.svg); numbers: [results.json](results.json).",
        "",
        "| run | benchmark | before % | after % | gain, points [95% CI] | generations | optimizer steps / rollout | "
        "clipped tokens low / high % | zero-var groups | wrong-answer length, first 5 -> last 5 steps | minutes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["runs"].items():
        for bench, b in r["benchmarks"].items():
            lines.append(
                f"| {name} | {bench} | {pct(b['before'])} | {pct(b['after'])} | {pct(b['gain'], signed=True)} | "
                f"{r['generations']} | {r.get('optimizer_steps_per_rollout', '?')} | {_clip(r)} | "
                f"{r['zero_variance_mean']:.2f} | {r['wrong_length_first5']} -> {r['wrong_length_last5']} | "
                f"{r['minutes']} |"
            )
    return "\n".join(lines) + "\n"


def _clip(run: dict) -> str:
    if run.get("clip_low_mean") is None:
        return "not logged"
    return f"{100 * run['clip_low_mean']:.2f} / {100 * run['clip_high_mean']:.2f}"


if __name__ == "__main__":
    sys.exit(main())
