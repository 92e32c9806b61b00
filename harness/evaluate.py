"""``rlvr eval``: generate, grade with the sandbox verifiers, and log every sample as it finishes.

The run directory is the unit of work: the same command finds the samples already written and
generates only the rest. Each sample is graded and written as soon as it is generated, so a
killed run loses only the samples still being written. Everything that
changes scores is hashed into the protocol fingerprint (``rlvr.harness.fingerprint``).
"""

from __future__ import annotations

import inspect
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.harness.backends.base import Backend, GenerationRequest, SamplingParams, sample_seed
from rlvr.harness.backends.registry import backend_spec, make_backend
from rlvr.harness.benchmarks.problems import BenchmarkSpec, Problem, data_revision
from rlvr.harness.benchmarks.registry import load_problems
from rlvr.harness.benchmarks.sources import resolve_source
from rlvr.harness.errors import UserError, note_kept
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.fingerprint import fingerprints, hardware, protocol_fields, versions
from rlvr.harness.grading import EvalGrader
from rlvr.harness.progress import EvalProgress
from rlvr.harness.ray_eval import RayEngines
from rlvr.harness.results import CONFIG, SAMPLES, SUMMARY, SampleLog, read_samples, rewrite_samples, write_json
from rlvr.harness.run_dir import RunDir, holds_file
from rlvr.harness.sample_sink import GradingSink
from rlvr.harness.summary import benchmark_metrics, format_table
from rlvr.harness.templates import Prompt, Template, load_template, pick_shots, render
from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER


@dataclass
class BenchmarkRun:
    name: str
    kind: str
    problems: list[Problem]
    instruction: str
    shot_pool: list[Problem] = field(default_factory=list)
    notes: str = ""
    #: problems in the whole benchmark (more than ``len(problems)`` under ``--limit``)
    total: int = 0


def select_benchmarks(cfg: EvalConfig, template: Template) -> list[BenchmarkRun]:
    runs = []
    for entry in cfg.benchmarks:
        source = resolve_source(entry, cfg.fields, cfg.kind, cfg.policy)
        pool = source.problems if source.spec is None else shot_pool(source.spec, template)
        problems = source.problems[: cfg.limit] if cfg.limit else source.problems
        runs.append(
            BenchmarkRun(
                source.name, source.kind, problems, source.instruction, pool, source.notes, len(source.problems)
            )
        )
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise UserError(f"benchmark listed twice: {names}")
    return runs


def shot_pool(spec: BenchmarkSpec, template: Template) -> list[Problem]:
    """The worked solutions a few-shot prompt for ``spec`` draws from (none for other templates)."""
    if template.kind != "fewshot":
        return []
    pool = load_problems(spec.shots_from) if spec.shots_from else []
    if not pool:
        raise UserError(f"{spec.name} has no worked solutions for few-shot prompts; use another --template")
    return pool


def build_prompt(template: Template, run: BenchmarkRun, problem: Problem) -> Prompt:
    shots = pick_shots(run.shot_pool, problem.id, template.shots) if template.kind == "fewshot" else ()
    return render(template, problem.question, run.instruction, shots)


def resolve_run_model(cfg: EvalConfig) -> dict[str, Any]:
    """``{name, path, weights_hash}``; remote models are named, not hashed."""
    if not backend_spec(cfg.backend).local:
        if not cfg.model:
            raise UserError(f"the {cfg.backend} backend needs --model NAME (the model id the server serves)")
        return {"name": cfg.model, "path": cfg.model, "weights_hash": None}
    from rlvr.harness.models import resolve_model, weights_hash

    path, name = resolve_model(cfg.model)
    return {"name": name, "path": path, "weights_hash": weights_hash(path)}


def refresh_stale_verdicts(
    run_dir: Path, rows: list[dict[str, Any]], problems: dict[str, Problem], grader: EvalGrader
) -> None:
    """Samples graded by an older verifier version are graded again (never regenerated), so a
    resumed run's summary describes one verifier."""
    current = {"math": MATH_VERIFIER, "code": CODE_VERIFIER}
    stale = [
        i for i, r in enumerate(rows) if r["id"] in problems and r.get("verifier") != current[problems[r["id"]].kind]
    ]
    if not stale:
        return
    versions_seen = sorted({str(rows[i].get("verifier")) for i in stale})
    verdicts = grader.grade([(problems[rows[i]["id"]], rows[i]["completion"]) for i in stale])
    for i, v in zip(stale, verdicts):
        rows[i] = {
            **rows[i],
            "extracted": v.extracted,
            "correct": bool(v.correct),
            "reward": v.reward,
            "reason": v.reason,
            "detail": v.detail,
            "verifier": v.verifier,
        }
    rewrite_samples(run_dir, rows)
    print(f"note: re-graded {len(stale)} stored samples graded by {', '.join(versions_seen)} with the current verifier")


def run_eval(cfg: EvalConfig, engine: Backend | None = None) -> dict[str, Any]:
    """Evaluate ``cfg``; ``engine`` is a live backend to generate with instead of loading the model
    (a trainer's synced vLLM engine: its weights must be those of ``cfg.model``).

    Everything that can be checked is checked before the run directory is touched. A run that
    fails or is interrupted before its first sample leaves nothing behind (what it created is
    removed); one with samples keeps them, marked by ``partial.json`` until a rerun finishes it."""
    started = time.time()
    backend = backend_spec(cfg.backend)
    if cfg.model is None and backend.local:
        from rlvr.harness.models import EMBEDDED_NAME

        cfg.model = EMBEDDED_NAME  # recorded by name, so config.yaml says what ran
    template = load_template(cfg.template, cfg.shots)
    runs = select_benchmarks(cfg, template)
    run = eval_run_dir(cfg)
    run.open(cfg, create=False)
    run_dir = run.path
    device = backend.preflight(cfg) if engine is None else None
    for warning in cfg.warnings(device):
        print(f"warning: {warning}", file=sys.stderr)
    model = resolve_run_model(cfg)
    made = _Made(run)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        run.save_config(cfg)
        summary = _evaluate(cfg, runs, template, model, run_dir, engine, started)
    except BaseException as exc:
        kept = made.clean_up(exc)
        if isinstance(exc, KeyboardInterrupt):
            note_kept(
                exc,
                f"{kept} samples kept in {run_dir} (partial.json marks it); run the same command to resume"
                if kept
                else "nothing finished; nothing kept"
                + (f" ({run_dir} removed)" if made.new_dir and not run_dir.exists() else ""),
            )
        raise
    run.finish()
    write_json(run_dir / SUMMARY, summary)
    return summary


def eval_run_dir(cfg: EvalConfig) -> RunDir:
    """An evaluation's run directory: its work is the samples written."""
    return RunDir(cfg.run_dir(), holds_file(SAMPLES), "samples")


class _Made:
    """What ``run_eval`` created, so a run that fails before its first sample removes it."""

    def __init__(self, run: RunDir):
        self.run = run
        self.run_dir = run.path
        self.new_dir = not run.path.exists()
        self.new_config = not (run.path / CONFIG).exists()

    def clean_up(self, exc: BaseException) -> int:
        """Remove what this run made if it holds no samples; else mark the run partial. Returns
        the samples kept."""
        kept = len(read_samples(self.run_dir)) if self.run_dir.is_dir() else 0
        if kept:
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
            self.run.mark_partial(
                reason or type(exc).__name__, kept, "run the same `rlvr eval` command again: finished samples are kept"
            )
            return kept
        for name in ([CONFIG] if self.new_config else []) + [SAMPLES]:
            path = self.run_dir / name
            if path.is_file() and (name == CONFIG or path.stat().st_size == 0):
                path.unlink()
        if self.new_dir:
            try:
                self.run_dir.rmdir()  # only if empty: never what someone else put there
            except OSError:
                pass
        return 0


def _evaluate(
    cfg: EvalConfig,
    runs: list[BenchmarkRun],
    template: Template,
    model: dict[str, Any],
    run_dir: Path,
    engine: Backend | None,
    started: float,
) -> dict[str, Any]:
    stored = read_samples(run_dir, repair=True)
    done = {(r["id"], r["sample_idx"]) for r in stored}
    todo = [(run, p, j) for run in runs for p in run.problems for j in range(cfg.n) if (p.id, j) not in done]
    if done:
        print(f"resuming {run_dir}: {len(done)} finished samples reused, {len(todo)} to generate", file=sys.stderr)
    grader = EvalGrader(cfg.workers, cfg.math_timeout, cfg.code_limits, test_details=cfg.test_details)
    try:
        refresh_stale_verdicts(run_dir, stored, {p.id: p for run in runs for p in run.problems}, grader)
        timings = {
            "model_load_s": 0.0,
            "generation_s": 0.0,
            "grading_s": 0.0,
            "samples_generated": len(todo),
            "samples_resumed": len(done),
            "tokens_generated": 0,
        }
        if todo:
            _generate_and_grade(cfg, template, todo, model, grader, run_dir, timings, engine)
        timings["total_s"] = round(time.time() - started, 2)
        return summarize_run(cfg, runs, template, grader, model, run_dir, timings)
    finally:
        grader.close()


def _generate_and_grade(
    cfg: EvalConfig,
    template: Template,
    todo: list,
    model: dict[str, Any],
    grader: EvalGrader,
    run_dir: Path,
    timings: dict[str, Any],
    engine: Backend | None = None,
) -> None:
    """Generate ``todo`` chunk by chunk; each sample is graded and appended to samples.jsonl as
    soon as its generation finishes (backends that report samples one by one), or as soon as its
    chunk does (the others), by a grading thread that never holds up generation."""
    t0 = time.time()
    if cfg.progress and engine is None:
        where = "on Ray" if cfg.ray else f"with --backend {cfg.backend}"
        print(f"loading {model['name']} {where}; {len(todo)} samples to generate", file=sys.stderr, flush=True)
    backend: Any = engine or (RayEngines(cfg, model["path"]) if cfg.ray else make_backend(cfg, model["path"]))
    timings["model_load_s"] = round(time.time() - t0, 2)
    params = SamplingParams(cfg.temperature, cfg.top_p, cfg.max_tokens, template.stop, template.include_stop)
    prompts: dict[str, Prompt] = {}
    size = backend_spec(cfg.backend).chunk_size(cfg)
    chunks = [todo[start : start + size] for start in range(0, len(todo), size)]
    request_chunks = []
    for chunk in chunks:
        requests = []
        for run, problem, j in chunk:
            if problem.id not in prompts:
                prompts[problem.id] = build_prompt(template, run, problem)
            requests.append(GenerationRequest(prompts[problem.id], sample_seed(cfg.seed, problem.id, j)))
        request_chunks.append(requests)
    per_benchmark: dict[str, int] = {}
    for run, _, _ in todo:
        per_benchmark[run.name] = per_benchmark.get(run.name, 0) + 1
    meter = EvalProgress(per_benchmark, cfg.max_tokens, live=cfg.progress)
    sink = GradingSink(grader, SampleLog(run_dir), meter, template, timings)
    streaming = not cfg.ray and accepts_callbacks(backend)
    try:
        if cfg.ray:
            generated = backend.generate_chunks(request_chunks, params)
            for chunk, requests in zip(chunks, request_chunks):
                t0 = time.time()
                generations = next(generated)
                timings["generation_s"] += time.time() - t0
                for item, request, generation in zip(chunk, requests, generations):
                    sink.put(item, request, generation)
        for chunk, requests in zip(chunks, request_chunks) if not cfg.ray else ():
            t0 = time.time()
            if streaming:
                reported: set[int] = set()

                def on_sample(i: int, generation: Any, chunk: list = chunk, requests: list = requests) -> None:
                    reported.add(i)
                    sink.put(chunk[i], requests[i], generation)

                generations = backend.generate(requests, params, on_sample=on_sample, on_tokens=meter.tokens)
                for i, generation in enumerate(generations):
                    if i not in reported:
                        sink.put(chunk[i], requests[i], generation)
            else:
                generations = backend.generate(requests, params)
                for item, request, generation in zip(chunk, requests, generations):
                    sink.put(item, request, generation)
            timings["generation_s"] += time.time() - t0
    finally:
        try:
            sink.close()  # grades and writes every sample already generated, Ctrl-C or not
        finally:
            meter.close()
            backend.close()
    for key in ("generation_s", "grading_s"):
        timings[key] = round(timings[key], 2)
    if timings["generation_s"]:
        timings["tokens_per_s"] = round(timings["tokens_generated"] / timings["generation_s"], 1)
        timings["samples_per_s"] = round(
            timings["samples_generated"] / (timings["generation_s"] + timings["grading_s"]), 3
        )


def accepts_callbacks(backend: Any) -> bool:
    """Does ``backend.generate`` report samples as they finish (``on_sample`` / ``on_tokens``)?"""
    try:
        parameters = inspect.signature(backend.generate).parameters
    except (TypeError, ValueError):
        return False
    return "on_sample" in parameters and "on_tokens" in parameters


def summarize_run(
    cfg: EvalConfig,
    runs: list[BenchmarkRun],
    template: Template,
    grader: EvalGrader,
    model: dict[str, Any],
    run_dir: Path,
    timings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``summary.json`` from every sample on disk for the selected problems."""
    rows = read_samples(run_dir)
    backend = backend_spec(cfg.backend)
    sampling = {
        "n": cfg.n,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        "max_model_len": cfg.max_model_len,
    }
    protocol = protocol_fields(
        template.identity(), sampling, backend.describe(cfg.dtype, cfg.device), grader.settings()
    )
    revisions = {run.name: data_revision(run.problems) for run in runs}
    prints = fingerprints(protocol, revisions)
    problems = {p.id: p for run in runs for p in run.problems}
    benchmarks = {}
    for run in runs:
        ids = {p.id for p in run.problems}
        mine = [r for r in rows if r["id"] in ids and r["sample_idx"] < cfg.n]
        metrics = benchmark_metrics(
            run.kind,
            [p.id for p in run.problems],
            mine,
            lambda pid, a, b: grader.same_answer(problems[pid], a, b),
            cfg.pass_k,
            cfg.max_tokens,
        )
        metrics.update(kind=run.kind, data_revision=revisions[run.name], fingerprint=prints["per_benchmark"][run.name])
        metrics["n_problems_total"] = max(run.total, len(run.problems))
        if run.notes:
            metrics["notes"] = run.notes
        benchmarks[run.name] = metrics
    return {
        "summary_version": 1,
        "run": run_dir.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "fingerprint": prints["fingerprint"],
        "protocol_fingerprint": prints["protocol_fingerprint"],
        "protocol": protocol,
        "model": model,
        "versions": versions(backend.packages),
        "hardware": hardware(),
        "timings": timings or {},
        "config": cfg.scored_settings() | {"limit": cfg.limit, "out": str(run_dir)},
        "benchmarks": benchmarks,
    }


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    print(format_table(summary))
    print(
        f"\nmodel {summary['model']['name']}  template {summary['protocol']['template']['name']}  fingerprint "
        f"{summary['fingerprint']}  -> {run_dir}"
    )
