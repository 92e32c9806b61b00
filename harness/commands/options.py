"""Flags several subcommands share, spelled once."""

from __future__ import annotations

from typing import Any


def add_ray_option(parser: Any, help: str, default: Any = None) -> None:
    """``--ray [ADDRESS]``: bare ``--ray`` is ``auto`` (RAY_ADDRESS, a cluster here, else a local one)."""
    parser.add_argument("--ray", nargs="?", const="auto", default=default, metavar="ADDRESS", help=help)
