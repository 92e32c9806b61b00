"""Issue 32, a new user's walk-through: no command destroys data, every user error is one line
(exit 2), progress shows while an evaluation runs and every finished sample is kept, warnings
where a careful colleague would speak, ``rlvr show`` and the leaderboard's sample pages, and help
texts that agree with the program. Everything here runs in seconds (fake engines, synthetic runs)."""

from __future__ import annotations

import io
import json
import os
import re
import time

import pytest
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from ux_helpers import make_run

from rlvr.cli.main import build_parser, main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``rlvr ARGV`` in process: (exit code, stdout, stderr); argparse's own exits included."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, needle: str) -> None:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and needle in lines[0], err


# ---- 1. no command destroys data ------------------------------------------------------------------
@pytest.mark.parametrize("how", ["same", "relative", "symlink"])
def test_grade_refuses_to_write_over_its_input(tmp_path, capsys, monkeypatch, how):
    src = tmp_path / "f.jsonl"
    content = json.dumps({"completion": "\\boxed{1}", "answer": "1"}) + "\n"
    src.write_text(content)
    monkeypatch.chdir(tmp_path)
    output = {"same": str(src), "relative": "./sub/../f.jsonl", "symlink": str(tmp_path / "link.jsonl")}[how]
    if how == "symlink":
        os.symlink(src, output)
    (tmp_path / "sub").mkdir()
    code, _, err = cli(capsys, "grade", "--kind", "math", "--input", str(src), "--output", output)
    one_line_error(code, err, "is the input file")
    assert src.read_text() == content


def test_grade_empty_input_is_an_error_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    code, _, err = cli(capsys, "grade", "--kind", "math", "--input", str(src), "--output", str(tmp_path / "out.jsonl"))
    one_line_error(code, err, "holds no rows")
    assert not (tmp_path / "out.jsonl").exists()


def test_grade_code_on_math_rows_says_use_kind_math(tmp_path, capsys):
    src = tmp_path / "math.jsonl"
    src.write_text("".join(json.dumps({"id": i, "completion": "\\boxed{1}", "answer": "1"}) + "\n" for i in range(3)))
    code, out, err = cli(
        capsys, "grade", "--kind", "code", "--input", str(src), "--output", str(tmp_path / "v.jsonl"), "--no-progress"
    )
    one_line_error(code, err, "use --kind math")
    assert "every row is bad_input" in err and "graded 3 rows" in out


def test_export_never_deletes_what_it_did_not_make(tmp_path, capsys):
    run = make_run(tmp_path / "results")
    target = tmp_path / "exports" / "mine"
    target.mkdir(parents=True)
    (target / "keep.txt").write_text("precious")
    code, _, err = cli(capsys, "export", str(run), "--format", "jsonl", "--out", str(target))
    one_line_error(code, err, "--overwrite")
    assert (target / "keep.txt").read_text() == "precious"
    for parent in (run.parent, tmp_path, run):  # the run itself or a folder holding it: never, even with --overwrite
        code, _, err = cli(capsys, "export", str(run), "--format", "jsonl", "--out", str(parent), "--overwrite")
        one_line_error(code, err, "choose a directory outside")
        assert (run / "samples.jsonl").exists() and (run / "summary.json").exists()
    inside = run / "export"
    code, _, err = cli(capsys, "export", str(run), "--format", "jsonl", "--out", str(inside))
    one_line_error(code, err, "inside the run")
    code, out, err = cli(capsys, "export", str(run), "--format", "jsonl", "--out", str(target), "--overwrite")
    assert code == 0, err
    assert not (target / "keep.txt").exists() and len((target / "samples.jsonl").read_text().splitlines()) == 3
    assert [p.name for p in target.parent.iterdir()] == ["mine"]  # no temporary left beside it


def test_a_failed_export_leaves_the_old_directory_as_it_was(tmp_path, monkeypatch):
    import rlvr.harness.export as export

    run = make_run(tmp_path / "results")
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export.shutil, "copyfile", broken)
    with pytest.raises(OSError):
        export.export_run(run, "jsonl", target, overwrite=True)
    assert [p.name for p in tmp_path.iterdir() if p.name != "results"] == ["out"]
    assert (target / "old.txt").read_text() == "old"


# ---- 2. one line, exit 2 --------------------------------------------------------------------------
def test_eval_out_a_file_or_under_a_file(tmp_path, capsys):
    file = tmp_path / "f"
    file.write_text("x")
    for out, needle in ((file, "is a file, not a directory"), (file / "run", "is a file, so nothing")):
        code, _, err = cli(capsys, "eval", "--benchmarks", "arith", "--limit", "1", "--out", str(out))
        one_line_error(code, err, needle)
    assert file.read_text() == "x"


def test_eval_refuses_a_directory_holding_other_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, "eval", "--benchmarks", "arith", "--limit", "1", "--out", str(tmp_path))
    one_line_error(code, err, "holds other files")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_leaderboard_and_contamination_out_a_file(tmp_path, capsys):
    results = tmp_path / "results"
    make_run(results)
    file = tmp_path / "f"
    file.write_text("x")
    code, _, err = cli(capsys, "leaderboard", "--results", str(results), "--out", str(file), "--no-plots")
    one_line_error(code, err, "is a file, not a directory")
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    code, _, err = cli(capsys, "contamination", "--train", str(train), "--benchmarks", "arith", "--out", str(file))
    one_line_error(code, err, "is a file, not a directory")
    assert file.read_text() == "x"


def test_leaderboard_never_replaces_a_readme_it_did_not_write(tmp_path, capsys):
    results = tmp_path / "results"
    make_run(results)
    site = tmp_path / "site"
    site.mkdir()
    (site / "README.md").write_text("# my project\n")
    code, _, err = cli(capsys, "leaderboard", "--results", str(results), "--out", str(site), "--no-plots")
    one_line_error(code, err, "did not write")
    assert (site / "README.md").read_text() == "# my project\n"
    (site / "README.md").unlink()
    assert cli(capsys, "leaderboard", "--results", str(results), "--out", str(site), "--no-plots")[0] == 0
    assert cli(capsys, "leaderboard", "--results", str(results), "--out", str(site), "--no-plots")[0] == 0  # rebuilds


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--backend", "vllm", "--kv-cache-gb", "-1"], "--kv-cache-gb must be a positive number"),
        (["--gpu-memory-utilization", "2"], "a number in (0, 1]"),
        (["--gpu-memory-utilization", "0"], "a number in (0, 1]"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
    ],
)
def test_engine_options_are_checked_before_anything_starts(tmp_path, capsys, flags, needle):
    out = tmp_path / "run"
    code, _, err = cli(capsys, "eval", "--benchmarks", "arith", *flags, "--out", str(out))
    one_line_error(code, err, needle)
    assert not out.exists()  # no config.yaml left behind


def test_a_model_that_is_not_here_fails_fast_offline(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    out = tmp_path / "run"
    started = time.monotonic()
    code, _, err = cli(capsys, "eval", "--model", "myorg/ckpt", "--benchmarks", "arith", "--out", str(out))
    one_line_error(code, err, "./path")
    assert time.monotonic() - started < 10 and not out.exists()


def test_file_system_errors_are_one_line(capsys, monkeypatch):
    def denied(args):
        raise PermissionError(13, "Permission denied", "/somewhere/out")

    parser = build_parser()
    parser._subparsers._group_actions[0].choices["benchmarks"].set_defaults(func=denied)
    monkeypatch.setattr("rlvr.cli.main.build_parser", lambda argv=None: parser)
    code, _, err = cli(capsys, "benchmarks")
    one_line_error(code, err, "/somewhere/out: Permission denied")


def test_contamination_names_the_fields_when_no_question_is_found(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"prob": "What is 1 + 1?", "sol": "2"}) + "\n")
    code, _, err = cli(capsys, "contamination", "--train", str(train), "--benchmarks", "arith", "--out", str(tmp_path))
    one_line_error(code, err, "prob, sol")
    assert "--fields question=" in err and not (tmp_path / "report.json").exists()
    code, _, err = cli(capsys, "contamination", "--train", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path))
    one_line_error(code, err, "training file")


# ---- 3. progress while it happens, and every finished sample kept ----------------------------------
class FakeEngine:
    """A backend that reports samples one by one (like hf, vllm and openai do), optionally waiting
    for a condition between samples or stopping with an exception after some."""

    name = "fake"

    def __init__(self, wait_for=None, stop_after: int | None = None, error: BaseException | None = None):
        self.wait_for, self.stop_after, self.error, self.reported = wait_for, stop_after, error, 0

    def generate(self, requests, params, on_sample=None, on_tokens=None):
        from rlvr.harness.backends.base import Generation

        out = []
        for i, request in enumerate(requests):
            if self.stop_after is not None and self.reported >= self.stop_after:
                raise self.error
            on_tokens(3)
            generation = Generation(request.prompt, "so \\boxed{2}", "stop", 3, 5)
            out.append(generation)
            on_sample(i, generation)
            self.reported += 1
            if self.wait_for is not None:
                self.wait_for(self.reported)
        return out

    def close(self):
        pass


def fake_eval(tmp_path, tiny_model, engine, **settings):
    from rlvr.harness.evaluate import run_eval

    cfg = EvalConfig(
        model=tiny_model, benchmarks=["arith"], limit=4, max_tokens=8, out=str(tmp_path / "run"), progress=False
    )
    for key, value in settings.items():
        setattr(cfg, key, value)
    return run_eval(cfg, engine)


def test_each_sample_is_written_as_soon_as_it_is_graded(tmp_path, tiny_model):
    path = tmp_path / "run" / "samples.jsonl"

    def written(count):  # the next sample is generated only once this one is on disk
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.exists() and len(path.read_text().splitlines()) >= count:
                return
            time.sleep(0.02)
        raise AssertionError(f"sample {count} was not written while the batch was still generating")

    summary = fake_eval(tmp_path, tiny_model, FakeEngine(wait_for=written), batch_size=16)
    assert summary["benchmarks"]["arith"]["n_samples"] == 4
    assert not (tmp_path / "run" / "partial.json").exists()


def test_ctrl_c_keeps_every_finished_sample_and_marks_the_run_partial(tmp_path, tiny_model, capsys):
    with pytest.raises(KeyboardInterrupt) as caught:
        fake_eval(tmp_path, tiny_model, FakeEngine(stop_after=2, error=KeyboardInterrupt()))
    run = tmp_path / "run"
    assert len((run / "samples.jsonl").read_text().splitlines()) == 2
    partial = json.loads((run / "partial.json").read_text())
    assert partial["samples"] == 2 and partial["reason"] == "interrupted"
    assert caught.value.rlvr_kept.startswith(f"2 samples kept in {run}")
    capsys.readouterr()
    summary = fake_eval(tmp_path, tiny_model, FakeEngine())  # the same command resumes and finishes
    assert summary["timings"]["samples_resumed"] == 2 and summary["timings"]["samples_generated"] == 2
    assert f"resuming {run}: 2 finished samples reused, 2 to generate" in capsys.readouterr().err
    assert not (run / "partial.json").exists()


def test_ctrl_c_before_the_first_sample_says_nothing_was_kept(tmp_path, tiny_model):
    with pytest.raises(KeyboardInterrupt) as caught:
        fake_eval(tmp_path, tiny_model, FakeEngine(stop_after=0, error=KeyboardInterrupt()))
    run = tmp_path / "run"
    assert not run.exists()
    assert caught.value.rlvr_kept == f"nothing finished; nothing kept ({run} removed)"


@pytest.mark.parametrize("kept", [None, "nothing finished; nothing kept"])
def test_the_interrupt_line_says_only_what_the_command_knows_it_kept(capsys, kept):
    import argparse

    from rlvr.harness.errors import note_kept

    from rlvr.cli.main import _run

    def interrupted(args):
        exc = KeyboardInterrupt()
        if kept:
            note_kept(exc, kept)
        raise exc

    assert _run(argparse.Namespace(command="eval", func=interrupted)) == 130
    err = capsys.readouterr().err.strip()
    assert err == ("rlvr eval: interrupted" + (f"; {kept}" if kept else ""))  # never a claim nobody checked


def test_a_run_that_fails_before_its_first_sample_leaves_nothing(tmp_path, tiny_model):
    with pytest.raises(RuntimeError, match="engine died"):
        fake_eval(tmp_path, tiny_model, FakeEngine(stop_after=0, error=RuntimeError("engine died")))
    assert not (tmp_path / "run").exists()


def test_no_progress_still_prints_a_line_per_benchmark(tmp_path, tiny_model, capsys):
    fake_eval(tmp_path, tiny_model, FakeEngine())
    err = capsys.readouterr().err
    assert "arith: 4 samples generated and graded, 0 correct (0.000), 12 tokens" in err


def test_progress_shows_tokens_per_second_and_an_eta_before_any_sample_finishes():
    from rlvr.harness.progress import LOG_FIRST_S, EvalProgress

    now = [0.0]
    stream = io.StringIO()
    meter = EvalProgress({"gsm8k": 4, "math500": 2}, max_tokens=100, stream=stream, clock=lambda: now[0], ticker=False)
    now[0] = LOG_FIRST_S + 1
    meter.tokens(120)  # a batch of 4 writing: 120 tokens in 6 s, no sample finished yet
    line = stream.getvalue()
    assert "eval 0/6 samples" in line and "20 tok/s" in line and "ETA 24s" in line  # (600 - 120) / 20
    for _ in range(4):
        meter.graded("gsm8k", True, 30)
    assert "gsm8k: 4 samples generated and graded, 4 correct" in stream.getvalue()
    quiet = EvalProgress({"gsm8k": 1}, 10, live=False, stream=io.StringIO(), clock=lambda: now[0], ticker=False)
    now[0] += 100
    quiet.tokens(5)
    quiet.graded("gsm8k", False, 5)
    assert quiet.stream.getvalue().splitlines() == [
        "gsm8k: 1 samples generated and graded, 0 correct (0.000), 5 tokens, 1m40s since the start"
    ]


def test_progress_moves_before_the_first_token():
    from rlvr.harness.progress import EvalProgress

    stream = io.StringIO()
    meter = EvalProgress({"gsm8k": 2}, max_tokens=100, stream=stream)
    meter._next_log = 0.5  # the first log line comes after LOG_FIRST_S; sooner here
    time.sleep(2.0)
    meter.close()
    assert "eval 0/2 samples" in stream.getvalue() and "waiting for the first tokens" in stream.getvalue()


def test_hf_backend_reports_each_sample_as_it_finishes(tiny_model):
    from rlvr.harness.backends.base import GenerationRequest, SamplingParams
    from rlvr.harness.backends.hf import HFBackend

    backend = HFBackend(tiny_model, "float32", "cpu", batch_size=4)
    requests = [GenerationRequest(f"What is {i} + 1?", 100 + i) for i in range(6)]
    params = SamplingParams(temperature=1.0, max_tokens=12)
    seen, tokens = {}, []
    streamed = backend.generate(requests, params, on_sample=seen.__setitem__, on_tokens=tokens.append)
    plain = backend.generate(requests, params)
    assert sorted(seen) == list(range(6)) and [seen[i] for i in range(6)] == streamed
    assert [vars(g) for g in streamed] == [vars(g) for g in plain]
    assert sum(tokens) == sum(g.n_tokens for g in streamed)


# ---- 4. warnings and exact flags ----------------------------------------------------------------
def _parsers(parser):
    yield parser
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_parser_takes_exact_flag_names_only():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 12 and all(p.allow_abbrev is False for p in parsers)


def test_a_command_that_never_trains_builds_its_parser_without_torch():
    """Each ``rlvr`` call parses its own argv: the trainers' flags (whose help reads the torch-backed
    rule tables) are built for ``train`` only, so ``rlvr eval --help`` does not pay torch's import."""
    import subprocess
    import sys

    def algorithms(parser) -> list[str]:
        train = parser._subparsers._group_actions[0].choices["train"]
        return sorted(train._subparsers._group_actions[0].choices)

    # the real entry point (``main`` parsing sys.argv), as a user's shell runs it
    fresh = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rlvr.cli", "eval", "--help"], capture_output=True, text=True
    )
    assert fresh.returncode == 0 and "--benchmarks" in fresh.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in fresh.stderr.splitlines() if line.startswith("import time")}
    assert "rlvr.harness.eval_config" in imported and "torch" not in imported
    assert algorithms(build_parser(["train", "drgrpo", "--help"])) == sorted(
        ["grpo", "drgrpo", "dapo", "srpo", "randopt", "corp"]
    )


@pytest.mark.parametrize(
    "argv, needle, prog",
    [
        (["eval", "--benchmark", "arith"], "did you mean --benchmarks?", "rlvr eval"),
        (["eval", "--benchmarks", "arith", "--temprature", "0.5"], "did you mean --temperature?", "rlvr eval"),
        (["ablate", "templates", "--limt", "3"], "did you mean --limit?", "rlvr ablate templates"),
        (["train", "drgrpo", "--max-step", "3"], "did you mean --max-steps?", "rlvr train drgrpo"),
        (["grade", "--kind", "math", "--inpt", "x"], "did you mean --input?", "rlvr grade"),
        (["evl"], "unknown command 'evl'; did you mean eval?", "rlvr"),
        (["eval", "--n", "two"], "invalid int value: 'two'", "rlvr eval"),
    ],
)
def test_unknown_flags_get_one_line_from_the_subcommand_with_a_suggestion(capsys, argv, needle, prog):
    """The suggestion is the whole answer: one line, not under the usage block."""
    code, _, err = cli(capsys, *argv)
    assert code == 2 and err.startswith(f"{prog}: error: ") and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "--help" in err and "usage:" not in err


def test_warnings_where_they_are_due():
    assert any("identical samples" in w for w in EvalConfig(benchmarks=["arith"], n=2).warnings())
    assert not EvalConfig(benchmarks=["arith"], n=2, temperature=0.6).warnings()
    on_hf = EvalConfig(benchmarks=["arith"], gpu_memory_utilization=0.5).warnings()
    assert any("ignored on --backend hf" in w for w in on_hf)
    on_cpu = EvalConfig(benchmarks=["arith"], backend="vllm", gpu_memory_utilization=0.5).warnings("cpu")
    assert any("ignored on the CPU" in w for w in on_cpu)
    on_gpu = EvalConfig(benchmarks=["arith"], backend="vllm", kv_cache_gb=4).warnings("cuda")
    assert any("ignored on a GPU" in w for w in on_gpu)
    for bad in ({"kv_cache_gb": -1}, {"gpu_memory_utilization": 1.5}, {"shots": -1}, {"workers": 0}):
        with pytest.raises(UserError):
            EvalConfig(benchmarks=["arith"], **bad)


def test_partial_runs_are_labelled_in_every_leaderboard_table(tmp_path, capsys):
    results = tmp_path / "results"
    make_run(results, "part", limit=3)
    site = tmp_path / "site"
    assert cli(capsys, "leaderboard", "--results", str(results), "--out", str(site), "--no-plots")[0] == 0
    for name in ("README.md", "index.html", "leaderboard.csv"):
        assert "arith (3/110)" in (site / name).read_text(), name
    make_run(results, "part-b", limit=3)
    code, out, _ = cli(capsys, "compare", str(results / "part"), str(results / "part-b"))
    assert code == 0 and "arith (3/110)" in out
    code, _, err = cli(capsys, "export", str(results / "part"), "--format", "jsonl", "--out", str(tmp_path / "e"))
    assert code == 0, err
    assert "arith (3/110)" in (tmp_path / "e" / "README.md").read_text()
    from rlvr.harness.ablations import format_template_table
    from rlvr.harness.summary import format_table

    table = {"benchmarks": ["arith"], "labels": {"arith": "arith (3/110)"}, "rows": []}
    assert "arith (3/110)" in format_template_table(table)

    summary = json.loads((results / "part" / "summary.json").read_text())
    assert "arith (3/110)" in format_table(
        {"benchmarks": {"arith": {**summary["benchmarks"]["arith"], "n_problems_total": 110}}}
    )


# ---- 5. rlvr show and the sample pages ---------------------------------------------------------
def test_show_filters_and_prints_what_a_reader_needs(tmp_path, capsys):
    run = make_run(tmp_path)
    code, out, err = cli(capsys, "show", str(run), "--wrong")
    assert code == 0, err
    assert "3 samples (arith 3), 1 correct" in out and "showing 2 of 2 matching" in out
    assert "arith/add1-9+7" in out and "completion:" in out and "extracted: 15    gold: 16" in out
    assert "arith/add1-5+1" not in out
    # gold not in the record (an older run): found through config.yaml
    assert "gold: 3" in out
    code, out, _ = cli(capsys, "show", str(run), "--reason", "no_answer", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == ["arith/sub1-8-5"] and rows[0]["gold"] == "3"
    code, out, _ = cli(capsys, "show", str(run), "--grep", "SUM IS", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["arith/add1-5+1"]
    code, out, _ = cli(capsys, "show", str(run), "--id", "arith/add1-9*,arith/sub1-8-5", "--correct", "--json")
    assert out == ""
    code, out, _ = cli(capsys, "show", str(run), "--limit", "1")
    assert "showing 1 of 3 matching samples (--limit 0 shows all 3)" in out
    one_line_error(*cli(capsys, "show", str(run), "--benchmark", "gsm8k")[::2], "it has arith")
    one_line_error(*cli(capsys, "show", str(run), "--reason", "wrong")[::2], "no such reason")
    bare = make_run(tmp_path / "b", with_samples=False)
    one_line_error(*cli(capsys, "show", str(bare))[::2], "only its summary.json was kept")


def test_show_marks_a_partial_run(tmp_path, capsys):
    run = make_run(tmp_path)
    (run / "summary.json").unlink()
    (run / "partial.json").write_text(json.dumps({"reason": "interrupted", "samples": 3}))
    out = cli(capsys, "show", str(run))[1]
    assert "no summary.json yet" in out and "partial run: interrupted after 3 samples" in out


def test_leaderboard_cells_link_to_their_samples(tmp_path, capsys):
    results = tmp_path / "results"
    make_run(results, "with-samples")
    make_run(results, "summary-only", limit=4, with_samples=False)
    site = tmp_path / "site"
    assert cli(capsys, "leaderboard", "--results", str(results), "--out", str(site), "--no-plots")[0] == 0
    page = (site / "index.html").read_text()
    assert page.count('href="samples/with-samples.html#bench-arith"') == 1
    assert "summary-only.html" not in page
    samples_page = (site / "samples" / "with-samples.html").read_text()
    assert 'id="bench-arith"' in samples_page and samples_page.count('class="sample"') == 3
    assert "so \\boxed{15}" in samples_page and "../index.html" in samples_page


# ---- 6. help and code agree ---------------------------------------------------------------------
def test_help_texts_show_what_a_terminal_should(capsys):
    texts = {}
    for parser in _parsers(build_parser()):
        texts[parser.prog] = " ".join(parser.format_help().split())  # as read, not as wrapped
    rst = re.compile(r"(?<!`)``(?!`)")  # RST's literal quotes (a ``` code fence is fine)
    wrong = [k for k, t in texts.items() if "%%" in t or rst.search(t)]
    assert not wrong, wrong
    assert "95% CI" in texts["rlvr compare"]
    assert "vllm where it is installed, else hf" in texts["rlvr ablate templates"]
    assert "vllm where it is installed, else hf" in texts["rlvr ablate prior"]
    top = build_parser().format_help()
    demo_line = next(line for line in top.splitlines() if line.strip().startswith("rlvr demo"))
    assert "eval" in demo_line and "RL" in demo_line  # the demo does four jobs, not only grading


def test_verl_settings_are_spelled_one_way():

    from doc_pages import doc_text
    from rlvr.harness.commands.serve import EPILOG

    readme = doc_text()
    assert "reward.sandbox_fusion.url=http://HOST:8000/run_code" in EPILOG
    assert "reward.sandbox_fusion.url=http://HOST:8000/run_code" in readme
    assert "sandbox_fusion_url" not in readme + EPILOG and "`sandbox_fusion.url" not in readme
    assert "reward.custom_reward_function.path" in readme


def test_math_grader_is_a_context_manager():
    from rlvr.sandbox.math.verify import MathGrader

    with MathGrader(workers=1, timeout=2.0, shards=1) as grader:
        assert grader.verify("so \\boxed{4}", "4").correct
        assert [v.reason for v in grader.verify_batch([{"completion": "\\boxed{7}", "answer": "8"}])] == [
            "wrong_answer"
        ]
    assert grader._pool is None
    assert MathGrader.verify.__doc__ and MathGrader.verify_batch.__doc__


def test_run_code_failures_have_a_message_a_person_can_read():
    from rlvr.sandbox.serving.protocols import sandbox_fusion_response

    run = {"status": "re", "exit_code": 3, "signal": None, "stdout": "", "stderr": ""}
    assert sandbox_fusion_response({"run": run, "reason": "runtime_error", "detail": ""})["message"] == (
        "the program exited with code 3"
    )
    crash = {**run, "exit_code": 1, "stderr": "Traceback ...\nZeroDivisionError: division by zero\n"}
    assert sandbox_fusion_response({"run": crash, "reason": "runtime_error"})["message"].endswith(
        "ZeroDivisionError: division by zero"
    )
    killed = {**run, "exit_code": None, "signal": 9}
    assert "killed by signal 9" in sandbox_fusion_response({"run": killed, "reason": "runtime_error"})["message"]
    tle = sandbox_fusion_response({"run": {"status": "tle"}, "reason": "time_limit", "detail": ""})
    assert tle["message"] == "time limit exceeded"


def test_vllm_setting_errors_become_one_line(monkeypatch):
    """A setting vLLM itself refuses (pydantic's many lines) is one line, exit 2."""
    import rlvr.harness.backends.vllm_engine as engine

    class Refusing:
        @staticmethod
        def LLM(**kwargs):
            raise ValueError(
                "1 validation error for ModelConfig\n  Value error, max_model_len (100000) is greater than the "
                "model's 2048 [type=value_error]\n    For further information visit https://errors.pydantic.dev"
            )

    monkeypatch.setattr(engine, "require_vllm", lambda device="auto": (Refusing, "cpu"))
    with pytest.raises(UserError) as caught:
        engine.start_engine("/models/x", device="cpu", in_process=False)
    message = str(caught.value)
    assert "\n" not in message and "max_model_len (100000) is greater" in message and "pydantic.dev" not in message


@pytest.mark.slow
def test_ctrl_c_on_the_command_line_keeps_samples_and_says_so(tmp_path):
    """The real command, interrupted as a user would: exit 130, every written sample kept, the run
    marked partial, and one line saying how to resume. The model is random and its end token
    unlikely, so samples run to the token budget and the run cannot end before the signal."""
    import signal
    import subprocess
    import sys

    import torch
    from conftest import ROOT
    from rlvr.harness.models import tiny_random_model
    from transformers import LlamaForCausalLM

    path = tiny_random_model(tmp_path / "rambling-llama", favoured="")
    model = LlamaForCausalLM.from_pretrained(path)
    with torch.no_grad():
        model.lm_head.weight[model.generation_config.eos_token_id, 0] = -4.0  # never ends early
    model.save_pretrained(path, safe_serialization=True)
    tiny_model = str(path)

    out = tmp_path / "run"
    # far more work than the test waits for (a loaded machine must not let the run finish first)
    args = ["eval", "--model", tiny_model, "--benchmarks", "arith", "--n", "64", "--temperature", "1.0"]
    args += ["--max-tokens", "128", "--batch-size", "1", "--no-progress", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # an ignored SIGINT is inherited across exec, and an earlier test in this process may have
        # ignored it (a user's shell would not): the run must get the terminal's default disposition
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    path = out / "samples.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    kept = path.read_text().count("\n")
    assert kept >= 2 and json.loads((out / "partial.json").read_text())["samples"] == kept
    assert f"rlvr eval: interrupted; {kept} samples kept in {out}" in err and "run the same command to resume" in err
    assert "Traceback" not in err
