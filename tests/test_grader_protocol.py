"""Every batch grader has the ``rlvr.sandbox.grader.Grader`` shape: ``grade(items) -> list``, in order."""

from rlvr.harness.grading import EvalGrader
from rlvr.sandbox.grader import Grader
from rlvr.sandbox.service import GradingService
from rlvr.sandbox.serving.client import RewardClient
from rlvr.sandbox.serving.ray_grading import GraderActor, RayGrader


def test_the_batch_graders_share_one_shape():
    for cls in (GradingService, EvalGrader, RayGrader, GraderActor, RewardClient):
        assert issubclass(cls, Grader), cls


def test_a_class_without_grade_is_not_a_grader():
    class Judge:
        def verify(self, items):
            return []

    assert not issubclass(Judge, Grader)
