"""The small things a new user trips on: benchmark names as papers spell them, a program's
extracted code apart from its gold, sample pages in problem order, whole counts on count axes,
where a preset's missing training file comes from, and an ablation read as one table."""

import json
import re

from rlvr.harness.benchmarks.registry import get_benchmark
from rlvr.harness.leaderboard.build import build_leaderboard
from rlvr.harness.leaderboard.samples_page import sample_order
from rlvr.harness.show import format_sample
from test_leaderboard import fake_run


def test_benchmark_names_match_without_case_or_dash():
    assert get_benchmark("MATH500").name == "math500"
    assert get_benchmark("Minerva-Math").name == "minerva_math"
    assert get_benchmark("AIME2024").name == "aime2024"


def test_show_puts_an_extracted_program_in_its_own_block_before_the_gold():
    sample = {
        "id": "p1",
        "sample_idx": 0,
        "benchmark": "pyfunc",
        "correct": False,
        "reason": "wrong_answer",
        "prompt": "write f",
        "completion": "```python\ndef f():\n    return 1\n```",
        "extracted": "def f():\n    return 1\n",
        "gold": "3 hidden tests",
    }
    lines = format_sample(sample).splitlines()
    at = lines.index("extracted:")
    assert lines[at + 1].strip() == "def f():" and lines[at + 2].strip() == "return 1"
    assert lines[at + 3] == "gold: 3 hidden tests"  # never glued to the program's last line
    math = format_sample({**sample, "extracted": "42", "gold": "42"})
    assert "extracted: 42    gold: 42" in math


def test_sample_pages_go_problem_by_problem_in_natural_order():
    finished = [("p10", 0), ("p2", 1), ("p1", 0), ("p2", 0), ("p1", 1)]
    ordered = sorted(({"id": i, "sample_idx": j} for i, j in finished), key=sample_order)
    assert [(s["id"], s["sample_idx"]) for s in ordered] == [("p1", 0), ("p1", 1), ("p2", 0), ("p2", 1), ("p10", 0)]


def test_length_histogram_counts_responses_in_whole_numbers(tmp_path):
    from rlvr.harness.leaderboard.plots import length_plot
    from rlvr.harness.leaderboard.tables import collect_runs

    fake_run(tmp_path / "results", "alpha", "qwen_math", 1, {"arith": 0.5}, 1)  # few responses per bin
    svg = length_plot(collect_runs(tmp_path / "results")[0])
    ticks = re.findall(r"<!-- (\d+(?:\.\d+)?) -->", svg)  # matplotlib names each tick label's text
    assert ticks and all(float(t) == int(float(t)) for t in ticks), ticks


def test_plan_says_where_a_papers_training_file_comes_from(capsys):
    from rlvr.cli.main import main

    assert main(["train", "drgrpo", "--config", "paper", "--plan"]) == 0
    out = capsys.readouterr().out
    stage = next(line for line in out.splitlines() if line.strip().startswith("stage math"))
    assert "not found here; from understand-r1-zero's datasets/train/math_lvl3to5_8k" in stage
    assert "`problem` and `answer`" in stage
    assert main(["train", "drgrpo", "--config", "paper", "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "understand-r1-zero" in plan["data"][0]["sources"][0]["origin"]


def test_an_ablation_is_one_table_with_the_varied_setting_as_a_column(tmp_path):
    results = tmp_path / "results"
    folder = results / "ablate-templates-x"
    cells = [fake_run(folder, "alpha", t, 1, {"arith": p}, i) for i, (t, p) in enumerate([("chat", 0.3), ("r1", 0.6)])]
    (folder / "manifest.json").write_text(json.dumps({"kind": "templates", "cells": [{"run": c.name} for c in cells]}))
    fake_run(results, "beta", "chat", 1, {"arith": 0.5}, 9)  # outside the ablation: its own protocol table
    info = build_leaderboard(results, tmp_path / "board", plots=False, sample_pages=False)
    assert info["tables"] == 2
    text = (tmp_path / "board" / "README.md").read_text()
    ablation = text.split("## Ablation `")[1].split("## ")[0]
    assert "rows differ in template" in ablation and "| # | Model | template | arith | Avg |" in ablation
    assert ablation.index("| r1 |") < ablation.index("| chat |")  # ranked inside the one table


def test_a_data_files_bad_row_is_counted_from_one_and_shows_its_fields(tmp_path):
    import pytest
    from rlvr.harness.benchmarks.custom import load_custom
    from rlvr.harness.errors import UserError

    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n" + json.dumps({"question": "2+2?", "sol": 4}))
    with pytest.raises(UserError) as err:
        load_custom(str(data))
    assert "row 2 has no answer (its fields are question, sol); map it with --fields answer=COLUMN" in str(err.value)
