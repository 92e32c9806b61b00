"""Our own labelled cases for every behaviour class the math verifier promises."""

import pytest
from math_cases import ALL_CLASSES, unpack
from rlvr.sandbox import verify_math_batch


@pytest.mark.parametrize("name", list(ALL_CLASSES))
def test_class(name):
    cases = ALL_CLASSES[name]
    items = []
    for case in cases:
        completion, gold, _, options = unpack(case)
        items.append({"completion": completion, "answer": gold, **options})
    verdicts = verify_math_batch(items)
    failures = []
    for case, verdict in zip(cases, verdicts):
        completion, gold, expected, _ = unpack(case)
        if expected is not None and verdict.correct is not expected:
            failures.append((completion[:80], gold[:40], expected, verdict.reason, verdict.detail))
        # the deadline is CPU time (1 s, up to 4 budgets on a cold worker); on a loaded
        # machine the wall clock only bounds it at the backstop (10 x 1 s + 5 s)
        assert verdict.elapsed_ms < 16_000, (completion[:80], verdict)
        assert (verdict.reward == 1.0) is verdict.correct
    assert not failures, failures
