"""``rlvr grade`` end to end through the real command line."""

import json
import subprocess
import sys

from conftest import ROOT

RLVR = [sys.executable, "-m", "rlvr.cli"]


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
    # accuracy is over the rows a verifier saw: the three unreadable rows are counted apart
    assert summary.startswith("graded 8 rows: accuracy 0.4000 (2/5), timeouts 0") and "rows/s" in summary
    assert "bad_input 3" in summary and "3 of 8 rows are bad_input" in proc.stderr


def test_grade_mixed_file_grades_each_row_by_its_own_kind(tmp_path):
    program = "```python\nprint(int(input()) * 2)\n```"
    rows = [
        {"id": "m", "kind": "math", "completion": r"\boxed{4}", "answer": "4"},
        {"id": "c", "kind": "code", "completion": program, "tests": [{"input": "3\n", "output": "6\n"}]},
        {"id": "c-inferred", "completion": program, "tests": [{"input": "1\n", "output": "3\n"}]},
        {"id": "nothing", "completion": "x"},
    ]
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, summary = tmp_path / "v.jsonl", tmp_path / "s.json"
    proc = run("grade", "--input", str(src), "--output", str(out), "--summary-json", str(summary), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    got = {g["id"]: g for g in map(json.loads, out.read_text().splitlines())}
    assert got["m"]["reason"] == "ok" and got["m"]["verifier"].startswith("rlvr-math@") and "passed" not in got["m"]
    assert got["c"]["reason"] == "ok" and got["c"]["verifier"].startswith("rlvr-code@") and got["c"]["passed"] == 1
    assert got["c-inferred"]["kind"] == "code" and got["c-inferred"]["reason"] == "wrong_answer"
    assert got["nothing"]["reason"] == "bad_input"
    assert "missing field 'answer' (the row has 'completion', 'id')" in got["nothing"]["detail"]
    s = json.loads(summary.read_text())
    assert (s["count"], s["gradable"], s["bad_rows"], s["correct"]) == (4, 3, 1, 2)
    assert "rlvr-math@" in s["verifier"] and "rlvr-code@" in s["verifier"]
    # --kind names the kind of rows without their own: a code row then gets the hint to say so
    proc = run("grade", "--kind", "math", "--input", str(src), "--output", str(out), "--no-progress")
    got = {g["id"]: g for g in map(json.loads, out.read_text().splitlines())}
    assert got["c"]["reason"] == "ok"  # its own kind wins over --kind
    assert got["c-inferred"]["reason"] == "bad_input" and "use --kind code" in got["c-inferred"]["detail"]


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
