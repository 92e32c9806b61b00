"""What an evaluation shows while it runs: samples done, tokens/s and an ETA, for every backend.

Backends report tokens as they are generated (``tokens``: the ``hf`` backend once per decoding
step, vLLM once per engine step, the ``openai`` backend as each answer arrives) and the grader
reports each sample as it is graded (``graded``), so the line moves within seconds of the start
even while a batch of long answers is still being written. On a terminal the line is redrawn in
place (also while nothing is reported: a slow prefill, a server's first answer); in a log (stderr
not a terminal) one line after ``LOG_FIRST_S`` seconds, then one every ``LOG_EVERY_S``. Each
benchmark gets one line when its last sample is graded, with ``--no-progress`` too.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

#: Terminal redraw interval and the interval between lines in a log.
REDRAW_S = 0.5
LOG_FIRST_S = 5.0
LOG_EVERY_S = 30.0


def duration(seconds: float | None) -> str:
    """``45s``, ``3m05s``, ``1h02m``; ``?`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class EvalProgress:
    """Counts and draws the progress of one evaluation's generation and grading (thread-safe:
    backends call ``tokens`` from the generating thread, the grader calls ``graded`` from its own)."""

    def __init__(
        self,
        per_benchmark: dict[str, int],
        max_tokens: int,
        live: bool = True,
        stream: TextIO | None = None,
        clock=time.monotonic,
        ticker: bool = True,
    ):
        self.todo = dict(per_benchmark)
        self.total = sum(self.todo.values())
        self.max_tokens = max_tokens
        self.live = live
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = clock()
        self.done = 0
        self.correct = 0
        self.finished_tokens = 0  # exact counts of graded samples
        self.live_tokens = 0  # heartbeat counts (may run ahead of the graded samples)
        self.per: dict[str, list[float]] = {name: [0, 0, 0] for name in self.todo}  # done, correct, tokens
        self.first_done: dict[str, float] = {}
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self._drawn = False
        self._next_log = LOG_FIRST_S
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if live and self.total and ticker:
            # redraws while nothing is reported (a slow prefill, a remote server's first answer)
            self._ticker = threading.Thread(target=self._tick, name="rlvr-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_S if self.tty else 1.0):
            with self._lock:
                self._maybe_draw()

    # ---- reports ------------------------------------------------------------------------
    def tokens(self, n: int) -> None:
        """``n`` more tokens generated (a heartbeat; exact or estimated by the backend)."""
        with self._lock:
            self.live_tokens += max(0, int(n))
            self._maybe_draw()

    def graded(self, benchmark: str, correct: bool, n_tokens: int | None) -> None:
        """One sample generated and graded."""
        with self._lock:
            self.done += 1
            self.correct += bool(correct)
            self.finished_tokens += n_tokens or 0
            entry = self.per.setdefault(benchmark, [0, 0, 0])
            self.first_done.setdefault(benchmark, self.clock())
            entry[0] += 1
            entry[1] += bool(correct)
            entry[2] += n_tokens or 0
            if entry[0] == self.todo.get(benchmark):
                self._print_line(self._benchmark_line(benchmark))
            self._maybe_draw()

    # ---- numbers ------------------------------------------------------------------------
    def elapsed(self) -> float:
        return max(1e-9, self.clock() - self.started)

    def tokens_per_s(self) -> float:
        return max(self.live_tokens, self.finished_tokens) / self.elapsed()

    def eta(self) -> float | None:
        """Seconds left: tokens still to write (the mean answer length so far, else the budget,
        for each sample not yet done) at the current rate; by samples when no tokens are counted."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        rate = self.tokens_per_s()
        if rate > 0:
            mean = self.finished_tokens / self.done if self.done and self.finished_tokens else self.max_tokens
            in_flight = max(0, self.live_tokens - self.finished_tokens)
            return max(0.0, left * mean - in_flight) / rate
        if self.done:
            return left * self.elapsed() / self.done
        return None

    def status(self) -> str:
        if not self.done and not self.live_tokens:
            return f"eval 0/{self.total} samples  {duration(self.elapsed())} elapsed, waiting for the first tokens"
        accuracy = f"  acc {self.correct / self.done:.3f}" if self.done else ""
        return (
            f"eval {self.done}/{self.total} samples{accuracy}  {self.tokens_per_s():.0f} tok/s  "
            f"{duration(self.elapsed())} elapsed, ETA {duration(self.eta())}"
        )

    def _benchmark_line(self, name: str) -> str:
        done, correct, tokens = self.per[name]
        return (
            f"{name}: {int(done)} samples generated and graded, {int(correct)} correct ({correct / done:.3f}), "
            f"{int(tokens)} tokens, {duration(self.elapsed())} since the start"
        )

    # ---- drawing ------------------------------------------------------------------------
    def _maybe_draw(self, force: bool = False) -> None:
        if not self.live or self.total == 0:
            return
        now = self.clock()
        since = now - self.started
        if self.tty:
            if force or now - self._last_draw >= REDRAW_S:
                self._last_draw = now
                self.stream.write("\r\033[K" + self.status())
                self.stream.flush()
                self._drawn = True
        elif force or since >= self._next_log:
            self._next_log = since + LOG_EVERY_S
            self.stream.write(self.status() + "\n")
            self.stream.flush()

    def _print_line(self, text: str) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\033[K")
            self._drawn = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\r\033[K" + self.status() + "\n")
                self.stream.flush()
                self._drawn = False
