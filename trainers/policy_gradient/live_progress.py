"""What a training run says while it works: a legend, progress inside a step, an ETA, a summary.

A step takes minutes on a small machine (generation, then learning), so a run that prints only
when a step ends looks hung. On a terminal one progress bar counts steps and shows the phase
inside the current one (rollout: samples done and tokens/s; learning: micro-batches done); in a
log or a pipe the run writes one line per step, as ``rlvr eval`` does, so logs stay greppable.
The trainers report through ``report_rollout`` / ``report_learn``, which do nothing when no run
is listening (tests, library use).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any, TextIO

LEGEND = (
    "legend: reward = mean shaped reward of the step's trained groups; acc = fraction of completions "
    "graded correct; zero-var = fraction of groups whose rewards are all equal (no learning signal); "
    "gens = completions generated; len+/len- = mean tokens of correct/incorrect completions; "
    "gen/learn = seconds generating/learning; eta = time left at the mean step time so far"
)

_current: "RunProgress | None" = None


def report_rollout(done: int, total: int, tokens: int) -> None:
    """Samples generated so far in this step's rollout (and their tokens)."""
    if _current is not None:
        _current.rollout(done, total, tokens)


def report_learn(done: int, total: int) -> None:
    """Micro-batches (forward + backward) done so far in this step's update."""
    if _current is not None:
        _current.learn(done, total)


def format_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class RunProgress:
    """One run's voice: ``with RunProgress(first, last) as progress: ... progress.step_done(...)``."""

    def __init__(self, first_step: int, last_step: int, stream: TextIO | None = None, enabled: bool = True):
        self.first, self.last = first_step, last_step
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.monotonic()
        self.phase_started = self.started
        self.bar: Any = None

    def __enter__(self) -> "RunProgress":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> "RunProgress":
        """Print the legend, open the bar (on a terminal) and listen to the trainers' reports."""
        global _current
        if self.enabled:
            print(LEGEND, file=self.stream, flush=True)
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.last, initial=self.first - 1, unit="step", desc="training", file=self.stream, leave=False
            )
        _current = self
        return self

    def close(self) -> None:
        global _current
        _current = None
        if self.bar is not None:
            self.bar.close()

    def rollout(self, done: int, total: int, tokens: int) -> None:
        if done <= 0:  # a rollout starts: its rate counts from here
            self.phase_started = time.monotonic()
        rate = tokens / max(time.monotonic() - self.phase_started, 1e-9)
        self._phase(f"rollout {done}/{total} samples, {rate:.0f} tok/s")

    def learn(self, done: int, total: int) -> None:
        self._phase(f"learning {done}/{total} micro-batches")

    def _phase(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)

    def eta(self, step: int) -> float:
        """Seconds left at the mean time of the steps this process ran."""
        done = step - self.first + 1
        return (time.monotonic() - self.started) / max(done, 1) * (self.last - step)

    def step_done(self, step: int, line: str) -> None:
        """The step's one line (with the ETA), above the bar on a terminal, else on its own."""
        self.phase_started = time.monotonic()
        if not self.enabled:
            return
        text = f"{line} eta {format_eta(self.eta(step))}" if step < self.last else line
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
            self.bar.update(1)
            self.bar.set_postfix_str("")
        else:
            print(text, file=self.stream, flush=True)


def step_line(step: int, total: int, m: dict[str, Any]) -> str:
    """The one line a finished step prints (the legend names its fields)."""
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    evals = " ".join(f"{k}={fmt(v)}" for k, v in m.items() if k.startswith("eval_"))
    probe = "" if m.get("probe_reward") is None else f"probe {fmt(m['probe_reward'])} "
    return (
        f"step {step}/{total} [{m['stage']}] reward {fmt(m['reward_mean'])} acc {fmt(m['accuracy'])} zero-var "
        f"{fmt(m['zero_variance_fraction'])} "
        f"batch {m['effective_batch']} gens {m['generations']} len+ {m['length_correct']} len- {m['length_incorrect']} "
        f"gen {m['time_generate']:.1f}s learn {m['time_learn']:.1f}s "
        f"{probe}{evals}"
    ).rstrip()


def kept_checkpoint(checkpoint: Path | None, log: Path) -> str:
    """What an interrupted training run kept, for its interrupt line."""
    if checkpoint is not None:
        return f"last checkpoint {checkpoint}; continue with the same command and --resume"
    return f"no checkpoint was saved yet (steps logged in {log})"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def closing_summary(rows: list[dict[str, Any]], out: Path, checkpoint: Path | None, eval_benchmarks: list[str]) -> str:
    """Reward and accuracy of the first vs the last window of steps, the best step, the last
    checkpoint and the ``rlvr eval`` command that evaluates it."""
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"done -> {out}"]
    steps = [r for r in rows if r.get("step") is not None]
    if steps:
        window = max(1, min(10, len(steps) // 4 or 1))
        first, last = steps[:window], steps[-window:]

        def mean_of(part: list[dict[str, Any]], key: str) -> float | None:
            return _mean([float(r[key]) for r in part if r.get(key) is not None])

        span = lambda part: f"{part[0]['step']}" + (f"-{part[-1]['step']}" if len(part) > 1 else "")  # noqa: E731
        lines.append(
            f"  reward {fmt(mean_of(first, 'reward_mean'))} (steps {span(first)}) -> "
            f"{fmt(mean_of(last, 'reward_mean'))} (steps {span(last)}); "
            f"acc {fmt(mean_of(first, 'accuracy'))} -> {fmt(mean_of(last, 'accuracy'))}"
        )
        evals = sorted({k for r in steps for k in r if k.startswith("eval_") and r[k] is not None})
        key = evals[0] if evals else "reward_mean"
        scored = [r for r in steps if r.get(key) is not None]
        if scored:
            best = max(scored, key=lambda r: float(r[key]))
            lines.append(f"  best step {best['step']}: {key} {fmt(float(best[key]))}")
    if checkpoint is not None:
        lines.append(f"  checkpoint: {checkpoint}")
        benchmarks = ",".join(eval_benchmarks) if eval_benchmarks else "math500"
        lines.append(f"  evaluate it: rlvr eval --model {shlex.quote(str(checkpoint))} --benchmarks {benchmarks}")
    else:
        lines.append("  no checkpoint was saved")
    return "\n".join(lines)
