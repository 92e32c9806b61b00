"""``rlvr regrade``: grade a run's stored completions again, without generating anything.

With ``--grader ours`` it checks that the stored verdicts reproduce (or, after a verifier
upgrade, shows what changed and can rewrite them with ``--update``). With ``--grader
math-verify`` it grades the same completions with Hugging Face's Math-Verify, so a score gap
between tools can be split into a grading part (same completions, different grader) and a
generation part (the rest).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlvr.harness.config import read_yaml
from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.results import CONFIG, SAMPLES, SUMMARY, read_samples, read_summary, rewrite_samples, write_json

GRADERS = ("ours", "math-verify")


def load_run(run_dir: Path) -> tuple[EvalConfig, list[Any], list[dict[str, Any]]]:
    from rlvr.harness.evaluate import select_benchmarks
    from rlvr.harness.templates import load_template

    if not (run_dir / CONFIG).exists():
        raise UserError(f"{run_dir} is not a run directory (no {CONFIG}); pass the --out of an `rlvr eval` run")
    values = read_yaml(run_dir / CONFIG)
    values["out"] = str(run_dir)
    cfg = EvalConfig(**values)
    runs = select_benchmarks(cfg, load_template(cfg.template, cfg.shots))
    rows = read_samples(run_dir)
    if not rows:
        raise UserError(f"{run_dir}/{SAMPLES} holds no samples yet")
    return cfg, runs, rows


def math_verify_grade(completion: str, answer: str) -> tuple[bool, str | None]:
    """Math-Verify's recommended use: gold parsed as LaTeX, prediction parsed from the text."""
    from math_verify import parse, verify

    try:
        gold = parse(f"${answer}$") or parse(answer)
        pred = parse(completion)
        return bool(verify(gold, pred)), (str(pred[-1]) if pred else None)
    except Exception:  # Math-Verify raises on odd inputs; that counts as not verified
        return False, None


def regrade(run_dir: Path, grader: str = "ours", update: bool = False, workers: int | None = None) -> dict[str, Any]:
    if grader not in GRADERS:
        raise UserError(f"--grader must be one of {GRADERS}")
    if update and grader != "ours":
        raise UserError("--update rewrites stored verdicts and only works with --grader ours")
    cfg, runs, rows = load_run(run_dir)
    problems = {p.id: p for run in runs for p in run.problems}
    rows = [r for r in rows if r["id"] in problems]
    started = time.time()
    if grader == "ours":
        from rlvr.harness.grading import EvalGrader

        evaluator = EvalGrader(workers or cfg.workers, cfg.math_timeout, cfg.code_limits, test_details=cfg.test_details)
        try:
            verdicts = evaluator.grade([(problems[r["id"]], r["completion"]) for r in rows])
        finally:
            evaluator.close()
        new = [
            {
                "correct": bool(v.correct),
                "reason": v.reason,
                "extracted": v.extracted,
                "reward": v.reward,
                "detail": v.detail,
                "verifier": v.verifier,
            }
            for v in verdicts
        ]
    else:
        try:
            import math_verify  # noqa: F401
        except ImportError as exc:
            raise UserError("--grader math-verify needs the math-verify package: pip install 'rlvr[compare]'") from exc
        new = []
        for r in rows:
            problem = problems[r["id"]]
            if problem.kind != "math":
                new.append(None)
                continue
            ok, extracted = math_verify_grade(r["completion"], problem.gold["answer"])
            new.append(
                {
                    "correct": ok,
                    "reason": "ok" if ok else "not_verified",
                    "extracted": extracted,
                    "verifier": "math-verify",
                }
            )
    report = _report(rows, new, grader, time.time() - started)
    out = run_dir / f"regrade-{grader}.jsonl"
    with out.open("w", encoding="utf-8") as fh:
        for r, n in zip(rows, new):
            if n is not None:
                fh.write(
                    json.dumps(
                        {
                            "id": r["id"],
                            "sample_idx": r["sample_idx"],
                            "stored_correct": r["correct"],
                            "stored_reason": r["reason"],
                            **n,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    write_json(run_dir / f"regrade-{grader}.json", report)
    if update:
        _rewrite(run_dir, cfg, runs, rows, new)
    return report


def _report(
    rows: list[dict[str, Any]], new: list[dict[str, Any] | None], grader: str, seconds: float
) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = defaultdict(
        lambda: {"samples": 0, "stored_correct": 0, "regraded_correct": 0, "agree": 0, "now_correct": 0, "now_wrong": 0}
    )
    for r, n in zip(rows, new):
        if n is None:
            continue
        b = per[r["benchmark"]]
        b["samples"] += 1
        b["stored_correct"] += bool(r["correct"])
        b["regraded_correct"] += bool(n["correct"])
        b["agree"] += bool(r["correct"]) == bool(n["correct"])
        b["now_correct"] += (not r["correct"]) and n["correct"]
        b["now_wrong"] += bool(r["correct"]) and not n["correct"]
    skipped = sum(1 for n in new if n is None)
    return {"grader": grader, "seconds": round(seconds, 2), "skipped_non_math": skipped, "benchmarks": dict(per)}


def _rewrite(
    run_dir: Path, cfg: EvalConfig, runs: list[Any], rows: list[dict[str, Any]], new: list[dict[str, Any] | None]
) -> None:
    from rlvr.harness.evaluate import resolve_run_model, summarize_run
    from rlvr.harness.grading import EvalGrader
    from rlvr.harness.templates import load_template

    updated = {(r["id"], r["sample_idx"]): {**r, **n} for r, n in zip(rows, new) if n is not None}
    rewrite_samples(run_dir, [updated.get((r["id"], r["sample_idx"]), r) for r in read_samples(run_dir)])
    old = read_summary(run_dir) or {}
    evaluator = EvalGrader(cfg.workers, cfg.math_timeout, cfg.code_limits)
    try:
        summary = summarize_run(
            cfg,
            runs,
            load_template(cfg.template, cfg.shots),
            evaluator,
            old.get("model") or resolve_run_model(cfg),
            run_dir,
            old.get("timings"),
        )
    finally:
        evaluator.close()
    write_json(run_dir / SUMMARY, summary)


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{'benchmark':<16} {'samples':>7} {'stored acc':>10} {'regraded':>9} {'agree':>7} {'->correct':>9} "
        f"{'->wrong':>8}"
    ]
    for name, b in report["benchmarks"].items():
        n = b["samples"] or 1
        lines.append(
            f"{name:<16} {b['samples']:>7} {100 * b['stored_correct'] / n:>9.1f}% "
            f"{100 * b['regraded_correct'] / n:>8.1f}% {100 * b['agree'] / n:>6.1f}% {b['now_correct']:>9} "
            f"{b['now_wrong']:>8}"
        )
    if report["skipped_non_math"]:
        lines.append(f"({report['skipped_non_math']} code samples skipped: {report['grader']} grades math only)")
    return "\n".join(lines)
