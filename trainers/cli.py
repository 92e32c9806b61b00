"""``rlvr train <algorithm>``: the reference trainers on the command line.

Registered with the ``rlvr`` entry point through the ``rlvr.commands`` entry-point group, so the
harness never imports the trainers (dependencies point sandbox <- harness <- trainers).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

POLICY_GRADIENT = ("grpo", "drgrpo", "dapo", "srpo")
GRADIENT_FREE = ("randopt", "corp")

EPILOG = """\
presets (--config NAME): cpu-demo (the embedded model on the procedural `arith` task, on a CPU)
and paper (each paper's published hyperparameters, for GPU users; drgrpo also paper-r1, the R1
template rewarded as the original was); or a YAML file whose keys are TrainConfig fields.
--set KEY=VALUE overrides any field (values read as YAML). Each algorithm's --help lists every
setting with its default and meaning (e.g. rlvr train drgrpo --help).

examples:
  rlvr train drgrpo --config cpu-demo --out results/drgrpo-demo
  rlvr train drgrpo --config cpu-demo --out results/drgrpo-demo --max-steps 40 --resume
  rlvr train srpo --config cpu-demo --set lr=1e-5 \\
    --set "stages=[{name: a, sources: [arith_train], until_step: 10}, {name: b, sources: [arith_train, pyfunc_train]}]"
  rlvr train grpo --config paper --model Qwen/Qwen2.5-Math-1.5B --set backend=vllm
  rlvr train drgrpo --config paper-r1 --out results/drgrpo-r1
  rlvr train dapo --config paper --plan          # the derived schedule; loads nothing (--json: as JSON)
  rlvr train randopt --config cpu-demo --population 64 --out results/randopt-demo
  rlvr train corp --config cpu-demo --out results/corp-demo     # spec.json + merged/ checkpoint
  rlvr eval --model results/drgrpo-demo/checkpoint-000020 --benchmarks arith
  torchrun --nproc-per-node 8 --no-python rlvr train drgrpo --config paper --set parallel=fsdp --out results/drgrpo-8gpu

a policy-gradient run directory holds config.yaml, train_log.jsonl (one line of health metrics
per step) and HF checkpoints checkpoint-<step>/ (config.json, weights, tokenizer, trainer_state.pt).
A RandOpt / CoRP run holds config.yaml, train_log.jsonl (one line per candidate, grid point and
round), population.json, report.json (held-out accuracy with 95% CIs, passes spent) and
test_samples.jsonl; RandOpt adds top_k_seeds.json, CoRP spec.json and merged/.
"""


class AlgorithmHelp(argparse.Action):
    """``-h/--help``: the command's help and, after ``rlvr train ALGO``, every setting of ALGO with
    the value a run starts from and its meaning, as TRL's command line lists its fields."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        algorithm = getattr(namespace, "algorithm", None)
        if algorithm:
            print("\n" + settings_text(algorithm))
        parser.exit()


def settings_text(algorithm: str) -> str:
    """Every field of ``algorithm``'s config, with the defaults a run without ``--config`` starts
    from (the dataclass's, then the algorithm's ``DEFINING`` settings, marked ``*``)."""
    import dataclasses
    import textwrap

    from harness.config import build_settings
    from harness.run_config import settings_help
    from trainers.config import TrainConfig, algorithm_module
    from trainers.es_config import ESConfig

    cls, defining = (
        (ESConfig, {}) if algorithm in GRADIENT_FREE else (TrainConfig, algorithm_module(algorithm).DEFINING)
    )
    defaults = dataclasses.asdict(build_settings(cls, [defining, {"algorithm": algorithm}]))
    marks = f"; * marks {algorithm}'s defining settings" if defining else ""
    heading = (
        f"{algorithm} settings (--set KEY=VALUE, or KEY: VALUE in a --config YAML file), each with the value a run "
        f"without --config starts from{marks}:"
    )
    return textwrap.fill(heading, 100) + "\n" + settings_help(cls, defaults, marked=list(defining))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train with GRPO, Dr. GRPO, DAPO, SRPO, RandOpt or CoRP",
        description="Reference trainers; rewards from the sandbox verifiers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    p.add_argument(
        "-h", "--help", action=AlgorithmHelp, help="show this help; after ALGO also every setting with its default"
    )
    p.add_argument("algorithm", choices=POLICY_GRADIENT + GRADIENT_FREE, help="which algorithm")
    p.add_argument("--config", default=None, help="preset name (cpu-demo, paper; drgrpo: paper-r1) or a YAML file")
    p.add_argument("--out", default=None, help="run directory (default results/train-<algorithm>)")
    p.add_argument(
        "--max-steps", dest="max_steps", type=int, default=None, help="stop after this step (policy-gradient trainers)"
    )
    p.add_argument("--population", type=int, default=None, help="RandOpt / CoRP: perturbations in the population")
    p.add_argument("--model", default=None, help="HF checkpoint dir or hub id (default: the embedded model)")
    p.add_argument("--seed", type=int, default=None, help="run seed")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field (repeatable)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help=(
            "continue the run in --out: policy-gradient trainers from their latest checkpoint,"
            " RandOpt / CoRP from their generation journal"
        ),
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no per-step progress lines")
    p.add_argument(
        "--plan",
        action="store_true",
        help="print what the run would do (schedule, loss, lr, rewards, precision, a device estimate) and exit; "
        "loads no model and no data",
    )
    p.add_argument("--json", action="store_true", help="with --plan: print the plan as JSON")
    p.set_defaults(func=run)


def resolve(args: argparse.Namespace, check_data: bool = True):
    """The run's typed config from the preset / YAML file, ``--set`` and flags, every check done
    (before any model is loaded; ``check_data=False`` lets local data files be absent)."""
    from trainers.config import parse_overrides

    overrides = parse_overrides(args.overrides)
    for key in ("out", "max_steps", "model", "seed", "population"):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    return configure(args.algorithm, args.config, overrides, check_data)


def configure(algorithm: str, config: str | None, overrides: dict[str, Any], check_data: bool = True):
    """``algorithm``'s typed config: defaults < preset or YAML file ``config`` < ``overrides``."""
    from harness.errors import UserError
    from trainers.config import build_config
    from trainers.es_config import build_es_config

    if algorithm in GRADIENT_FREE:
        return build_es_config(algorithm, config, overrides)
    if "population" in overrides:
        raise UserError("--population is for randopt and corp")
    return build_config(algorithm, config, overrides, check_data)


def run(args: argparse.Namespace) -> int:
    from harness.errors import UserError

    if getattr(args, "json", False) and not getattr(args, "plan", False):
        raise UserError("--json goes with --plan")
    if getattr(args, "plan", False):
        if args.algorithm in GRADIENT_FREE:
            raise UserError(f"--plan is for the policy-gradient trainers ({', '.join(POLICY_GRADIENT)})")
        import json

        from trainers.plan import format_plan, training_plan

        plan = training_plan(resolve(args, check_data=False), args.config)
        print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
        return 0
    train(args.algorithm, resolve(args), args.resume, args.progress)
    return 0


def train_run(
    algorithm: str, config: str | None, overrides: dict[str, Any], resume: bool = False, progress: bool = True
) -> Path | None:
    """``rlvr train`` without a command line (``rlvr demo`` calls it through the entry point):
    ``overrides`` are typed ``--set`` values and flags (``out``, ``max_steps``, ...)."""
    return train(algorithm, configure(algorithm, config, overrides), resume, progress)


def train(algorithm: str, cfg: Any, resume: bool, progress: bool) -> Path | None:
    """Train ``cfg`` with ``algorithm``; under torchrun this rank joins the process group. The run
    directory on the main process (printed there), None on the others."""
    import importlib

    from harness.errors import UserError
    from trainers import distributed

    if distributed.launched() and algorithm in GRADIENT_FREE:
        raise UserError(f"{algorithm} runs in one process; torchrun launches grpo, drgrpo, dapo and srpo")
    with distributed.session(cfg):  # under torchrun: this rank joins the process group (else nothing)
        out = importlib.import_module(f"trainers.{algorithm}").train(cfg, resume=resume, progress=progress)
        main = distributed.is_main()
    if main:
        if algorithm in GRADIENT_FREE:
            print(f"done -> {out}")
        else:
            from trainers.checkpoint import latest_checkpoint
            from trainers.live_progress import closing_summary
            from trainers.telemetry import read_log

            print(closing_summary(read_log(out), out, latest_checkpoint(out), list(cfg.eval_benchmarks or [])))
    return out if main else None
