"""Every batch grader has the ``sandbox.grader.Grader`` shape: ``grade(items) -> list``, in order."""

from harness.grading import EvalGrader
from sandbox.client import RewardClient
from sandbox.grader import Grader
from sandbox.ray_grading import GraderActor, RayGrader
from sandbox.service import GradingService


def test_the_batch_graders_share_one_shape():
    for cls in (GradingService, EvalGrader, RayGrader, GraderActor, RewardClient):
        assert issubclass(cls, Grader), cls


def test_a_class_without_grade_is_not_a_grader():
    class Judge:
        def verify(self, items):
            return []

    assert not issubclass(Judge, Grader)
