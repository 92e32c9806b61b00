"""What the supervisor keeps of a child's output streams, in bounded memory.

A cap on output is a safety limit (a program must not make the supervisor buffer without
bound), never a rule of the benchmark: it must not fail a program for output the comparison
never reads. So each stream keeps only what its judge can use:

* ``Capped``: every byte, up to a cap (a raw run that reports what the program printed);
* ``Tail``: the last bytes only, never a failure (stderr, which no comparison reads, and
  stdout during functional calls, which LiveCodeBench and EvalPlus both ignore);
* ``StrippedLines``: stdout of a graded stdin test in the form LiveCodeBench's ``grade_stdio``
  reads it (the whole output stripped, then each line), built as the bytes arrive, so trailing
  spaces, blank lines and leading whitespace cost nothing against the cap; only what the
  comparison looks at does.

Nothing here may depend on the expected output: the supervisor that holds these sinks is the
process every test child is forked from, and a program can read its own memory (frames, the
garbage collector, ``/proc/self/mem``). So the sandbox keeps stdout under limits of the
submission alone (``SANDBOX_RUN``, ``sandbox_cap``), and the judge applies the rules that need
the expected output outside (``judged_stdout``): the longest whitespace run that still matters
and the room of four times the expected output.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol


class Sink(Protocol):
    def add(self, chunk: bytes) -> bool: ...

    def value(self) -> bytes: ...


#: ASCII bytes that ``str.strip()`` removes, less the line break (lines are split on it). The
#: judge strips the decoded text again, so keeping other (Unicode) whitespace is still exact.
WHITESPACE = b" \t\r\x0b\x0c\x1c\x1d\x1e\x1f"
_BLANK = WHITESPACE + b"\n"


#: Two line breaks or more with nothing visible between them (blank or whitespace-only lines). A
#: match extends over the whitespace after its last break and gives it back: each byte is scanned
#: a bounded number of times, whatever the program printed.
_BLANK_LINES = re.compile(b"\n[" + re.escape(_BLANK) + b"]*\n")
#: Runs of at least this many line breaks are counted in one step (shorter ones are visited as
#: lines are: they are what ordinary output has).
LONG_BLANK_RUN = 64

#: Bytes kept of a stream no comparison reads (stderr, stdout during calls, the compiler's):
#: the end of it, for the verdict's detail; the rest is drained and dropped.
KEPT_TAIL = 8000


class Capped:
    """Every byte up to ``cap``; ``add`` returns False once more arrived."""

    def __init__(self, cap: int, start: bytes = b""):
        self.cap, self.data = cap, bytearray(start)

    def add(self, chunk: bytes) -> bool:
        self.data += chunk
        if len(self.data) > self.cap:
            del self.data[self.cap :]
            return False
        return True

    def value(self) -> bytes:
        return bytes(self.data)


class Tail:
    """The last ``keep`` bytes; never over any limit (the rest is drained and dropped)."""

    def __init__(self, keep: int, start: bytes = b""):
        self.keep, self.data = keep, bytearray(start[-keep:])

    def add(self, chunk: bytes) -> bool:
        self.data += chunk[-self.keep :]
        if len(self.data) > 4 * self.keep:
            del self.data[: len(self.data) - self.keep]
        return True

    def value(self) -> bytes:
        return bytes(self.data[-self.keep :])


def tail() -> Tail:
    return Tail(KEPT_TAIL)


class StrippedLines:
    """stdout as ``grade_stdio`` compares it: ``"\\n".join(line.strip() for line in
    out.strip().split("\\n"))``, computed on the stream. Only these bytes count against
    ``cap``. Whitespace is held back until a visible byte shows it is inside a line (at a line's
    ends it is dropped; blank lines are a count), and a run of it inside a line longer than
    ``run`` + 1 bytes is kept as ``run`` + 1 spaces: in the sandbox ``run`` is ``SANDBOX_RUN``,
    and the judge shortens further for an expected output with no run that long, where such a
    line can only match token by token and the run's length and bytes do not matter."""

    def __init__(self, cap: int, run: int | None = None):
        self.cap = cap
        self.run = max(1, run if run is not None else cap) + 1
        self.long_run = None if run is None else _longer_runs(self.run + 1)
        self.data = bytearray()
        self.started = False  # a visible byte was seen: blank lines from here on count
        self.in_line = False  # the current line has a visible byte
        self.spaces = bytearray()  # whitespace after the current line's last visible byte
        self.breaks = 0  # line breaks since the last visible byte

    def add(self, chunk: bytes) -> bool:
        visible, breaks = chunk.translate(None, _BLANK), chunk.count(b"\n")
        if not visible:
            if breaks:
                self._line_break(breaks)
            elif self.in_line:
                self._hold(chunk)
            return True
        if breaks <= max(len(visible), LONG_BLANK_RUN):
            return self._lines(chunk)
        # More line breaks than visible bytes: long runs of blank (or whitespace-only) lines,
        # which only add to the count of line breaks, are counted at C speed instead of visited
        # line by line (a flood of empty lines is free against the cap, so it must be cheap too).
        start = 0
        for run in _BLANK_LINES.finditer(chunk):
            if run.end() - run.start() < LONG_BLANK_RUN:
                continue
            breaks = chunk.count(b"\n", run.start(), run.end())
            if breaks < LONG_BLANK_RUN:
                continue
            if not self._lines(chunk[start : run.start()]):
                return False
            self._line_break(breaks)
            start = run.end()
        return self._lines(chunk[start:] if start else chunk)

    def _lines(self, text: bytes) -> bool:
        """Lines of a chunk, the first continuing the current one."""
        for number, piece in enumerate(text.split(b"\n")):
            if number:
                self._line_break(1)
            if piece and not self._segment(piece):
                return False
        return True

    def _line_break(self, count: int) -> None:
        self.spaces.clear()
        self.in_line = False
        if self.started:
            self.breaks += count

    def _hold(self, spaces: bytes) -> None:
        self.spaces += spaces[: self.run + 1]
        if len(self.spaces) > self.run:
            self.spaces[:] = self._shorten(bytes(self.spaces))

    def _shorten(self, text: bytes) -> bytes:
        return text if self.long_run is None else _shortened(self.long_run, self.run, text)

    def _segment(self, piece: bytes) -> bool:
        """A part of one line (no line break in it)."""
        core = piece.strip(WHITESPACE)
        if not core:
            if self.in_line:
                self._hold(piece)
            return True
        lead = len(piece) - len(piece.lstrip(WHITESPACE))
        if self.in_line:
            self._hold(piece[:lead])
            if len(self.data) + len(self.spaces) > self.cap:
                return self._over()
            self.data += self.spaces
        elif self.started:
            if len(self.data) + self.breaks > self.cap:
                return self._over()
            self.data += b"\n" * self.breaks
        self.breaks = 0
        self.started = self.in_line = True
        self.spaces.clear()
        self.data += self._shorten(core) if len(core) > self.run else core
        self._hold(piece[lead + len(core) :])
        if len(self.data) > self.cap:
            return self._over()
        return True

    def _over(self) -> bool:
        del self.data[self.cap :]
        return False

    def value(self) -> bytes:
        return bytes(self.data)


#: The longest whitespace run inside a line that the sandbox keeps as it is: a fixed number,
#: so that nothing in the sandbox says how long the expected output's runs are. The judge
#: shortens the runs further to what its expected output can use (``judged_stdout``).
SANDBOX_RUN = 1 << 16


@lru_cache(maxsize=64)
def _longer_runs(least: int) -> re.Pattern[bytes]:
    """Whitespace runs of at least ``least`` bytes. Cached, and the sandbox's own pattern is
    compiled at import (in the zygote), so a supervisor does not compile it per test."""
    return re.compile(b"[" + re.escape(WHITESPACE) + b"]{%d,}" % least)


StrippedLines(0, SANDBOX_RUN)  # compiles the sandbox's pattern here, at import (in the zygote)


#: Every whitespace byte of ``WHITESPACE`` as a space: a run of them is then a run of spaces,
#: which ``bytes.find`` looks for at C speed.
_AS_SPACES = bytes.maketrans(WHITESPACE, b" " * len(WHITESPACE))


def _shortened(pattern: re.Pattern[bytes], keep: int, data: bytes) -> bytes:
    """``data`` with each run that ``pattern`` (``_longer_runs(keep + 1)``) finds as ``keep``
    spaces. A text with no such run (most of them) is returned after a scan at C speed: the
    pattern's own scan costs ~8 ns a byte, 25 ms for a 3 MiB line."""
    if data.translate(_AS_SPACES).find(b" " * (keep + 1)) < 0:
        return data
    return pattern.sub(b" " * keep, data)


def sandbox_cap(output_kb: int, result_mb: int) -> int:
    """Bytes of a graded test's (stripped) stdout the sandbox keeps: the most any expected
    output could make room for, so the room of the expected one is checked outside."""
    return max(output_kb << 10, result_mb << 20)


def graded_cap(expected: str, output_kb: int, result_mb: int) -> int:
    """Room for a graded test's stdout: ``output_kb``, or four times the expected output if
    that is more (a correct answer longer than ``output_kb`` is not cut off), at most
    ``result_mb``."""
    room = min(4 * len(expected.strip()) + (64 << 10), result_mb << 20) >> 10
    return max(output_kb, room) << 10


def shorten_runs(data: bytes, longest: int) -> bytes:
    """Each whitespace run inside a line longer than ``longest`` + 1 bytes, as ``longest`` + 1
    spaces (``StrippedLines``'s form for an expected output whose longest run is ``longest``)."""
    keep = max(1, longest) + 1
    return _shortened(_longer_runs(keep + 1), keep, data)


def judged_stdout(kept: bytes, expected: str, output_kb: int, result_mb: int) -> tuple[bytes, bool]:
    """The judge's side of a graded stdin test: stdout kept by the sandbox (``StrippedLines``
    at ``SANDBOX_RUN``) in the form the expected output needs, and whether it is over its room.
    Identical to keeping it with the expected output's own run and room in the first place
    (whitespace runs shorten the same either way) within the room; over it, the verdict is
    ``output_limit`` whichever prefix is kept. An expected output with a run longer than
    ``SANDBOX_RUN`` compares in the sandbox's form instead (``judged_expected``)."""
    run = longest_run(expected.strip())
    if run < SANDBOX_RUN:
        kept = shorten_runs(kept, run)
    cap = graded_cap(expected, output_kb, result_mb)
    return kept[:cap], len(kept) > cap


def judged_expected(expected: str) -> str:
    """The expected output as compared: itself, unless it has a whitespace run inside a line
    longer than the sandbox keeps (``SANDBOX_RUN``); then in the sandbox's form, so a program
    that prints it exactly still matches."""
    if longest_run(expected.strip()) <= SANDBOX_RUN:
        return expected
    raw = expected.encode("utf-8", "surrogateescape")
    return shorten_runs(raw, SANDBOX_RUN).decode("utf-8", "surrogateescape")


def longest_run(text: str) -> int:
    """The longest run of ``WHITESPACE`` inside a line of ``text`` (``StrippedLines``'s ``run``)."""
    runs = _RUN.findall(text)
    return max(map(len, runs), default=0)


_RUN = re.compile("[" + re.escape(WHITESPACE.decode()) + "]+")
