"""``rlvr grade`` end to end through the real command line."""

import json
import subprocess
import sys

from conftest import ROOT

RLVR = [sys.executable, "-m", "harness.cli"]


def run(*args, stdin=None):
    return subprocess.run([*RLVR, *args], cwd=ROOT, capture_output=True, text=True, input=stdin, timeout=300)


def test_grade_math_file(tmp_path):
    rows = [
        {"id": "a", "completion": r"so \boxed{2\sqrt{3}}", "answer": r"\sqrt{12}", "source": "x"},
        {"id": "b", "completion": "The answer is 5.", "answer": "6"},
        {"id": "c", "completion": r"\boxed{9^{9^{9^{9}}}}", "answer": "1"},
        {"id": "d", "completion": "nothing here at all", "answer": "1"},
        {"id": "e", "completion": r"\boxed{18}", "answer": 18},
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "{not json")
    lines.insert(4, '["a list"]')
    lines.insert(5, json.dumps({"id": "missing-answer", "completion": "x"}))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n\n")
    out = tmp_path / "out.jsonl"
    proc = run("grade", "--kind", "math", "--input", str(src), "--output", str(out), "--workers", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in got] == ["a", "b", "line-3", "c", "line-5", "missing-answer", "d", "e"]
    assert [g["reason"] for g in got] == [
        "ok",
        "wrong_answer",
        "bad_input",
        "unparseable",
        "bad_input",
        "bad_input",
        "no_answer",
        "ok",
    ]
    for g in got:
        assert {"id", "correct", "reward", "reason", "extracted", "elapsed_ms"} <= set(g)
        assert g["correct"] is (g["reason"] == "ok")
    assert got[0]["source"] == "x" and "completion" not in got[0]
    assert "invalid JSON" in got[2]["detail"]
    assert "missing field 'answer'" in got[5]["detail"]
    assert got[0]["verifier"].startswith("rlvr-math@")
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary.startswith("graded 8 rows: accuracy 0.2500 (2/8), timeouts 0") and "rows/s" in summary


def test_grade_stdin_to_stdout():
    proc = run(
        "grade",
        "--kind",
        "math",
        "--input",
        "-",
        "--output",
        "-",
        stdin=json.dumps({"id": 1, "completion": r"\boxed{4}", "answer": "4"}) + "\n",
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout.splitlines()[0])["correct"] is True
    assert "graded 1 rows" in proc.stderr


def test_user_errors_are_one_line():
    for args in (
        ("grade", "--kind", "math", "--input", "/nonexistent.jsonl", "--output", "/tmp/x.jsonl"),
        ("grade", "--kind", "math", "--input", "-", "--output", "-", "--policy", "nope"),
        ("grade", "--kind", "math", "--input", "-", "--output", "-", "--timeout", "0"),
    ):
        proc = run(*args, stdin="")
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_help_teaches():
    proc = run("grade", "--help")
    assert proc.returncode == 0 and "examples:" in proc.stdout and "bad_input" in proc.stdout
    top = run("--help")
    assert "rlvr demo" in top.stdout


def test_demo_prints_table():
    proc = run("demo", "--grading-only")
    assert proc.returncode == 0, proc.stderr
    assert "completions graded by rlvr-math@" in proc.stdout
    assert "hedging" in proc.stdout
