"""Flags several subcommands share, spelled once."""

from __future__ import annotations

import argparse
from typing import Any, Mapping, Sequence

from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.run_config import add_config_flags, add_setting_flags

#: ``EvalConfig``'s flag groups, in the order ``--help`` lists them
EVAL_GROUPS = ("model", "protocol", "generation", "backend", "vllm engine", "grading and data", "run")


def add_ray_option(parser: Any, help: str, default: Any = None) -> None:
    """``--ray [ADDRESS]``: bare ``--ray`` is ``auto`` (RAY_ADDRESS, a cluster here, else a local one)."""
    parser.add_argument("--ray", nargs="?", const="auto", default=default, metavar="ADDRESS", help=help)


def add_eval_flags(
    parser: argparse.ArgumentParser, exclude: Sequence[str] = (), shown_defaults: Mapping[str, str] | None = None
) -> None:
    """Every ``EvalConfig`` setting as a flag (``rlvr eval`` and the ablations, which choose
    ``exclude``'s themselves), plus ``--config`` (a YAML file) and ``--set KEY=VALUE``."""
    add_setting_flags(parser, EvalConfig, EVAL_GROUPS, exclude, shown_defaults)
    add_config_flags(parser, "YAML file of settings (keys = flag names with underscores); flags and --set override it")
