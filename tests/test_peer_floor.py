"""The floor F that ``benchmarks/bench_code_peers.py`` states our speed against: the limits it
reads back from our own verdict details, and the exclusion rule shared by both peers."""

import sys

import pytest
from conftest import ROOT
from rlvr.sandbox.code.judging.outcomes import outcome_reason, wall_s
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.running.channels import TOTAL_LIMIT_NOTE

sys.path.insert(0, str(ROOT / "benchmarks"))
from lcb_programs import SLOW  # noqa: E402
from peer_floor import WAITS_OUT_LIMIT, burn_s, floor_s, timed, untimed, versus_floor  # noqa: E402


@pytest.mark.parametrize("notes", [["cpu time limit"], ["wall clock limit"], [TOTAL_LIMIT_NOTE], []])
def test_the_limit_burnt_is_read_from_each_time_limit_detail_the_sandbox_writes(notes):
    limits = Limits(time_s=2.5, total_s=7.0)
    reason, detail = outcome_reason({"status": "tle", "notes": notes}, limits, None)
    expected = {"wall clock limit": wall_s(limits, None), TOTAL_LIMIT_NOTE: 7.0}.get((notes or [""])[0], 2.5)
    assert reason == "time_limit"
    assert burn_s(reason, f"test 3: {detail}") == pytest.approx(expected)
    assert burn_s("wrong_answer", detail) == 0.0


def test_one_exclusion_rule_covers_both_peers_waiting_classes():
    assert SLOW <= WAITS_OUT_LIMIT and "hangs_sometimes" in WAITS_OUT_LIMIT
    programs = [{"class": c} for c in ("canonical", "hangs_sometimes", "sleep_7s", "correct", "busy_loop")]
    assert [p["class"] for p in timed(programs)] == ["canonical", "correct"]
    assert len(timed(programs)) + len(untimed(programs)) == len(programs)


def test_floor_counts_own_cpu_of_passing_programs_and_burns_over_the_cores():
    floor = floor_s(
        [(True, "ok", "", 3.0), (False, "wrong_answer", "", 5.0), (False, "time_limit", "exceeded 1s", 9.0)]
    )
    assert floor["own_cpu_s"] == 3.0 and floor["burns_s"] == 1.0
    assert floor["F_s"] == pytest.approx(4.0 / floor["cores"])
    assert versus_floor(30.0, 12.0, 6.0) == {"ours_x_F": 2.0, "peer_x_F": 5.0, "above_F_ratio": 4.0}
    assert versus_floor(30.0, 5.0, 6.0)["above_F_ratio"] is None
