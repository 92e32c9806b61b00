"""``benchmarks/fork_floor.py`` runs: every spawner gives each test's exact output (the script
exits non-zero otherwise), the test processes that enter the sandbox first (through
``enter_child`` and through the same steps in C) say they did, and every step of the test
process is reported."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="the script drops privileges: root only")
def test_fork_floor_measures_both_spawners_and_every_step():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fork_floor.py"), "--tests", "40", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "round 1 fork " in out and "round 1 helper " in out and "round 1 setup py " in out
    assert ("round 1 setup C " in out) == (shutil.which("cc") is not None), out
    steps = ["fork's return", "setsid", "descriptors", "privilege drop", "seccomp filter", "python_streams", "program"]
    assert all(step in out for step in steps), out
