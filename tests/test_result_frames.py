"""Results as data: summaries and samples as pandas frames with the documented columns, the
leaderboard's parquet file, and the README's "Analyse results" example run as written."""

import json
import re
import shutil

import pandas
import pytest
from conftest import ROOT
from eval_helpers import rlvr

from harness.errors import UserError
from harness.leaderboard.build import build_leaderboard
from harness.results import load_samples, load_summaries

DOCUMENTED = [
    "run",
    "run_path",
    "fingerprint",
    "protocol_fingerprint",
    "model.name",
    "model.weights_hash",
    "protocol.template.name",
    "protocol.sampling.n",
    "protocol.sampling.temperature",
    "protocol.sampling.max_tokens",
    "protocol.backend.backend",
    "protocol.grading.math_verifier",
    "benchmark",
    "n_problems",
    "n_samples",
    "mean_at_n.value",
    "mean_at_n.ci95_lo",
    "mean_at_n.ci95_hi",
    "pass_at_k.1.value",
    "truncation_rate",
    "no_answer_rate",
    "length.correct.mean",
]


def test_committed_results_give_one_row_per_run_and_benchmark():
    frame = load_summaries(ROOT / "results")
    expected = []
    for path in sorted((ROOT / "results").rglob("summary.json")):
        for name, bench in json.loads(path.read_text())["benchmarks"].items():
            expected.append((str(path.parent), name, bench["mean_at_n"]["value"], bench["mean_at_n"]["ci95"]))
    got = sorted(
        zip(
            frame["run_path"],
            frame["benchmark"],
            frame["mean_at_n.value"],
            zip(frame["mean_at_n.ci95_lo"], frame["mean_at_n.ci95_hi"]),
        )
    )
    assert [(p, b, v, list(ci)) for p, b, v, ci in got] == sorted(expected)
    assert set(DOCUMENTED) <= set(frame.columns), set(DOCUMENTED) - set(frame.columns)
    assert "length_histogram.edges" not in frame.columns


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_model):
    root = tmp_path_factory.mktemp("analyse")
    for template in ("chat", "no_template"):
        out = root / "results" / f"tiny-{template}"
        result = rlvr(
            "eval",
            "--model",
            tiny_model,
            "--benchmarks",
            "arith",
            "--limit",
            "6",
            "--n",
            "2",
            "--temperature",
            "1.0",
            "--max-tokens",
            "4",
            "--template",
            template,
            "--no-progress",
            "--out",
            str(out),
        )
        assert result.returncode == 0, result.stderr[-2000:]
    return root


def test_samples_frame_and_the_leaderboard_parquet(two_runs):
    samples = load_samples(two_runs / "results")
    assert len(samples) == 2 * 6 * 2 and {"id", "correct", "completion", "run", "model", "fingerprint"} <= set(
        samples.columns
    )
    assert set(samples["run"]) == {"tiny-chat", "tiny-no_template"}
    info = build_leaderboard(two_runs / "results", two_runs / "board", plots=False)
    table = pandas.read_parquet(two_runs / "board" / "leaderboard.parquet")
    assert info["runs"] == len(table) == 2 and set(table["protocol.template.name"]) == {"chat", "no_template"}
    assert all(not p.startswith("/") for p in table["run_path"])  # relative to the board, like its links


def test_the_readme_example_runs_as_written(two_runs, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Analyse results") :]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)[1]
    monkeypatch.chdir(two_runs)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "chat" in out and "no_template" in out and "points over 6 problems" in out
    assert (two_runs / "templates.png").stat().st_size > 0


def test_paths_that_do_not_exist_are_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_summaries(tmp_path / "nothing")
    assert load_samples(tmp_path).empty and list(load_summaries(tmp_path).columns)[:2] == ["run", "run_path"]
    shutil.rmtree(tmp_path)
