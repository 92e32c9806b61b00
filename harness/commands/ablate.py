"""``rlvr ablate templates|prior``: the template ablation and the base-model prior report."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.harness.commands.options import add_eval_flags
from rlvr.harness.config import build_settings, split_list, user_settings
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig

OWN = ("ablation", "templates", "results", "name", "compare_model")  # the command's own flags
#: settings the ablations choose themselves (no flags)
OWN_SETTINGS = ("template", "out")
#: what ``default_backend`` picks, as the help says it
BACKEND_DEFAULT = "vllm where it is installed, else hf"

EPILOG_TEMPLATES = """\
Generates with vLLM by default where it is installed (its CPU build included; --backend hf to
change). Runs one `rlvr eval` per model x template under otherwise identical settings and prints the table
in the shape of Dr. GRPO's Table 1 (rows model x template, columns benchmarks + average, mean@n
with 95% CIs), the best template per model marked. Cells are ordinary run directories under
RESULTS/NAME/ (resumable, re-gradable, picked up by `rlvr leaderboard`), with manifest.json,
table.md and table.csv beside them.

examples:
  rlvr ablate templates --benchmarks arith,gsm8k --limit 50 --n 4 --temperature 0.7
  rlvr ablate templates --model Qwen/Qwen2.5-Math-1.5B --backend vllm --max-tokens 3000 \\
      --benchmarks aime2024,amc2023,math500,minerva_math,olympiadbench --templates fewshot,r1,qwen_math,no_template
"""

EPILOG_PRIOR = """\
What the base model can already do, per template: answer-format rate (responses with an
extractable answer), pass@k for k = 1..n, self-reflection keyword rates (Dr. GRPO's list and
our reconstruction of SRPO's recheck / hesitation / exploration categories), response lengths of
correct vs incorrect answers. With --compare-model (e.g. the checkpoint after RL) both models
side by side and the paired gain, so the RL gain is separated from the prior. Defaults here:
--n 8 --temperature 0.6 (sampling is what makes pass@k mean something), and vLLM where it is
installed (its CPU build included; --backend hf to change). Writes prior.md,
prior.json, prior.svg and one run directory per cell.

examples:
  rlvr ablate prior --benchmarks arith --limit 50
  rlvr ablate prior --model base/ --compare-model results/drgrpo-run/checkpoint-final --benchmarks arith,gsm8k
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ablate",
        help="template ablation and base-model prior report",
        description="Ablations as ordinary evaluation runs.",
    )
    kinds = p.add_subparsers(dest="ablation", metavar="<ablation>")
    t = kinds.add_parser(
        "templates",
        help="one evaluation per template: Dr. GRPO's Table 1",
        epilog=EPILOG_TEMPLATES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_eval_flags(t, OWN_SETTINGS, {"backend": BACKEND_DEFAULT})
    t.add_argument(
        "--templates",
        default="qwen_math,r1,no_template,fewshot,chat",
        help="comma-separated templates (default: all five built-ins)",
    )
    pr = kinds.add_parser(
        "prior",
        help="base-model prior: answer rate, pass@k curve, reflection keywords, lengths",
        epilog=EPILOG_PRIOR,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_eval_flags(pr, OWN_SETTINGS, {"backend": BACKEND_DEFAULT, "n": "8", "temperature": "0.6"})
    pr.add_argument(
        "--compare-model", dest="compare_model", default=None, help="a second model (e.g. after RL) shown side by side"
    )
    pr.add_argument(
        "--templates", default="qwen_math,r1,no_template", help="comma-separated templates (default: Dr. GRPO's three)"
    )
    for q in (t, pr):
        q.add_argument("--results", default="results", help="where the ablation folder goes (default results/)")
        q.add_argument("--name", default=None, help="ablation folder name (default: ablate-<kind>-<model>)")
        q.set_defaults(func=run)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def default_backend() -> str:
    """vLLM where it is installed (several times ``hf``'s tokens/s on long answers, CPU included:
    README, Backends), else ``hf``; ``--backend`` overrides either way."""
    from rlvr.harness.backends.vllm_engine import vllm_build

    if vllm_build() == "none":
        print("note: vLLM is not installed; generating with --backend hf (make install puts the CPU build in .venv)")
        return "hf"
    return "vllm"


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.ablations import ablate_prior, ablate_templates

    given = user_settings(args, ignore=OWN)
    chosen = sorted(set(OWN_SETTINGS) & set(given))
    if chosen:
        raise UserError(
            f"ablations choose {' and '.join(chosen)} themselves (a --config or --set gave it): use --templates and "
            "--results/--name"
        )
    models = split_list(given.pop("model", None)) or [None]
    defaults = {"benchmarks": None, "backend": given.get("backend") or default_backend()}
    if args.ablation == "prior":
        defaults.update(n=8, temperature=0.6)
    base = build_settings(EvalConfig, [defaults, given])
    templates = split_list(args.templates)
    if args.ablation == "templates":
        result = ablate_templates(base, models, templates, Path(args.results), args.name)
        print("\n" + result["markdown"])
    else:
        if args.compare_model:
            models = models[:1] + [args.compare_model]
        result = ablate_prior(base, models, templates, Path(args.results), args.name)
        print("\n" + result["markdown"])
    print(f"\n-> {result['folder']}")
    return 0
