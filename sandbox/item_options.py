"""Option values of one grading item, checked before anything is graded.

A misspelled option must fail the request that carries it, loudly, rather than turn every
verdict of a training run into ``bad_input`` (a reward of 0 a trainer cannot tell from a wrong
answer). The checks are the graders' own constructors (``resolve_policy``, ``Comparison``,
``Limits``, ``get_language``, which check types and finiteness themselves), so what is
accepted here is exactly what grades; only the gold declarations are checked here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from rlvr.sandbox.code.judging.compare import Comparison
from rlvr.sandbox.code.rules.languages import LANGUAGES, get_language
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.math.policy import PRESETS, MathPolicy, resolve_policy


class BadOption(ValueError):
    """One option's value is unusable; ``field`` names it, the message says what is allowed."""

    def __init__(self, field: str, need: str):
        super().__init__(f"{field}: {need}")
        self.field = field
        self.need = need


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_math_options(payload: Mapping[str, Any]) -> None:
    """Raise ``BadOption`` for a math item whose policy or gold declarations cannot be used."""
    policy = payload.get("policy")
    if policy is not None and not isinstance(policy, MathPolicy) and policy not in PRESETS:
        raise BadOption("policy", f"unknown math policy {policy!r}; choose from {sorted(PRESETS)}")
    overrides = {f.name: payload[f.name] for f in fields(MathPolicy) if f.name in payload and f.name != "name"}
    for name, value in overrides.items():
        try:
            resolve_policy(policy, **{name: value})
        except (ValueError, TypeError) as exc:
            raise BadOption(name, str(exc)) from None
    if "answer_type" in payload and not isinstance(payload["answer_type"], str):
        raise BadOption("answer_type", f"a string such as 'interval' or 'Numerical', got {payload['answer_type']!r}")
    if "tolerance" in payload:
        value = payload["tolerance"]
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise BadOption("tolerance", f"a finite number, got {payload['tolerance']!r}") from None
        if not _is_number(value) or not math.isfinite(value) or value < 0:
            raise BadOption("tolerance", f"a finite non-negative number, got {payload['tolerance']!r}")
    if "multiple" in payload and not isinstance(payload["multiple"], bool):
        raise BadOption("multiple", f"true or false, got {payload['multiple']!r}")


def check_code_options(payload: Mapping[str, Any]) -> None:
    """Raise ``BadOption`` for a code item whose language, comparison or limits cannot be used."""
    if "language" in payload:
        if not isinstance(payload["language"], str):
            raise BadOption("language", f"one of {sorted(LANGUAGES)}")
        try:
            get_language(payload["language"])
        except ValueError as exc:
            raise BadOption("language", str(exc)) from None
    if "compare" in payload or "oracle" in payload:
        oracle = payload.get("oracle")
        if oracle is not None and not isinstance(oracle, str):
            raise BadOption("oracle", f"an oracle name, got {oracle!r}")
        try:
            Comparison.from_any(payload.get("compare"), oracle)
        except (ValueError, TypeError) as exc:
            field = "oracle" if "oracle" in str(exc) and "compare" not in payload else "compare"
            raise BadOption(field, str(exc)) from None
    if "limits" in payload:
        limits = payload["limits"]
        if not isinstance(limits, (Mapping, Limits)):
            raise BadOption("limits", f"an object of limits such as {{'time_s': 2}}, got {limits!r}")
        try:
            Limits.from_any(dict(limits) if isinstance(limits, Mapping) else limits)
        except (ValueError, TypeError) as exc:
            named = [f.name for f in fields(Limits) if f"{f.name}=" in str(exc) or f"limit {f.name} " in str(exc)]
            raise BadOption(f"limits.{named[0]}" if len(named) == 1 else "limits", str(exc)) from None
    if "stdin_process" in payload and payload["stdin_process"] not in ("test", "submission"):
        raise BadOption("stdin_process", f"test or submission, got {payload['stdin_process']!r}")
    if "partial" in payload and not isinstance(payload["partial"], bool):
        raise BadOption("partial", f"true or false, got {payload['partial']!r}")
    for name in ("fn_name", "starter_code", "prelude", "postlude", "test_setup"):
        if name in payload and not isinstance(payload[name], str):
            raise BadOption(name, f"a string, got {type(payload[name]).__name__}")
