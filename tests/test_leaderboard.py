"""Leaderboards from a results directory holding two protocols: separate tables (or one with
--mix), Markdown/CSV linked to the runs, and the HTML page checked in a real headless Chromium
(no console errors, expected rows, sorting, plots rendered; a screenshot is kept)."""

import csv
import json
import os
import random
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from eval_helpers import rlvr
from rlvr.harness.errors import UserError
from rlvr.harness.fingerprint import fingerprints, protocol_fields
from rlvr.harness.leaderboard.build import build_leaderboard
from rlvr.harness.summary import benchmark_metrics

ARTIFACTS = Path(os.environ.get("RLVR_TEST_ARTIFACTS", ROOT / "test-artifacts"))


def fake_run(folder: Path, model: str, template: str, n: int, accuracy: dict[str, float], seed: int = 0) -> Path:
    """A run directory whose summary comes from the real metric code on synthetic samples."""
    rng = random.Random(seed)
    protocol = protocol_fields(
        {"name": template, "hash": template[:4], "stop": [], "shots": 0},
        {"n": n, "temperature": 0.7, "top_p": 1.0, "max_tokens": 64, "seed": 0, "max_model_len": None},
        {"backend": "hf", "version": "test", "dtype": "float32"},
        {"math_verifier": "rlvr-math@x", "code_verifier": "rlvr-code@x"},
    )
    benches, revisions = {}, {}
    for bench, p in accuracy.items():
        ids = [f"{bench}/{i}" for i in range(30)]
        rows = [
            {
                "id": pid,
                "sample_idx": j,
                "correct": (ok := rng.random() < p),
                "reward": float(ok),
                "reason": "ok" if ok else "wrong_answer",
                "finish_reason": "length" if rng.random() < 0.1 else "stop",
                "n_tokens": rng.randint(5, 64),
                "extracted": "1" if ok else "2",
                "completion": "wait, let me recheck" if rng.random() < 0.2 else "done",
            }
            for pid in ids
            for j in range(n)
        ]
        benches[bench] = benchmark_metrics("math", ids, rows, lambda pid, a, b: a == b, max_tokens=64)
        revisions[bench] = f"rev-{bench}"
    prints = fingerprints(protocol, revisions)
    for bench in benches:
        benches[bench].update(fingerprint=prints["per_benchmark"][bench], data_revision=revisions[bench])
    run = folder / f"{model}-{template}"
    run.mkdir(parents=True)
    summary = {
        "fingerprint": prints["fingerprint"],
        "protocol_fingerprint": prints["protocol_fingerprint"],
        "protocol": protocol,
        "model": {"name": model, "path": model, "weights_hash": None},
        "versions": {"rlvr": "test"},
        "timings": {},
        "benchmarks": benches,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "config.yaml").write_text(f"model: {model}\ntemplate: {template}\n")
    return run


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    root = tmp_path_factory.mktemp("board")
    results = root / "results"
    fake_run(results, "alpha", "qwen_math", 4, {"arith": 0.7, "gsm8k": 0.2}, 1)
    fake_run(results, "beta", "qwen_math", 4, {"arith": 0.3, "gsm8k": 0.4}, 2)
    fake_run(results, "gamma", "qwen_math", 4, {"arith": 0.9, "gsm8k": 0.6}, 3)
    fake_run(results, "alpha", "r1", 4, {"arith": 0.4, "gsm8k": 0.1}, 4)
    fake_run(results / "nested", "beta", "r1", 4, {"arith": 0.5, "gsm8k": 0.3}, 5)
    out = root / "leaderboards"
    info = build_leaderboard(results, out)
    return results, out, info


def test_two_protocols_give_two_ranked_tables(board):
    results, out, info = board
    assert info["runs"] == 5 and info["tables"] == 2
    assert set(info["plots"]) == {"passk", "templates", "lengths", "rates"}
    text = (out / "README.md").read_text()
    assert text.count("## Protocol") == 2
    first = text.split("## Protocol")[1]
    assert first.index("[gamma]") < first.index("[alpha]") < first.index("[beta]")  # ranked by average
    assert "template qwen_math, n=4" in first and "pass@4" in first
    for link in __import__("re").findall(r"\]\(([^)]+summary\.json)\)", text):
        assert (out / link).resolve().exists(), link


def test_csv_rows_carry_protocol_and_ci(board):
    _, out, _ = board
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert len(rows) == 5 * 2
    assert {r["template"] for r in rows} == {"qwen_math", "r1"}
    for r in rows:
        assert float(r["ci95_lo"]) <= float(r["mean_at_n"]) <= float(r["ci95_hi"])
        assert r["k"] == "4" and r["protocol_fingerprint"]


def test_mix_puts_everything_in_one_table_with_differing_settings(board, tmp_path):
    results, _, _ = board
    info = build_leaderboard(results, tmp_path / "mixed", mix=True, plots=False)
    assert info["tables"] == 1
    text = (tmp_path / "mixed" / "README.md").read_text()
    assert "| # | Model | template | arith | gsm8k | Avg |" in text


def test_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no run summaries"):
        build_leaderboard(tmp_path, tmp_path / "out")
    result = rlvr("leaderboard", "--results", str(tmp_path / "missing"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_page_in_headless_chromium(board):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian chromium is not installed (`apt-get install chromium`; .ci/run does it)")
    _, out, _ = board
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems = []
        page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
        page.goto((out / "index.html").as_uri())
        page.wait_for_load_state("load")
        assert problems == []
        tables = page.query_selector_all("table.board")
        assert len(tables) == 2

        def first_models():
            return [
                c.inner_text().split("\n")[0] for c in tables[0].query_selector_all("tbody tr td:nth-child(2) strong")
            ]

        assert first_models() == ["gamma", "alpha", "beta"]
        arith = tables[0].query_selector("thead th:nth-child(3)")
        assert arith.inner_text().strip() == "arith"
        arith.click()  # descending by arith accuracy
        by_arith = first_models()
        arith.click()  # ascending
        assert first_models() == list(reversed(by_arith))
        tables[0].query_selector("thead th:nth-child(2)").click()  # by model name, descending
        assert first_models() == ["gamma", "beta", "alpha"]
        figures = page.query_selector_all("figure svg")
        assert len(figures) == 4
        for svg in figures:
            box = svg.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 100
        assert page.query_selector_all("figure svg path")  # drawn, not empty
        links = page.query_selector_all("h2 a.permalink")
        assert len(links) == 2
        for link in links:
            anchor = link.get_attribute("href")
            assert anchor.startswith("#protocol-") and page.query_selector(anchor) is not None
        links[1].click()
        assert page.evaluate("location.hash") == links[1].get_attribute("href")
        downloads = {a.get_attribute("href") for a in page.query_selector_all("a[download]")}
        assert downloads == {"leaderboard.csv", "leaderboard.parquet"} and all((out / d).is_file() for d in downloads)
        page.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "leaderboard.png").stat().st_size > 10_000


def test_checkpoints_of_different_runs_keep_distinct_names(tmp_path):
    from rlvr.harness.leaderboard.tables import Run

    def run(name, path):
        return Run(tmp_path, {"model": {"name": name, "path": path}})

    assert run("checkpoint-000025", "/x/results/train-srpo/checkpoint-000025").model == "train-srpo/checkpoint-000025"
    assert run("checkpoint-000025", "/x/results/train-grpo/checkpoint-000025").model == "train-grpo/checkpoint-000025"
    assert run("Qwen/Qwen2.5-Math-1.5B", "Qwen/Qwen2.5-Math-1.5B").model == "Qwen/Qwen2.5-Math-1.5B"


def test_diff_against_an_earlier_build(board, tmp_path):
    import json as _json

    from rlvr.harness.leaderboard.diff import leaderboard_diff

    results, out, _ = board
    moved = tmp_path / "results"
    shutil.copytree(results, moved)
    shutil.rmtree(moved / "nested")  # a run removed
    fake_run(moved, "delta", "qwen_math", 4, {"arith": 0.5, "gsm8k": 0.5}, 6)  # a run added
    summary_path = moved / "alpha-qwen_math" / "summary.json"
    summary = _json.loads(summary_path.read_text())
    summary["benchmarks"]["arith"]["mean_at_n"] = {"value": 0.1, "ci95": [0.05, 0.15]}  # far outside its old CI
    summary["benchmarks"]["gsm8k"]["mean_at_n"]["value"] += 0.001  # within the CI: noise
    summary_path.write_text(_json.dumps(summary))
    new = tmp_path / "board"
    result = rlvr("leaderboard", "--results", str(moved), "--out", str(new), "--no-plots", "--diff", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    report = leaderboard_diff(out, new)
    assert [(c["run"], c["benchmark"]) for c in report["changed"]] == [("alpha-qwen_math", "arith")]
    assert {r["run"] for r in report["new_runs"]} == {"delta-qwen_math"} and {
        r["run"] for r in report["removed_runs"]
    } == {"beta-r1"}
    assert report["unchanged"] == 2 * 4 - 1
    assert (
        "scores: 2 new, 2 removed, 1 changed beyond their 95% CI, 7 unchanged" in result.stdout
        and (new / "diff.md").exists()
    )
    assert _json.loads((new / "diff.json").read_text())["changed"][0]["delta"] < 0
    missing = rlvr(
        "leaderboard", "--results", str(moved), "--out", str(tmp_path / "b2"), "--diff", str(tmp_path / "nothing")
    )
    assert missing.returncode == 2 and "no leaderboard.parquet" in missing.stderr
