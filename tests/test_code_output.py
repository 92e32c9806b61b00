"""What the supervisor keeps of a program's output (``rlvr.sandbox.code.running.output``): stdout of a graded
stdin test is kept in the form LiveCodeBench's ``grade_stdio`` reads, built on the stream, so
whitespace the comparison ignores costs nothing against the cap and the verdict is the one the
whole output would get."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.sandbox.code.judging.compare import stdout_matches
from rlvr.sandbox.code.running.output import (
    SANDBOX_RUN,
    Capped,
    StrippedLines,
    Tail,
    graded_cap,
    judged_expected,
    judged_stdout,
    longest_run,
    sandbox_cap,
)


def lcb_form(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def stream(sink, data: bytes, seed: int) -> bool:
    rng = random.Random(seed)
    pos = 0
    while pos < len(data):
        size = rng.choice([1, 2, 3, 7, 64, 4096])
        if not sink.add(data[pos : pos + size]):
            return False
        pos += size
    return True


PIECES = st.sampled_from(
    ["5", "x", "1.0", "  ", "\t", "\r", "\n", "\n\n", " \n ", "\x0c", "ab c", "\u00a0", "é", "\x1c"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30), st.integers(0, 1000))
def test_stripped_lines_is_grade_stdio_form(pieces, seed):
    text = "".join(pieces)
    sink = StrippedLines(1 << 20)
    assert stream(sink, text.encode(), seed)
    assert lcb_form(sink.value().decode()) == lcb_form(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30), st.lists(PIECES, max_size=12), st.integers(0, 1000))
def test_shortened_runs_give_the_same_verdict(pieces, wanted, seed):
    got, want = "".join(pieces), "".join(wanted)
    sink = StrippedLines(1 << 20, longest_run(want.strip()))
    assert stream(sink, got.encode(), seed)
    assert stdout_matches(sink.value().decode(), want)[0] == stdout_matches(got, want)[0]


def test_ignored_whitespace_costs_nothing_against_the_cap():
    cap = 1000
    for flood in (b"5" + b" " * 10**6, b"\n" * 10**6 + b"5", b" \n\t\r\n" * 10**5 + b"5" + b"\r\n " * 10**5):
        sink = StrippedLines(cap, 0)
        assert stream(sink, flood, 1) and sink.value() == b"5"
    inside = StrippedLines(cap, 1)
    assert stream(inside, b"5" + b" " * 10**6 + b"6", 2) and inside.value() == b"5  6"
    assert stdout_matches("5  6", "5 6")[0]
    assert not StrippedLines(cap).add(b"7" * (cap + 1))
    blank_inside = StrippedLines(cap, 0)
    assert not stream(blank_inside, b"1" + b"\n" * (cap + 1) + b"2", 3)  # counted: the line count matters


def test_tail_and_capped():
    tail = Tail(10)
    assert all(tail.add(b"x" * 1000) for _ in range(100)) and tail.add(b"0123456789") and tail.value() == b"0123456789"
    capped = Capped(5)
    assert capped.add(b"abc") and not capped.add(b"def") and capped.value() == b"abcde"


#: Pieces of output, each repeated: enough to pass a small room (64 KiB + 4x the expected
#: output) and whitespace runs on both sides of an expected output's own longest run.
BULK = st.tuples(st.sampled_from(["7", "ab", " ", "\t", "  \t ", "\n", "x y", " \n"]), st.integers(1, 30_000))


@settings(max_examples=150, deadline=None)
@given(st.lists(BULK, max_size=6), st.lists(PIECES, max_size=12), st.sampled_from([64, 100]), st.integers(0, 99))
def test_the_judge_side_rules_equal_the_expected_outputs_own_sink(bulk, wanted, output_kb, seed):
    """Round 3: the sandbox keeps stdout under the submission's limits only (no expected output
    in its memory); the judge's ``judged_stdout`` then gives what a sink built from the expected
    output's own run and room kept, and the same over-the-room verdict."""
    got = "".join(text * times for text, times in bulk).encode()
    want = "".join(wanted)
    old = StrippedLines(graded_cap(want, output_kb, 64), longest_run(want.strip()))
    old_fits = stream(old, got, seed)
    sandbox = StrippedLines(sandbox_cap(output_kb, 64), SANDBOX_RUN)
    assert stream(sandbox, got, seed)
    kept, over = judged_stdout(sandbox.value(), want, output_kb, 64)
    assert over == (not old_fits)
    if not over:  # over the room the verdict is output_limit, whatever part of it either kept
        assert kept == old.value()


def test_an_expected_run_longer_than_the_sandbox_keeps_still_matches():
    want = "a" + " " * (SANDBOX_RUN + 5) + "b"
    sandbox = StrippedLines(sandbox_cap(1024, 64), SANDBOX_RUN)
    assert sandbox.add(want.encode())
    kept, over = judged_stdout(sandbox.value(), want, 1024, 64)
    assert not over and stdout_matches(kept.decode(), judged_expected(want))[0]
    assert judged_expected("a  b") == "a  b"


FLOOD_PIECES = st.sampled_from(
    ["5", "x y", "  ", "\t", "\n", " \n ", "\n" * 70, " \n" * 70, "\n \t\n" * 40, "\r\n" * 65]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(FLOOD_PIECES, max_size=20), st.integers(0, 1000))
def test_runs_of_blank_lines_counted_in_bulk_keep_the_grade_stdio_form(pieces, seed):
    """Chunks with more line breaks than visible bytes take the bulk path (runs of 64 breaks or
    more with nothing visible between them are counted, not visited): the kept form is still
    ``grade_stdio``'s, however the stream is cut."""
    text = "".join(pieces)
    sink = StrippedLines(1 << 20, SANDBOX_RUN)
    assert stream(sink, text.encode(), seed)
    assert lcb_form(sink.value().decode()) == lcb_form(text)


def test_a_flood_of_blank_lines_is_counted_not_visited_line_by_line(monkeypatch):
    """LiveCodeBench's ``blank_line_flood`` class: an answer, then 3 MiB of line breaks (or of
    whitespace-only lines). It passes, as in its runner, and the sink takes a handful of steps
    for it, not one per line (it took ~100 ms of the supervisor's CPU per test when it did)."""
    calls = []
    original = StrippedLines._line_break
    monkeypatch.setattr(StrippedLines, "_line_break", lambda self, n: (calls.append(n), original(self, n))[1])
    for flood in (b"\n" * (3 << 20), b" \n" * (3 << 19)):
        calls.clear()
        sink = StrippedLines(sandbox_cap(64, 64), SANDBOX_RUN)
        data = b"42\n" + flood + b"\n7\n"
        for start in range(0, len(data), 1 << 20):
            assert sink.add(data[start : start + (1 << 20)])
        assert lcb_form(sink.value().decode()) == lcb_form(data.decode())
        assert sum(calls) == data.count(b"\n") and len(calls) < 20, len(calls)
