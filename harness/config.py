"""Typed run configs from YAML files and command-line flags (flags win), saved resolved.

Commands declare their flags with ``default=argparse.SUPPRESS`` so only flags the user typed
appear; ``resolve_config`` layers dataclass defaults < YAML file < flags and rejects unknown
keys with the list of valid ones.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, TypeVar

import yaml

from harness.errors import UserError

T = TypeVar("T")


def read_yaml(path: str | Path) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.exists():
        raise UserError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise UserError(f"config file {path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must be a mapping of option: value")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def resolve_config(cls: type[T], args: argparse.Namespace, presets: dict[str, dict[str, Any]] | None = None, defaults: dict[str, Any] | None = None, ignore: tuple[str, ...] = ()) -> T:
    """``cls`` from its defaults, then command ``defaults``, then ``--config`` (a file or a
    preset name), then typed flags. Flags named in ``ignore`` belong to the command itself."""
    values: dict[str, Any] = dict(defaults or {})
    source = getattr(args, "config", None)
    if source:
        if presets and source in presets:
            values.update(presets[source])
        else:
            values.update(read_yaml(source))
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "func", "command", *ignore) and not k.startswith("_")}
    values.update(flags)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise UserError(f"unknown config key(s) {unknown}; valid keys: {', '.join(sorted(names))}")
    try:
        return cls(**values)
    except TypeError as exc:
        raise UserError(f"bad config: {exc}") from exc


def dump_config(config: Any, path: Path) -> None:
    """Write the fully resolved config (what actually ran) as YAML."""
    path.write_text(yaml.safe_dump(dataclasses.asdict(config), sort_keys=False, allow_unicode=True), encoding="utf-8")


def split_list(value: Any) -> list[Any]:
    """``"a,b"`` or ``["a", "b"]`` -> list (YAML and flags spell lists differently)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]
