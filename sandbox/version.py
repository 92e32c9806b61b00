"""Versions recorded with every grade.

Bump a verifier version whenever a verdict can change for the same input, so results graded
under different semantics are never silently compared.
"""

PACKAGE_VERSION = "0.1.0"
MATH_VERIFIER_VERSION = "1.4.0"
CODE_VERIFIER_VERSION = "2.3.1"

MATH_VERIFIER = f"rlvr-math@{MATH_VERIFIER_VERSION}"
CODE_VERIFIER = f"rlvr-code@{CODE_VERIFIER_VERSION}"
