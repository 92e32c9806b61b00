"""Looking at a run's samples: the engine of ``rlvr show`` and of the leaderboard's sample pages.

A run directory holds ``samples.jsonl`` (one line per sample: prompt, completion, extracted
answer, verdict) and, once finished, ``summary.json``. ``load_run`` reads both and adds each
sample's gold: the ``gold`` field ``rlvr eval`` writes for math, else the problem looked up
through the run's ``config.yaml`` (older runs), and for code a count of the tests.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rlvr.harness.errors import UserError
from rlvr.harness.results import CONFIG, PARTIAL, SAMPLES, SUMMARY, read_jsonl, read_summary


@dataclass
class RunView:
    path: Path
    samples: list[dict[str, Any]]
    summary: dict[str, Any] | None = None
    partial: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(str(s.get("benchmark")) for s in self.samples))


def load_run(path: str | Path, gold: bool = True) -> RunView:
    """A run directory (or a ``samples.jsonl`` file) with every sample and, when ``gold``, each
    sample's gold answer filled in where it can be found."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist; pass a run directory (the --out of `rlvr eval`)")
    if path.is_file():
        run_dir, samples_file = path.parent, path
    else:
        run_dir, samples_file = path, path / SAMPLES
    if not samples_file.is_file():
        has_summary = (run_dir / SUMMARY).is_file()
        found = sorted(p.parent for p in run_dir.rglob(SAMPLES))[:3] if run_dir.is_dir() else []
        if found:
            hint = f"; runs below it: {', '.join(str(f) for f in found)}"
        elif has_summary:
            hint = " (only its summary.json was kept; run the same `rlvr eval` again to regenerate the samples)"
        else:
            hint = "; pass a run directory (the --out of `rlvr eval`)"
        raise UserError(f"{run_dir} has no {SAMPLES}{hint}")
    try:
        summary = read_summary(run_dir) if samples_file.name == SAMPLES else None
    except ValueError:
        summary = None
    partial = None
    if (run_dir / PARTIAL).is_file():
        try:
            partial = json.loads((run_dir / PARTIAL).read_text(encoding="utf-8"))
        except ValueError:
            partial = {"reason": "unknown"}
    view = RunView(run_dir, read_jsonl(samples_file), summary, partial)
    if gold:
        fill_gold(view)
    return view


def fill_gold(view: RunView) -> None:
    """Give each sample a ``gold`` (the math answer, or ``N tests`` for code) from its problem."""
    missing = [s for s in view.samples if s.get("gold") is None]
    if not missing:
        return
    problems = _problems(view.path, view.notes)
    for sample in missing:
        problem = problems.get(sample.get("id"))
        if problem is None:
            continue
        if problem.kind == "math":
            sample["gold"] = str(problem.gold.get("answer"))
        else:
            tests = problem.gold.get("tests")
            count = len(tests) if isinstance(tests, list) else None
            sample["gold"] = f"{count} hidden tests" if count is not None else "hidden tests"


def _problems(run_dir: Path, notes: list[str]) -> dict[str, Any]:
    """The run's problems by id, rebuilt from its config.yaml (empty when that cannot be done)."""
    if not (run_dir / CONFIG).is_file():
        return {}
    try:
        from rlvr.harness.config import read_yaml
        from rlvr.harness.eval_config import EvalConfig
        from rlvr.harness.evaluate import select_benchmarks
        from rlvr.harness.templates import load_template

        cfg = EvalConfig(**read_yaml(run_dir / CONFIG))
        cfg.limit = None
        template = load_template(cfg.template, cfg.shots)
        if template.kind == "fewshot":
            template = load_template("no_template", 0)  # gold only: no few-shot pool needed
        return {p.id: p for run in select_benchmarks(cfg, template) for p in run.problems}
    except Exception as exc:  # an old or moved run: show it without gold
        notes.append(f"gold answers unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
        return {}


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def filter_samples(
    samples: Iterable[dict[str, Any]],
    benchmark: str | None = None,
    reason: str | None = None,
    correct: bool | None = None,
    ids: str | None = None,
    grep: str | None = None,
) -> list[dict[str, Any]]:
    """Samples matching every filter given: ``benchmark`` / ``reason`` comma lists, ``correct``,
    ``ids`` (comma list of ids or globs, ``math500/1*``), ``grep`` (case-insensitive text in the
    prompt, completion, extracted answer, gold or detail)."""
    benchmarks, reasons, patterns = set(_split(benchmark)), set(_split(reason)), _split(ids)
    needle = grep.lower() if grep else None
    out = []
    for s in samples:
        if benchmarks and s.get("benchmark") not in benchmarks:
            continue
        if reasons and s.get("reason") not in reasons:
            continue
        if correct is not None and bool(s.get("correct")) != correct:
            continue
        if patterns and not any(fnmatch.fnmatchcase(str(s.get("id")), p) for p in patterns):
            continue
        if needle is not None:
            text = "\n".join(
                _text(s.get(k)) for k in ("prompt", "completion", "extracted", "gold", "detail", "id")
            ).lower()
            if needle not in text:
                continue
        out.append(s)
    return out


def check_filters(view: RunView, benchmark: str | None, reason: str | None) -> None:
    """Unknown benchmark names are an error naming the ones the run has (a typo would show nothing)."""
    present = view.benchmarks
    unknown = [b for b in _split(benchmark) if b not in present]
    if unknown:
        raise UserError(f"--benchmark {', '.join(unknown)}: not in this run; it has {', '.join(present)}")
    from rlvr.sandbox.verdict import UNVERIFIABLE_REASONS

    known = {"ok", "wrong_answer", "no_answer", "unparseable", "bad_input", *UNVERIFIABLE_REASONS}
    known |= {"time_limit", "memory_limit", "output_limit", "runtime_error", "compile_error", "no_code"}
    known |= {str(s.get("reason")) for s in view.samples}
    bad = [r for r in _split(reason) if r not in known]
    if bad:
        raise UserError(f"--reason {', '.join(bad)}: no such reason; this run has {', '.join(reason_counts(view))}")


def reason_counts(view: RunView) -> list[str]:
    counts: dict[str, int] = {}
    for s in view.samples:
        counts[str(s.get("reason"))] = counts.get(str(s.get("reason")), 0) + 1
    return [f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages
        return "\n".join(f"[{m.get('role')}] {m.get('content')}" if isinstance(m, dict) else str(m) for m in value)
    return json.dumps(value, ensure_ascii=False)


def header(view: RunView, shown: int, matched: int) -> str:
    """One paragraph: what the run holds and how much of it is shown."""
    total = len(view.samples)
    correct = sum(1 for s in view.samples if s.get("correct"))
    per = {}
    for s in view.samples:
        per[s.get("benchmark")] = per.get(s.get("benchmark"), 0) + 1
    lines = [
        f"{view.path}: {total} samples ({', '.join(f'{b} {n}' for b, n in per.items())}), {correct} correct; "
        f"reasons: {', '.join(reason_counts(view))}"
    ]
    if view.summary:
        model = (view.summary.get("model") or {}).get("name")
        template = ((view.summary.get("protocol") or {}).get("template") or {}).get("name")
        lines.append(f"model {model}, template {template}, fingerprint {view.summary.get('fingerprint')}")
    else:
        lines.append("no summary.json yet: the run has not finished (rerun its `rlvr eval` command to complete it)")
    if view.partial:
        lines.append(
            f"partial run: {view.partial.get('reason', 'stopped')} after {view.partial.get('samples', '?')} samples; "
            "rerun the same command to resume"
        )
    lines += [f"note: {n}" for n in view.notes]
    more = f" (--limit 0 shows all {matched})" if shown < matched else ""
    lines.append(f"showing {shown} of {matched} matching samples{more}")
    return "\n".join(lines)


def _clip(text: str, limit: int | None, tail: bool) -> str:
    if limit is None or len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"[... {cut} characters]\n" + text[-limit:] if tail else text[:limit] + f"\n[... {cut} more characters]"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in (text or "").splitlines()) or "  (empty)"


def format_sample(s: dict[str, Any], full: bool = False, color: bool = False) -> str:
    """A sample for the terminal: a heading with the verdict, then prompt, completion, answers, detail."""
    ok = bool(s.get("correct"))
    verdict = ("correct" if ok else "wrong") + f" ({s.get('reason')})"
    if color:
        verdict = ("\033[32m" if ok else "\033[31m") + verdict + "\033[0m"
    tokens = s.get("n_tokens")
    finish = s.get("finish_reason")
    heading = (
        f"── {s.get('id')}  sample {s.get('sample_idx')}  {s.get('benchmark')}  {verdict}"
        f"  {tokens if tokens is not None else '?'} tokens{' (cut at the budget)' if finish == 'length' else ''} ──"
    )
    prompt = _clip(_text(s.get("prompt")), None if full else 500, tail=True)
    completion = _clip(_text(s.get("completion")), None if full else 2000, tail=False)
    lines = [
        heading,
        "prompt:" + ("" if full or len(_text(s.get("prompt"))) <= 500 else " (its end; --full for all)"),
        _indent(prompt),
        "completion:",
        _indent(completion),
    ]
    extracted = _text(s.get("extracted")) if s.get("extracted") is not None else "None"
    gold = s.get("gold") if s.get("gold") is not None else "?"
    if "\n" in extracted.strip():  # a program: its own block, so the gold never runs into its last line
        lines += ["extracted:", _indent(extracted.rstrip("\n")), f"gold: {gold}"]
    else:
        lines.append(f"extracted: {extracted.strip()}    gold: {gold}")
    if s.get("detail") and s.get("detail") != s.get("reason"):
        lines.append(f"detail: {_text(s.get('detail'))}")
    return "\n".join(lines)
