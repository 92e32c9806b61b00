"""rlvr sandbox: the verifiers and everything that makes them safe.

Public API::

    from sandbox import verify_math, verify_math_batch, Verdict, MathGrader, MathPolicy

This package imports nothing from ``harness`` or ``trainers``.
"""
from sandbox.math.policy import PRESETS as MATH_POLICIES
from sandbox.math.policy import GoldSpec, MathPolicy
from sandbox.math.verify import MathGrader, default_grader, verify_math, verify_math_batch
from sandbox.verdict import CODE_REASONS, MATH_REASONS, Verdict
from sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION

__version__ = PACKAGE_VERSION
__all__ = [
    "CODE_REASONS",
    "CODE_VERIFIER",
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
