"""Run the ``rlvr`` command line as a user would (a subprocess), for end-to-end tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

#: A slice small enough for the CPU: 2 problems, 2 samples, 24 tokens.
SMALL = ["--limit", "2", "--n", "2", "--temperature", "0.8", "--max-tokens", "24", "--no-progress"]


def rlvr(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlvr.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def samples(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "samples.jsonl").read_text().splitlines()]


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())
