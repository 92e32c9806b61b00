"""Prepared tests on their way to the judges: EvalPlus tests cached whole (the caller does not
rebuild 100,000 rows each run), read by a judge from the blob store instead of crossing the
pipe, and items sent to the judges as they are prepared, not after the last one."""

import hashlib
import json
import threading
import time

import pytest
from rlvr.sandbox.code.judging import blobs, known_tests, reference
from rlvr.sandbox.code.judging.reference import (
    differential_tests,
    evalplus_tests,
    evalplus_total_s,
    expected_outputs,
)
from rlvr.sandbox.code.rules.testcases import BadTests, prepare_tests
from rlvr.sandbox.code.verify import CodeGrader
from rlvr.sandbox.service import GradingService, parse_item

REFERENCE = "def f(n):\n    return 'x' * n\n"
INPUTS = [[200_000], [3], [0]]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path))
    known_tests.TESTS_CACHE.clear()
    yield tmp_path
    known_tests.TESTS_CACHE.clear()


class NoReference:
    """A grader that must not be asked to run the reference."""

    def run_collect(self, *args, **kwargs):
        raise AssertionError("the reference ran again")


def test_evalplus_tests_are_cached_whole_and_equal_to_the_rebuilt_ones(cache):
    with CodeGrader(workers=1) as grader:
        first, total_s = evalplus_tests(REFERENCE, INPUTS, "f", ["base", "plus", "plus"], None, grader)
        inputs, expected = expected_outputs(REFERENCE, INPUTS, "f", grader)
    rebuilt = differential_tests(inputs, expected, ["base", "plus", "plus"])
    assert first.text == prepare_tests(rebuilt, "f").text  # what the row-by-row path makes
    assert total_s == evalplus_total_s(rebuilt)
    assert any(t.get("expected_digest") for t in first.tests)  # the 200,000-character value
    again, again_total = evalplus_tests(REFERENCE, INPUTS, "f", ["base", "plus", "plus"], None, NoReference())
    assert (again.text, again.digest, again.blob, again.tests) == (first.text, first.digest, first.blob, first.tests)
    assert again_total == total_s
    assert blobs.load(first.blob).decode() == first.text
    assert hashlib.sha256(first.text.encode()).hexdigest() == first.digest
    # Another grouping or oracle is another entry, not this one.
    with pytest.raises(AssertionError, match="ran again"):
        evalplus_tests(REFERENCE, INPUTS[1:], "f", None, None, NoReference())


def test_a_corrupt_cached_text_is_rebuilt_and_stored_again(cache):
    with CodeGrader(workers=1) as grader:
        first, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
        path = blobs._path(first.blob)
        intact = path.read_bytes()
        path.write_bytes(intact[:-1] + b"X")
        again, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
    assert again.text == first.text and again.blob == first.blob
    assert path.read_bytes() == intact  # the corrupt file was removed, the rebuilt text stored
    third, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, NoReference())
    assert third.text == first.text


def test_the_cache_key_holds_the_test_format(cache, monkeypatch):
    with CodeGrader(workers=1) as grader:
        evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
    entries = reference.cache_dir() / "tests"
    assert len(list(entries.glob("*.json"))) == 1
    evalplus_tests(REFERENCE, INPUTS, "f", None, None, NoReference())
    assert len(list(entries.glob("*.json"))) == 1  # found
    monkeypatch.setattr(reference, "TESTS_FORMAT", reference.TESTS_FORMAT + 1)
    evalplus_tests(REFERENCE, INPUTS, "f", None, None, NoReference())  # outputs cached, tests rebuilt
    assert len(list(entries.glob("*.json"))) == 2


def test_rows_that_cannot_be_prepared_come_back_plain_and_uncached(cache, monkeypatch):
    def refuse(tests, fn_name=None):
        raise BadTests("test 0: no")

    monkeypatch.setattr(reference, "prepare_tests", refuse)
    with CodeGrader(workers=1) as grader:
        tests, total_s = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
    assert isinstance(tests, list) and len(tests) == len(INPUTS) and total_s > 0
    assert not list((reference.cache_dir() / "tests").glob("*.json"))


def test_a_cached_text_whose_value_blob_is_gone_is_rebuilt(cache):
    with CodeGrader(workers=1) as grader:
        first, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
        big = next(t["expected_digest"] for t in first.tests if t.get("expected_digest"))
        blobs._path(big).unlink()
        again, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
    assert again.text == first.text
    assert blobs.exists(big)


def _request(text: str, **extra) -> dict:
    return {"tests_ref": hashlib.sha256(text.encode()).hexdigest(), **extra}


def test_a_judge_reads_stored_tests_from_the_blob_store(cache):
    text = json.dumps([{"kind": "stdin", "input": "1\n", "output": "1\n"}])
    name = blobs.store(text.encode())
    assert known_tests.tests_of(_request(text)) is None  # unknown, nothing to read: ask
    assert known_tests.tests_of(_request(text, tests_blob=name)) == json.loads(text)
    assert known_tests.tests_of(_request(text)) == json.loads(text)  # known from now on


def test_a_judge_asks_for_tests_whose_blob_is_missing_corrupt_or_other(cache):
    text = json.dumps([{"kind": "stdin", "input": "2\n", "output": "2\n"}])
    other = blobs.store(b"[]")
    assert known_tests.tests_of(_request(text, tests_blob=other)) is None  # not these tests
    name = blobs.store(text.encode())
    blobs._path(name).write_bytes(text.encode()[:-1] + b" ")
    assert known_tests.tests_of(_request(text, tests_blob=name)) is None  # corrupt: removed
    assert not blobs.exists(name)
    assert known_tests.tests_of(_request(text, tests_blob=name)) is None  # gone
    assert known_tests.tests_of(_request(text, tests_text=text)) == json.loads(text)
    with pytest.raises(ValueError):
        known_tests.tests_of(_request(text, tests_text=text + " "))


def test_stored_tests_never_cross_the_pipe(cache):
    with CodeGrader(workers=1) as grader:
        prepared, _ = evalplus_tests(REFERENCE, INPUTS, "f", None, None, grader)
        sent = []
        call = grader.pool.call
        grader.pool.call = lambda request, timeout: sent.append(sorted(request)) or call(request, timeout)
        program = "```python\ndef f(n):\n    return 'x' * n\n```"
        verdicts = grader.verify_batch([{"completion": program, "tests": prepared, "fn_name": "f"}] * 2)
    assert [v.reason for v in verdicts] == ["ok", "ok"]
    assert len(sent) == 2 and not any("tests_text" in keys for keys in sent)


def _fake_run(dispatched: threading.Event):
    def run(request):
        dispatched.set()
        return {"reason": "ok", "passed": request["n_tests"], "_elapsed_ms": 1.0}

    return run


def test_items_reach_a_judge_before_the_last_one_is_prepared():
    dispatched = threading.Event()
    seen = []

    def items():
        for n in range(3):
            if n == 2:
                seen.append(dispatched.wait(10))  # the first items are with a judge already
            yield {"completion": "print(input())", "tests": [{"input": "1\n", "output": "1\n"}], "language": "python"}

    grader = CodeGrader(workers=2)
    grader._run = _fake_run(dispatched)
    verdicts = grader.verify_batch(items())
    assert seen == [True]
    assert [v.reason for v in verdicts] == ["ok"] * 3


def test_the_service_streams_code_items_and_keeps_the_order_of_mixed_batches():
    dispatched = threading.Event()
    seen = []
    raw = [
        {"kind": "code", "completion": "print(input())", "tests": [{"input": "1\n", "output": "1\n"}]},
        {"kind": "math", "completion": "\\boxed{7}", "answer": "7"},
        {"kind": "math", "completion": "\\boxed{7}", "answer": "8"},
        {"kind": "code", "completion": "no code here", "tests": [{"input": "1\n", "output": "1\n"}]},
    ]

    def items():
        for index, row in enumerate(raw):
            if index == 3:
                seen.append(dispatched.wait(10))
            yield parse_item(row, index)

    service = GradingService(workers=1)
    try:
        service.code._run = _fake_run(dispatched)
        verdicts = service.grade(items())
    finally:
        service.close()
    assert seen == [True]
    assert [v.reason for v in verdicts] == ["ok", "ok", "wrong_answer", "no_code"]


def test_an_error_while_reading_items_grades_nothing_more():
    """A failing item source (a reference that failed, an interrupt) stops the batch: the items
    already with a judge finish, the queued ones are dropped."""
    ran = []

    def run(request):
        ran.append(request)
        time.sleep(0.3)
        return {"reason": "ok", "passed": 1, "_elapsed_ms": 1.0}

    def items():
        for _ in range(6):
            yield {"completion": "print(input())", "tests": [{"input": "1\n", "output": "1\n"}]}
        raise RuntimeError("the reference failed")

    grader = CodeGrader(workers=2)
    grader._run = run
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="reference failed"):
        grader.verify_batch(items())
    assert len(ran) <= 2 and time.monotonic() - started < 1.0
