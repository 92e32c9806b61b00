"""Results as data: summaries and samples as pandas frames with the documented columns, the
leaderboard's parquet file, and the README's "Analyse results" example run as written. The
tests on two fresh evaluations (the example, the exports) run in the slow suite."""

import json
import re

import pandas
import pytest
from conftest import ROOT
from eval_helpers import rlvr
from rlvr.harness.errors import UserError
from rlvr.harness.leaderboard.build import build_leaderboard
from rlvr.harness.results import load_samples, load_summaries

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_readme_example_runs_as_written(two_runs, monkeypatch, capsys):
    from doc_pages import doc_text

    text = doc_text()
    section = text[text.index("### Analyse results") :]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)[1]
    monkeypatch.chdir(two_runs)
    exec(compile(code, "docs/evaluation.md", "exec"), {})
    out = capsys.readouterr().out
    assert "chat" in out and "no_template" in out and "points over 6 problems" in out
    assert (two_runs / "templates.png").stat().st_size > 0


def test_paths_that_do_not_exist_are_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_summaries(tmp_path / "nothing")
    assert load_samples(tmp_path).empty and list(load_summaries(tmp_path).columns)[:2] == ["run", "run_path"]


@pytest.mark.parametrize("fmt", ["hf", "parquet", "jsonl"])
@pytest.mark.slow
def test_export_loads_offline_with_datasets(two_runs, tmp_path, fmt, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    run = two_runs / "results" / "tiny-chat"
    result = rlvr("export", str(run), "--format", fmt, "--out", str(tmp_path / fmt))
    assert result.returncode == 0, result.stderr[-2000:]
    out = tmp_path / fmt
    if fmt == "hf":
        data = datasets.load_from_disk(str(out))
        assert "Run fingerprint" in data.info.description
    else:
        files = {"parquet": "samples.parquet", "jsonl": "samples.jsonl"}[fmt]
        data = datasets.load_dataset(
            "parquet" if fmt == "parquet" else "json", data_files=str(out / files), split="train"
        )
    summary = json.loads((run / "summary.json").read_text())
    assert len(data) == summary["benchmarks"]["arith"]["n_samples"] == 12
    assert sorted(data["id"]) == sorted(r["id"] for r in load_samples(run).to_dict(orient="records"))
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and summary["fingerprint"] in card and summary["protocol_fingerprint"] in card
    assert (out / "summary.json").read_text() == (run / "summary.json").read_text()


@pytest.mark.slow
def test_exported_and_saved_datasets_are_data_sources(two_runs, tmp_path):
    import datasets

    rows = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "rows.parquet"))
    from rlvr.harness.benchmarks.custom import load_custom

    for source in (str(tmp_path / "saved"), str(tmp_path / "rows.parquet")):
        problems = load_custom(source)
        assert [p.question for p in problems] == [r["question"] for r in rows] and problems[0].gold["answer"] == "2"
    arrow = next((tmp_path / "saved").glob("*.arrow"))
    assert [p.question for p in load_custom(str(arrow))] == [r["question"] for r in rows]


def test_export_needs_samples(tmp_path):
    result = rlvr(
        "export",
        str(ROOT / "results" / "ablate-templates-arith" / "smollm2-135m-instruct-chat"),
        "--out",
        str(tmp_path / "x"),
    )
    assert (
        result.returncode == 2 and "no samples.jsonl" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    )
