"""rlvr sandbox: the verifiers and everything that makes them safe.

Public API::

    from sandbox import verify_math, verify_math_batch, Verdict, MathGrader, MathPolicy
    from sandbox import verify_code, verify_code_batch, CodeGrader, Limits

This package imports nothing from ``harness`` or ``trainers``.
"""
from sandbox.code.limits import Limits
from sandbox.code.verify import CodeGrader, default_code_grader, verify_code, verify_code_batch
from sandbox.math.policy import PRESETS as MATH_POLICIES
from sandbox.math.policy import GoldSpec, MathPolicy
from sandbox.math.verify import MathGrader, default_grader, verify_math, verify_math_batch
from sandbox.verdict import CODE_REASONS, MATH_REASONS, Verdict
from sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION

__version__ = PACKAGE_VERSION
__all__ = [
    "CODE_REASONS",
    "CODE_VERIFIER",
    "CodeGrader",
    "Limits",
    "default_code_grader",
    "verify_code",
    "verify_code_batch",
    "GoldSpec",
    "MATH_POLICIES",
    "MATH_REASONS",
    "MATH_VERIFIER",
    "MathGrader",
    "MathPolicy",
    "Verdict",
    "default_grader",
    "verify_math",
    "verify_math_batch",
]
