"""What each setting of a run means, said once on its field: eval, ablate, train and the populations.

A config is a dataclass whose fields are made by ``setting(default, help=..., role=...)``. The
field's metadata carries its help text and its ``Role`` (does it change results? may it change
when a run resumes?), and everything else is derived from it: the command-line flags and their
``--help`` (``add_setting_flags``), the settings list of ``rlvr train ALGO --help``
(``settings_help``), the saved ``config.yaml`` (``save_config``) and the one resume check
(``check_resume``), so no list of field names elsewhere has to agree with the fields.
Reading values (YAML files, layering, type coercion) is ``harness.config``'s job.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from harness.config import read_yaml
from harness.errors import UserError

#: the file a run directory keeps its resolved settings in
CONFIG_FILE = "config.yaml"


class Role(enum.Enum):
    """What changing a setting does to a run, which decides whether a resume may change it."""

    #: defines the protocol (an evaluation's fingerprint) or the algorithm's objective
    PROTOCOL = "protocol"
    #: changes results in any other way
    RESULT = "result"
    #: changes what the run goes on to do (how long, what it evaluates), not what it has done
    RESUMABLE = "resumable"
    #: changes no result: where outputs go, how fast or with what resources, what is shown
    NOT_SCORED = "not scored"

    @property
    def scored(self) -> bool:
        """Whether results depend on it (an evaluation's summary records these)."""
        return self is not Role.NOT_SCORED

    @property
    def resumable(self) -> bool:
        """Whether a run may resume with it changed."""
        return self in (Role.RESUMABLE, Role.NOT_SCORED)


ROLE_TEXT = {
    Role.PROTOCOL: "defines the protocol or the objective",
    Role.RESULT: "changes results",
    Role.RESUMABLE: "changes only what the run goes on to do (how long, what it evaluates)",
    Role.NOT_SCORED: "changes no result",
}


def role_legend(role: Role) -> str:
    """What a role means, and whether a resume may change a setting of it, in one line."""
    return f"{ROLE_TEXT[role]}; " + ("may change on resume" if role.resumable else "a resume refuses a change")


@dataclass(frozen=True)
class Meaning:
    """A field's metadata: ``help`` (one line: meaning and unit), ``role``, the ``group`` it is
    listed under, and for the command line its ``flag`` spelling (default ``--the-name``), the
    ``shown_default`` where the value alone would not say it, ``choices`` and other argparse
    keywords (``cli``). ``described``: the help, or a function that writes it when it is shown
    (a setting whose choices come from a table lists the table's entries as they are then)."""

    described: str | Callable[[], str]
    role: Role
    group: str
    flag: str | None = None
    shown_default: str | None = None
    choices: tuple[str, ...] | None = None
    cli: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def help(self) -> str:
        return self.described() if callable(self.described) else self.described


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str | Callable[[], str],
    role: Role,
    group: str,
    default_factory: Any = dataclasses.MISSING,
    flag: str | None = None,
    shown_default: str | None = None,
    choices: Sequence[str] | None = None,
    **cli: Any,
) -> Any:
    """A dataclass field that knows what it means (see ``Meaning``)."""
    meaning = Meaning(help, role, group, flag, shown_default, tuple(choices) if choices else None, cli)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"rlvr": meaning})


def meaning(cls: Any, name: str) -> Meaning:
    """The ``Meaning`` of field ``name`` of the config class (or instance) ``cls``."""
    return cls.__dataclass_fields__[name].metadata["rlvr"]


def fields_in(cls: Any) -> list[str]:
    """Field names of ``cls`` in declaration order (the order of ``config.yaml``)."""
    return [f.name for f in dataclasses.fields(cls)]


def scored_settings(config: Any) -> dict[str, Any]:
    """The settings results depend on, in field order (an evaluation's ``summary.json`` ``config``)."""
    return {k: v for k, v in dataclasses.asdict(config).items() if meaning(config, k).role.scored}


def require(checks: Iterable[tuple[bool, str]], prefix: str = "") -> None:
    """Raise the first failing check's message (``prefix`` first) as a one-line ``UserError``."""
    for ok, message in checks:
        if not ok:
            raise UserError(f"{prefix}{message}")


# ---- config.yaml and resuming -----------------------------------------------------------------
def save_config(config: Any, run_dir: Path) -> None:
    """Write the fully resolved config (what actually ran) to ``run_dir/config.yaml``, in field order."""
    text = yaml.safe_dump(dataclasses.asdict(config), sort_keys=False, allow_unicode=True)
    (Path(run_dir) / CONFIG_FILE).write_text(text, encoding="utf-8")


def saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The settings saved in ``run_dir/config.yaml`` as written, or None when there is none."""
    path = Path(run_dir) / CONFIG_FILE
    return read_yaml(path) if path.is_file() else None


def _changed(saved: Mapping[str, Any], config: Any) -> list[str]:
    # A field the saved file lacks did not exist when that run started: it counts as null, not as
    # today's default, which the old code need not have followed.
    current = dataclasses.asdict(config)
    return sorted(k for k, v in current.items() if not meaning(config, k).role.resumable and saved.get(k) != v)


def changed_settings(run_dir: Path, config: Any) -> list[str]:
    """Sorted names of the settings whose role refuses a resume and whose value differs from the
    config saved in ``run_dir`` (a field the saved file lacks counts as null); none without one."""
    saved = saved_config(run_dir)
    return [] if saved is None else _changed(saved, config)


def check_resume(run_dir: Path, config: Any, *, saved_required: bool = False) -> None:
    """Refuse, in one line naming the fields, to continue ``run_dir`` under settings that change
    results. The wording is the config class's ``RESUME_REFUSAL``, formatted with ``run_dir``,
    ``names`` (every changed field) and ``changes`` (the first four as ``name: old -> new``, then
    the names of the rest).
    ``saved_required``: a run that has already trained (checkpoints, a journal) but lost its
    ``config.yaml`` cannot be matched to settings, so it is refused rather than trusted."""
    saved = saved_config(run_dir)
    if saved is None and saved_required:
        raise UserError(
            f"{run_dir} holds a run but no config.yaml, so its settings cannot be checked; "
            "restore its config.yaml or use a new --out"
        )
    names = [] if saved is None else _changed(saved, config)
    if not names:
        return
    shown = [
        f"{k}: {saved[k]!r} -> {getattr(config, k)!r}" if k in saved else f"{k}: unset -> {getattr(config, k)!r}"
        for k in names[:4]
    ]
    more = f"; {len(names) - 4} more: {', '.join(names[4:])}" if len(names) > 4 else ""
    changes = ", ".join(shown) + more
    raise UserError(type(config).RESUME_REFUSAL.format(run_dir=run_dir, names=", ".join(names), changes=changes))


# ---- the command line ------------------------------------------------------------------------
def shown(value: Any) -> str:
    """A value as it is typed after ``--set KEY=`` or in a YAML file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return str(value)


def _plain(hint: Any) -> Any:
    """``X`` for ``X | None``; other hints as they are."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return options[0] if len(options) == 1 else hint
    return hint


def _default_text(cls: Any, name: str, shown_defaults: Mapping[str, str]) -> str | None:
    if name in shown_defaults:
        return shown_defaults[name]
    about = meaning(cls, name)
    if about.shown_default is not None:
        return about.shown_default
    spec = cls.__dataclass_fields__[name]
    if spec.default is not dataclasses.MISSING and spec.default is not None:
        return shown(spec.default)
    if spec.default_factory is not dataclasses.MISSING:
        return shown(spec.default_factory())
    return None


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    groups: Sequence[str],
    exclude: Sequence[str] = (),
    shown_defaults: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of ``cls`` (less ``exclude``), under argument groups in ``groups``
    order. Every flag defaults to ``argparse.SUPPRESS``, so only the flags the user typed
    override a YAML config (``harness.config.typed_flags``). The help is the field's, with its
    default (``shown_defaults`` when a command's own defaults differ) and a not-scored mark."""
    hints = typing.get_type_hints(cls)
    shown_defaults = shown_defaults or {}
    sections = {name: parser.add_argument_group(name) for name in groups}
    for name in fields_in(cls):
        if name in exclude:
            continue
        about = meaning(cls, name)
        kind = _plain(hints[name])
        kwargs: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS}
        if kind is bool:
            kwargs["action"] = "store_true"
        elif kind in (int, float):
            kwargs["type"] = kind
        elif kind is dict or typing.get_origin(kind) is dict:
            kwargs["type"] = json.loads
        if about.choices:
            kwargs["choices"] = list(about.choices)
        kwargs.update(about.cli)
        text = about.help
        default = (
            None if kwargs.get("action") in ("store_true", "store_false") else _default_text(cls, name, shown_defaults)
        )
        if default is not None:
            text += f" (default: {default})"
        if not about.role.scored:
            text += " [not scored]"
        kwargs["help"] = text.replace("%", "%%")
        sections[about.group].add_argument(about.flag or "--" + name.replace("_", "-"), **kwargs)


def settings_help(cls: type, defaults: Mapping[str, Any], marked: Sequence[str] = (), width: int = 100) -> str:
    """Every field of ``cls`` as ``name=default  help [role]``, by group: the settings a ``--set``
    flag or a YAML file may give, with the ``defaults`` a run starts from. Fields in ``marked``
    get a ``*``; roles other than ``result`` are tagged, and a legend says what each means."""
    column = 34
    groups: dict[str, list[str]] = {}
    for name in fields_in(cls):
        groups.setdefault(meaning(cls, name).group, []).append(name)
    lines: list[str] = []
    for group, names in groups.items():
        lines += ["", f"{group}:"]
        for name in names:
            about, value = meaning(cls, name), defaults.get(name)
            text = about.help
            if value is None and about.shown_default:
                text += f" (null: {about.shown_default})"
            if about.role is not Role.RESULT:
                text += f" [{about.role.value}]"
            left = f"  {'*' if name in marked else ' '}{name}={shown(value)}"
            body = textwrap.wrap(text, width - column)
            if len(left) + 2 > column:
                lines += [left] + [" " * column + part for part in body]
            else:
                lines += [left.ljust(column) + body[0]] + [" " * column + part for part in body[1:]]
    lines += ["", "roles:", f"  untagged      {role_legend(Role.RESULT)}"]
    lines += [f"  [{role.value}]".ljust(16) + role_legend(role) for role in Role if role is not Role.RESULT]
    return "\n".join(lines)
