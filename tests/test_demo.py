"""`rlvr demo` end to end at a small size (slow: it loads and trains the embedded model): every part
prints its table and its one-line reading, and a second run resumes everything."""

import pytest
from eval_helpers import rlvr


@pytest.mark.slow
def test_demo_runs_every_part_and_resumes(tmp_path):
    args = ("demo", "--results", str(tmp_path / "demo"), "--limit", "5", "--steps", "1")
    first = rlvr(*args, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    for part in ("== 1.", "== 2.", "== 3.", "== 4.", "gain", "leaderboard of the"):
        assert part in first.stdout, part
    assert first.stdout.count("what it shows:") == 5
    assert (tmp_path / "demo" / "leaderboard" / "index.html").exists()
    assert (tmp_path / "demo" / "ablate-templates-arith" / "table.md").exists()
    # part 2's arith run is the ablation's chat cell (evaluated once), and the ablation is one table
    assert "resuming" in first.stderr and "smollm2-135m-instruct-chat: 5 finished samples reused" in first.stderr
    board = (tmp_path / "demo" / "leaderboard" / "README.md").read_text()
    assert board.count("## Ablation `") == 1 and "| template |" in board
    second = rlvr(*args, timeout=300)
    assert second.returncode == 0 and "step 1/1" not in second.stdout  # trained once, evaluated once
    assert (
        second.stdout.split("held-out arith")[1].split("\n")[0]
        == first.stdout.split("held-out arith")[1].split("\n")[0]
    )
