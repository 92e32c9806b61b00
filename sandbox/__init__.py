"""rlvr sandbox: the verifiers and everything that makes them safe.

Public API::

    from sandbox import verify_math, verify_math_batch, Verdict, MathGrader, MathPolicy
    from sandbox import verify_code, verify_code_batch, CodeGrader, Limits

Names load on first use, so a process that needs only one verifier (a sandboxing judge that
forks per test, say) does not pay for the other. This package imports nothing from
``harness`` or ``trainers``.
"""

from importlib import import_module
from typing import Any

from sandbox.verdict import CODE_REASONS, MATH_REASONS, UNVERIFIABLE_REASONS, Verdict
from sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION

__version__ = PACKAGE_VERSION

_LAZY = {
    "GoldSpec": "sandbox.math.policy",
    "MathPolicy": "sandbox.math.policy",
    "MathGrader": "sandbox.math.verify",
    "default_grader": "sandbox.math.verify",
    "verify_math": "sandbox.math.verify",
    "verify_math_batch": "sandbox.math.verify",
    "CodeGrader": "sandbox.code.verify",
    "default_code_grader": "sandbox.code.verify",
    "verify_code": "sandbox.code.verify",
    "verify_code_batch": "sandbox.code.verify",
    "Limits": "sandbox.code.limits",
}


def __getattr__(name: str) -> Any:
    if name == "MATH_POLICIES":
        return import_module("sandbox.math.policy").PRESETS
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
