"""``rlvr demo``: what the project is for, on the embedded model, on a CPU, in a few minutes.

1. The verifier: a shipped sample of realistic completions (honest, wrong, hedging, hostile)
   graded, with the verdict and its reason.
2. The embedded model (SmolLM2-135M-Instruct) where it scores visibly: the procedural ``arith``
   and ``pyfunc`` tasks, with 95% CIs (``rlvr eval``).
3. A template ablation (chat / no template / few-shot) on ``arith`` and its leaderboard page
   (``rlvr ablate templates``, ``rlvr leaderboard``).
4. A short Dr. GRPO run on ``arith_train`` (``rlvr train``) and held-out ``arith`` before vs
   after, as a paired difference with its CI (``rlvr compare``).

Everything lands in ``results/demo/`` and resumes: a second ``make demo`` only prints.
"""

from __future__ import annotations

import argparse
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Dict, Optional

#: Parts 2 and 3 decode greedily; part 4 measures what RL changes, the policy's own samples
#: (n = 4 at temperature 0.7, as benchmarks/learn_cpu.py), before and after on the same problems.
PROTOCOL = {"template": "chat", "max_tokens": 24}
SAMPLED = {"n": 4, "temperature": 0.7}
#: Part 3's folder; part 2's greedy chat run on arith is its chat cell
ABLATION = "ablate-templates-arith"
#: Part 4's Dr. GRPO settings over the ``cpu-demo`` preset (a short run that keeps only its end)
TRAINING = {
    "lr": 5e-5,
    "prompts_per_step": 6,
    "max_tokens": PROTOCOL["max_tokens"],
    "save_every": 0,
    "save_optimizer": False,
}


#: ``rlvr train`` without a command line: (algorithm, preset, settings) -> the run directory
Trainer = Callable[[str, Optional[str], Dict[str, Any]], Optional[Path]]


def register(sub: argparse._SubParsersAction, trainer: Trainer | None = None) -> None:
    """``trainer``: what part 4 trains with (the command line passes the trainers' ``train_run``;
    without one, part 4 prints the command instead)."""
    p = sub.add_parser(
        "demo",
        help="run the main jobs on the embedded model and print what they show",
        description=__doc__.replace("``", "`"),  # the docstring's RST quotes, as a terminal shows code
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--timeout", type=float, default=1.0, help="math grading CPU budget per item in seconds")
    p.add_argument(
        "--results", default="results/demo", help="where the demo's runs go (default results/demo; they resume)"
    )
    p.add_argument(
        "--limit", type=int, default=40, help="held-out arith problems per evaluation (default 40; pyfunc gets half)"
    )
    p.add_argument("--steps", type=int, default=8, help="Dr. GRPO steps in part 4 (default 8)")
    p.add_argument("--grading-only", action="store_true", help="only part 1 (no model)")
    p.set_defaults(func=run, trainer=trainer)


def _cell(text: str | None, width: int) -> str:
    text = "" if text is None else " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def run(args: argparse.Namespace) -> int:
    print("== 1. the verifier: one shipped sample of completions, graded ==")
    show_grading(args.timeout)
    print(
        "what it shows: each verdict with the rule that decided it; hedged, wrong-format and hostile completions earn "
        "nothing"
    )
    if args.grading_only:
        return 0
    results = Path(args.results)
    embedded_tasks(results, args.limit)
    template_ablation(results, args.limit)
    policy_gradient(results, max(1, args.limit * 4 // 5), args.steps, args.trainer)
    from rlvr.harness.leaderboard.build import build_leaderboard

    board = results / "leaderboard"
    info = build_leaderboard(results, board)
    print(
        f"\nleaderboard of the {info['runs']} demo runs, one table per protocol: {board}/README.md and "
        f"{board}/index.html (open it in a browser)"
    )
    print(
        "what it shows: every number above as a ranked table with CIs, grouped so that only runs under the same "
        "protocol share a table"
    )
    return 0


def _eval(
    model: str | None,
    benchmarks: str,
    limit: int,
    out: Path,
    max_tokens: int = PROTOCOL["max_tokens"],
    n: int = 1,
    temperature: float = 0.0,
) -> dict:
    from rlvr.harness.eval_config import EvalConfig
    from rlvr.harness.evaluate import run_eval

    cfg = EvalConfig(
        model=model,
        benchmarks=benchmarks,
        template=PROTOCOL["template"],
        limit=limit,
        max_tokens=max_tokens,
        n=n,
        temperature=temperature,
        out=str(out),
        progress=False,
    )
    return run_eval(cfg)


def embedded_tasks(results: Path, limit: int) -> None:
    from rlvr.harness.evaluate import print_summary

    print("\n== 2. the embedded model (SmolLM2-135M-Instruct, CPU) on tasks it can do, greedy, chat template ==")
    # the chat cell of part 3's template ablation: evaluated once, shown here, reused (resumed) there
    arith = results / ABLATION / "smollm2-135m-instruct-chat"
    print_summary(_eval(None, "arith", limit, arith), arith)
    pyfunc = results / "smollm2-135m-instruct-chat-pyfunc"
    print_summary(_eval(None, "pyfunc", max(1, limit // 2), pyfunc, max_tokens=96), pyfunc)
    print(
        "what it shows: a 135M model scores well above zero on verifiable tasks sized for it; the CI is how sure we "
        "are at this many problems"
    )


def template_ablation(results: Path, limit: int) -> None:
    from rlvr.harness.ablations import ablate_templates
    from rlvr.harness.eval_config import EvalConfig

    print("\n== 3. does the prompt template matter? (arith, greedy; Dr. GRPO's template question at toy scale) ==")
    base = EvalConfig(
        benchmarks="arith", limit=limit, max_tokens=PROTOCOL["max_tokens"], temperature=0.0, progress=False
    )
    report = ablate_templates(base, [None], ["chat", "no_template", "fewshot"], results, name=ABLATION)
    print("\n" + report["markdown"])
    print(
        "what it shows: the same weights score very differently by template; an RL gain is only meaningful against "
        "the right baseline"
    )


def policy_gradient(results: Path, limit: int, steps: int, train: Trainer | None) -> None:
    from rlvr.harness.comparison import compare_runs
    from rlvr.harness.report_format import percent_ci

    print(
        f"\n== 4. reinforcement learning with the verifier as reward: {steps} Dr. GRPO steps on arith_train, held-out "
        "arith before and after =="
    )
    before = results / "smollm2-135m-instruct-chat-arith-sampled"
    _eval(None, "arith", limit, before, **SAMPLED)
    out = results / "train-drgrpo"
    flags = {"out": str(out), "max_steps": steps}
    command = f"rlvr train drgrpo --config cpu-demo --out {out} --max-steps {steps} " + " ".join(
        f"--set {key}={_set_value(value)}" for key, value in TRAINING.items()
    )
    final = out / f"checkpoint-{steps:06d}"
    if not final.exists():
        if train is None:
            print(f"`rlvr train` is not installed here (the trainers package); the step is: {command}")
            return
        if (out / "latest").exists():
            import shutil

            shutil.rmtree(out)  # an unfinished demo run without optimizer state cannot resume: start it again
        train("drgrpo", "cpu-demo", {**flags, **TRAINING})
    after = results / "drgrpo-chat-arith-sampled"
    summary = _eval(str(final), "arith", limit, after, **SAMPLED)
    report = compare_runs(before, after)["benchmarks"]["arith"]
    print(
        f"\nheld-out arith ({report['n_problems']} problems x {SAMPLED['n']} samples at T={SAMPLED['temperature']}): "
        f"before {100 * report['mean_a']:.1f}%  after {100 * report['mean_b']:.1f}%  "
        f"gain {percent_ci(report, signed=True)} points (paired, 95% CI)"
    )
    print(
        f"what it shows: {steps} steps of RL on the verifier's reward move held-out accuracy of the same model; "
        "longer runs: "
        f"benchmarks/learn_cpu.py (the table in leaderboards/learn_cpu/)"
    )
    print(
        f"reproduce: {command}  then  rlvr eval --model {final} --benchmarks arith --template chat --max-tokens "
        f"{PROTOCOL['max_tokens']} "
        f"--n {SAMPLED['n']} --temperature {SAMPLED['temperature']} --limit {limit}  (protocol fingerprint "
        f"{summary['fingerprint']}, the same as the base run's)"
    )


def _set_value(value: object) -> str:
    """``value`` as one writes it after ``--set KEY=`` (YAML): ``false``, ``5e-5``."""
    if isinstance(value, bool):
        return str(value).lower()
    return re.sub(r"e([+-])0+(?=\d)", r"e\1", repr(value))


def show_grading(timeout: float) -> None:
    """The verdict table of the shipped sample (part 1)."""
    from rlvr.sandbox.math.verify import MathGrader

    sample = resources.files("rlvr.harness") / "data" / "demo" / "math_completions.jsonl"
    rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    grader = MathGrader(timeout=timeout)
    try:
        verdicts = grader.verify_batch(rows)
    finally:
        grader.close()
    header = f"{'id':<16} {'gold':<22} {'extracted':<22} {'correct':<7} {'reason':<12} {'ms':>7}  rule"
    print(header)
    print("-" * len(header))
    for row, v in zip(rows, verdicts):
        print(
            f"{_cell(row['id'], 16):<16} {_cell(row['answer'], 22):<22} {_cell(v.extracted, 22):<22} "
            f"{str(v.correct):<7} {v.reason:<12} {v.elapsed_ms:7.1f}  {_cell(v.detail, 40)}"
        )
    correct = sum(v.correct for v in verdicts)
    print(f"\n{len(verdicts)} completions graded by {verdicts[0].verifier}: {correct} correct")
