"""rlvr sandbox: the verifiers and everything that makes them safe.

Public API::

    from rlvr.sandbox import verify_math, verify_math_batch, Verdict, MathGrader, MathPolicy
    from rlvr.sandbox import verify_code, verify_code_batch, CodeGrader, Limits

Names load on first use, so a process that needs only one verifier (a sandboxing judge that
forks per test, say) does not pay for the other. This package imports nothing from
``harness`` or ``trainers``.
"""

from importlib import import_module
from typing import Any

from rlvr.sandbox.verdict import CODE_REASONS, MATH_REASONS, UNVERIFIABLE_REASONS, Verdict
from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION

__version__ = PACKAGE_VERSION

_LAZY = {
    "GoldSpec": "rlvr.sandbox.math.policy",
    "MathPolicy": "rlvr.sandbox.math.policy",
    "MathGrader": "rlvr.sandbox.math.verify",
    "default_grader": "rlvr.sandbox.math.verify",
    "verify_math": "rlvr.sandbox.math.verify",
    "verify_math_batch": "rlvr.sandbox.math.verify",
    "CodeGrader": "rlvr.sandbox.code.verify",
    "default_code_grader": "rlvr.sandbox.code.verify",
    "verify_code": "rlvr.sandbox.code.verify",
    "verify_code_batch": "rlvr.sandbox.code.verify",
    "Limits": "rlvr.sandbox.code.rules.limits",
}


def __getattr__(name: str) -> Any:
    if name == "MATH_POLICIES":
        return import_module("rlvr.sandbox.math.policy").PRESETS
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")


__all__ = [
    "CODE_REASONS",
    "CODE_VERIFIER",
    "CodeGrader",
    "GoldSpec",
    "Limits",
    "MATH_POLICIES",
    "MATH_REASONS",
    "MATH_VERIFIER",
    "MathGrader",
    "MathPolicy",
    "UNVERIFIABLE_REASONS",
    "Verdict",
    "default_code_grader",
    "default_grader",
    "verify_code",
    "verify_code_batch",
    "verify_math",
    "verify_math_batch",
]
