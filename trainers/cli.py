"""``rlvr train <algorithm>``: the reference trainers on the command line.

Every setting of the algorithm's config is a typed flag (``--lr 1e-5``), generated from its
fields as ``rlvr eval``'s are, beside ``--config`` (a preset or a YAML file) and ``--set KEY=VALUE``.
The command line (``rlvr.cli.main``) imports this module directly; ``rlvr demo`` trains through
``train_run``.
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
Every setting is a flag (--lr 1e-5), and --set KEY=VALUE overrides any field (values read as
YAML). Each algorithm's --help lists every flag and every setting with its default and meaning
(e.g. rlvr train drgrpo --help). The same command again continues the run in --out (--resume
insists on it); a change of a setting that changes results is refused.

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
        algorithm = parser.prog.split()[-1]  # the subparser's own namespace does not hold it yet
        if algorithm in POLICY_GRADIENT + GRADIENT_FREE:
            print("\n" + settings_text(algorithm))
        parser.exit()


def settings_text(algorithm: str) -> str:
    """Every field of ``algorithm``'s config, with the defaults a run without ``--config`` starts
    from (the dataclass's, then the algorithm's ``DEFINING`` settings, marked ``*``)."""
    import dataclasses
    import textwrap

    from rlvr.harness.config import build_settings
    from rlvr.harness.run_config import settings_help
    from rlvr.trainers.policy_gradient.config import TrainConfig, algorithm_module
    from rlvr.trainers.populations.config import ESConfig

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


#: the flags of ``rlvr train ALGO`` that are not settings
OWN = ("algorithm", "resume", "progress", "plan", "json")


def register(sub: argparse._SubParsersAction, algorithms: bool = True) -> None:
    """``rlvr train``; ``algorithms=False`` leaves out the per-algorithm parsers (the command line
    builds them only when it will parse ``train``, since their help imports torch)."""
    p = sub.add_parser(
        "train",
        help="train with GRPO, Dr. GRPO, DAPO, SRPO, RandOpt or CoRP",
        description="Reference trainers; rewards from the sandbox verifiers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    choices = p.add_subparsers(dest="algorithm", metavar="<algorithm>")
    for algorithm in (POLICY_GRADIENT + GRADIENT_FREE) if algorithms else ():
        _register_algorithm(choices, algorithm)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _register_algorithm(algorithms: argparse._SubParsersAction, algorithm: str) -> None:
    """``rlvr train ALGO``: a typed flag per setting of ALGO's config, with ALGO's defaults."""
    from rlvr.harness.run_config import add_config_flags, add_setting_flags, shown
    from rlvr.trainers.policy_gradient.config import TrainConfig, algorithm_module
    from rlvr.trainers.populations.config import ESConfig

    cls, defining = (
        (ESConfig, {}) if algorithm in GRADIENT_FREE else (TrainConfig, algorithm_module(algorithm).DEFINING)
    )
    a = algorithms.add_parser(
        algorithm,
        help=f"train with {algorithm}",
        description=f"rlvr train {algorithm}: every flag is a setting; --config and --set layer under/over them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    a.add_argument("-h", "--help", action=AlgorithmHelp, help="show this help, then every setting with its default")
    add_setting_flags(a, cls, exclude=("algorithm",), shown_defaults={k: shown(v) for k, v in defining.items()})
    add_config_flags(a, "preset name (cpu-demo, paper; drgrpo: paper-r1) or a YAML file; flags and --set override it")
    run_flags = a.add_argument_group("this run")
    run_flags.add_argument(
        "--resume",
        action="store_true",
        help="insist on continuing the run in --out (the same command continues it anyway): policy-gradient "
        "trainers from their latest checkpoint, RandOpt / CoRP from their generation journal",
    )
    run_flags.add_argument("--no-progress", dest="progress", action="store_false", help="no per-step progress lines")
    run_flags.add_argument(
        "--plan",
        action="store_true",
        help="policy-gradient trainers: print what the run would do (schedule, loss, lr, rewards, precision, a "
        "device estimate) and exit; loads no model and no data",
    )
    run_flags.add_argument("--json", action="store_true", help="with --plan: print the plan as JSON")
    a.set_defaults(func=run)


def resolve(args: argparse.Namespace, check_data: bool = True):
    """The run's typed config from the preset / YAML file, typed flags and ``--set``, every check
    done (before any model is loaded; ``check_data=False`` lets local data files be absent)."""
    from rlvr.harness.config import typed_flags

    return configure(args.algorithm, getattr(args, "config", None), typed_flags(args, OWN), check_data)


def configure(algorithm: str, config: str | None, overrides: dict[str, Any], check_data: bool = True):
    """``algorithm``'s typed config: defaults < preset or YAML file ``config`` < ``overrides``."""
    from rlvr.harness.errors import UserError
    from rlvr.trainers.policy_gradient.config import build_config
    from rlvr.trainers.populations.config import build_es_config

    if algorithm in GRADIENT_FREE:
        return build_es_config(algorithm, config, overrides)
    if "population" in overrides:
        raise UserError("--population is for randopt and corp")
    return build_config(algorithm, config, overrides, check_data)


def run(args: argparse.Namespace) -> int:
    from rlvr.harness.errors import UserError

    if getattr(args, "json", False) and not getattr(args, "plan", False):
        raise UserError("--json goes with --plan")
    if getattr(args, "plan", False):
        if args.algorithm in GRADIENT_FREE:
            raise UserError(f"--plan is for the policy-gradient trainers ({', '.join(POLICY_GRADIENT)})")
        import json

        from rlvr.trainers.policy_gradient.plan import format_plan, training_plan

        plan = training_plan(resolve(args, check_data=False), getattr(args, "config", None))
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
    from rlvr.harness.errors import UserError
    from rlvr.trainers import algorithm_card
    from rlvr.trainers.runtime import distributed

    if distributed.launched() and algorithm in GRADIENT_FREE:
        raise UserError(f"{algorithm} runs in one process; torchrun launches grpo, drgrpo, dapo and srpo")
    with distributed.session(cfg):  # under torchrun: this rank joins the process group (else nothing)
        out = algorithm_card(algorithm).train(cfg, resume=resume, progress=progress)
        main = distributed.is_main()
    if main:
        if algorithm in GRADIENT_FREE:
            print(f"done -> {out}")
        else:
            from rlvr.trainers.policy_gradient.live_progress import closing_summary
            from rlvr.trainers.runtime.checkpoint import latest_checkpoint
            from rlvr.trainers.runtime.telemetry import read_log

            print(closing_summary(read_log(out), out, latest_checkpoint(out), list(cfg.eval_benchmarks or [])))
    return out if main else None
