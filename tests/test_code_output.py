"""What the supervisor keeps of a program's output (``sandbox.code.output``): stdout of a graded
stdin test is kept in the form LiveCodeBench's ``grade_stdio`` reads, built on the stream, so
whitespace the comparison ignores costs nothing against the cap and the verdict is the one the
whole output would get."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.code.compare import stdout_matches
from sandbox.code.output import Capped, StrippedLines, Tail, longest_run


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
