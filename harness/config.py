"""Typed run configs: one layering system for ``rlvr eval``, ``rlvr ablate`` and ``rlvr train``.

A config is a dataclass. ``build_settings`` layers plain dicts (dataclass defaults < command or
algorithm defaults < a preset or YAML file < ``--set`` / typed flags), refuses unknown keys with
the list of valid ones, and coerces every value to its field's annotated type, so ``lr: 1e-5``
(a string to YAML 1.1) is a float and a wrong value names its field and the type it expected.
Commands declare their flags with ``default=argparse.SUPPRESS`` so only flags the user typed
appear (``typed_flags``), and every command takes ``--config FILE`` and ``--set KEY=VALUE``
(``rlvr.harness.run_config.add_setting_flags``). The trainers' preset lookup plugs into ``config_layer``.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar, Union

import yaml
from rlvr.harness.errors import UserError

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


class _Mismatch(Exception):
    """A value that cannot be read as the annotated type (turned into a UserError naming the field)."""


def _type_name(hint: Any) -> str:
    if hint is Any:
        return "any value"
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if origin in (list, tuple):
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    return {float: "a number", int: "an integer", bool: "true or false", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def _coerce(value: Any, hint: Any) -> Any:
    """``value`` as ``hint`` (float, int, bool, str, Optional / unions, list[...], dict[...], Any)."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin in (list, tuple):
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        elif not isinstance(value, (list, tuple)):
            value = [value]
        return [_coerce(item, args[0]) for item in value] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _Mismatch
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off", "1", "0"):
            return value.strip().lower() in ("true", "yes", "on", "1")
        raise _Mismatch
    if hint is int:
        if isinstance(value, bool):
            raise _Mismatch
        if isinstance(value, int):
            return value
        number = _coerce(value, float)
        if not float(number).is_integer():
            raise _Mismatch
        return int(number)
    if hint is float:
        if isinstance(value, bool):
            raise _Mismatch
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if hint is str:
        if isinstance(value, Path):
            return str(value)
        if not isinstance(value, str):
            raise _Mismatch
        return value
    return value


def coerce_settings(cls: type, values: Mapping[str, Any], label: str = "config") -> dict[str, Any]:
    """Every value of ``values`` as its field's annotated type; a mismatch names the field."""
    hints = typing.get_type_hints(cls)
    out = {}
    for name, value in values.items():
        try:
            out[name] = _coerce(value, hints.get(name, Any))
        except _Mismatch:
            raise UserError(f"bad {label} setting {name}: expected {_type_name(hints[name])}, got {value!r}") from None
    return out


def build_settings(cls: type[T], layers: Sequence[Mapping[str, Any]], label: str = "config") -> T:
    """``cls`` from its defaults overlaid by ``layers`` in order (later wins), typed."""
    values: dict[str, Any] = {}
    for layer in layers:
        values.update(layer)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise UserError(f"unknown {label} setting(s) {unknown}; valid: {', '.join(sorted(names))}")
    try:
        return cls(**coerce_settings(cls, values, label))
    except TypeError as exc:
        raise UserError(f"bad {label}: {exc}") from exc


#: the named presets of a ``--config``: a mapping, or a lookup by name (None: no such preset)
Presets = Optional[Union[Mapping[str, Mapping[str, Any]], Callable[[str], Optional[Mapping[str, Any]]]]]


def config_layer(source: str | None, presets: Presets = None, missing: str | None = None) -> dict[str, Any]:
    """The ``--config`` layer: a named preset (``presets``: a mapping or a lookup by name), else a
    YAML file (nothing when ``source`` is empty). ``missing``: the message when it is neither."""
    if not source:
        return {}
    found = presets(source) if callable(presets) else (presets or {}).get(source)
    if found is not None:
        return dict(found)
    if missing and not Path(source).expanduser().exists():
        raise UserError(missing)
    return read_yaml(source)


def parse_overrides(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs, values read as YAML (numbers, lists, booleans)."""
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise UserError(f"--set {pair!r} is not KEY=VALUE (e.g. --set lr=2e-5)")
        key, value = pair.split("=", 1)
        try:
            out[key.strip().replace("-", "_")] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise UserError(
                f"--set {key.strip()}: the value is not valid YAML ({getattr(exc, 'problem', exc)}); quote it in the "
                f'shell, e.g. --set "{key.strip()}=[1, 2]"'
            ) from None
    return out


def typed_flags(args: argparse.Namespace, ignore: Sequence[str] = ()) -> dict[str, Any]:
    """The flags the user typed (``argparse.SUPPRESS`` defaults), less the command's own, then the
    ``--set KEY=VALUE`` overrides (the same top layer; given after a flag, ``--set`` wins)."""
    own = ("config", "func", "command", "overrides", *ignore)
    typed = {k: v for k, v in vars(args).items() if k not in own and not k.startswith("_")}
    return typed | parse_overrides(getattr(args, "overrides", None))


def user_settings(
    args: argparse.Namespace, presets: Presets = None, ignore: Sequence[str] = (), missing: str | None = None
) -> dict[str, Any]:
    """What the user gave on the command line: ``--config`` (a file or a preset name), overlaid
    by typed flags and ``--set``. Flags named in ``ignore`` belong to the command itself."""
    return config_layer(getattr(args, "config", None), presets, missing) | typed_flags(args, ignore)


def resolve_config(
    cls: type[T],
    args: argparse.Namespace,
    presets: Presets = None,
    defaults: Mapping[str, Any] | None = None,
    ignore: tuple[str, ...] = (),
) -> T:
    """``cls`` from its defaults, then command ``defaults``, then ``--config`` (a file or a
    preset name), then typed flags and ``--set``. Flags named in ``ignore`` belong to the command."""
    return build_settings(cls, [defaults or {}, user_settings(args, presets, ignore)])


def split_list(value: Any) -> list[Any]:
    """``"a,b"`` or ``["a", "b"]`` -> list (YAML and flags spell lists differently)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]
