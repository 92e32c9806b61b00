"""What each setting of a run means, said once on its field: eval, ablate, train and the populations.

A config is a dataclass whose fields are made by ``setting(default, help=..., role=...)``. The
field's metadata carries its help text and its ``Role`` (does it change results? may it change
when a run resumes?), and everything else is derived from it: the command-line flags and their
``--help`` (``add_setting_flags``), the settings list of ``rlvr train ALGO --help``
(``settings_help``), and through it the saved ``config.yaml`` and the one resume check
(``rlvr.harness.run_dir``), so no list of field names elsewhere has to agree with the fields.
Reading values (YAML files, layering, type coercion) is ``rlvr.harness.config``'s job.
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
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml
from rlvr.harness.errors import UserError


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


def default_text(cls: Any, name: str) -> str | None:
    """What a null default of ``name`` means as ``--help`` says it: the config class's own words
    (``SHOWN_DEFAULTS``: a shared setting whose default a command derives its own way), else the
    field's ``shown_default``."""
    return getattr(cls, "SHOWN_DEFAULTS", {}).get(name, meaning(cls, name).shown_default)


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
    if default_text(cls, name) is not None:
        return default_text(cls, name)
    spec = cls.__dataclass_fields__[name]
    if spec.default is not dataclasses.MISSING and spec.default is not None:
        return shown(spec.default)
    if spec.default_factory is not dataclasses.MISSING:
        return shown(spec.default_factory())
    return None


def _list_value(text: str) -> Any:
    """A list flag's value: YAML when it starts with ``[`` (``[{name: a}, ...]``), else the text,
    which the config reads as comma-separated (``--top-k 1,50``)."""
    return yaml.safe_load(text) if text.lstrip().startswith("[") else text


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    groups: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    shown_defaults: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of ``cls`` (less ``exclude``), under argument groups in ``groups``
    order (default: the fields' own, in field order). Every flag defaults to ``argparse.SUPPRESS``,
    so only the flags the user typed override a YAML config (``rlvr.harness.config.typed_flags``). The
    help is the field's, with its default (``shown_defaults`` when a command's own defaults differ)
    and a not-scored mark. A boolean that defaults to true also gets its ``--no-`` flag."""
    hints = typing.get_type_hints(cls)
    shown_defaults = shown_defaults or {}
    groups = groups or list(dict.fromkeys(meaning(cls, name).group for name in fields_in(cls)))
    sections = {name: parser.add_argument_group(name) for name in groups}
    for name in fields_in(cls):
        if name in exclude:
            continue
        about = meaning(cls, name)
        kind = _plain(hints[name])
        kwargs: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS}
        if kind is bool:
            on = cls.__dataclass_fields__[name].default is True
            kwargs["action"] = argparse.BooleanOptionalAction if on else "store_true"
        elif kind in (int, float):
            kwargs["type"] = kind
        elif kind is dict or typing.get_origin(kind) is dict:
            kwargs["type"] = json.loads
        elif kind is list or typing.get_origin(kind) is list:
            kwargs["type"] = _list_value
        if about.choices:
            kwargs["choices"] = list(about.choices)
        kwargs.update(about.cli)
        text = about.help
        switch = kwargs.get("action") in ("store_true", "store_false", argparse.BooleanOptionalAction)
        default = None if switch else _default_text(cls, name, shown_defaults)
        if default is not None:
            text += f" (default: {default})"
        if kwargs.get("action") is argparse.BooleanOptionalAction:
            text += " (default: on)"
        if not about.role.scored:
            text += " [not scored]"
        kwargs["help"] = text.replace("%", "%%")
        sections[about.group].add_argument(about.flag or "--" + name.replace("_", "-"), **kwargs)


def add_config_flags(parser: argparse.ArgumentParser, config_help: str) -> None:
    """``--config`` and ``--set KEY=VALUE``, the two layers every command that runs something
    takes beside its typed flags (``rlvr.harness.config.resolve_config`` reads them)."""
    group = parser.add_argument_group("configuration")
    group.add_argument("--config", default=argparse.SUPPRESS, help=config_help)
    group.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=argparse.SUPPRESS,
        metavar="KEY=VALUE",
        help="override one setting, the value read as YAML (repeatable; a setting's flag says the same)",
    )


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
            if value is None and default_text(cls, name):
                text += f" (null: {default_text(cls, name)})"
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
