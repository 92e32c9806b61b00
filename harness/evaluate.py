"""``rlvr eval``: generate, grade with the sandbox verifiers, and log every sample as it finishes.

The run directory is the unit of work: the same command finds the samples already written and
generates only the rest, so a killed run loses at most the batch in flight. Everything that
changes scores is hashed into the protocol fingerprint (``harness.fingerprint``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import Backend, GenerationRequest, SamplingParams, sample_seed
from harness.benchmarks.custom import is_custom_source, load_custom, parse_fields
from harness.benchmarks.problems import Problem, data_revision, with_math_policy
from harness.benchmarks.registry import CODE_INSTRUCTION, MATH_INSTRUCTION, get_benchmark, load_problems
from harness.config import dump_config, read_yaml
from harness.errors import UserError
from harness.eval_config import EvalConfig
from harness.fingerprint import describe_backend, fingerprints, hardware, protocol_fields, versions
from harness.grading import EvalGrader
from harness.ray_eval import RayEngines
from harness.results import CONFIG, SUMMARY, SampleLog, read_samples, rewrite_samples, write_json
from harness.summary import benchmark_metrics, format_table
from harness.templates import Prompt, Template, load_template, pick_shots, render
from sandbox.version import CODE_VERIFIER, MATH_VERIFIER


@dataclass
class BenchmarkRun:
    name: str
    kind: str
    problems: list[Problem]
    instruction: str
    shot_pool: list[Problem] = field(default_factory=list)
    notes: str = ""


def select_benchmarks(cfg: EvalConfig, template: Template) -> list[BenchmarkRun]:
    runs = []
    for entry in cfg.benchmarks:
        if isinstance(entry, dict) or is_custom_source(str(entry)):
            spec = entry if isinstance(entry, dict) else {"path": entry}
            if "path" not in spec:
                raise UserError(f"benchmark entry {entry!r} needs a 'path' (a .jsonl/.parquet file or hf:NAME)")
            problems = load_custom(
                str(spec["path"]),
                parse_fields(spec.get("fields", cfg.fields)),
                spec.get("kind", cfg.kind),
                spec.get("policy", cfg.policy),
                spec.get("name"),
            )
            kinds = {p.kind for p in problems}
            kind = kinds.pop() if len(kinds) == 1 else "mixed"
            instruction = MATH_INSTRUCTION if kind == "math" else CODE_INSTRUCTION
            runs.append(
                BenchmarkRun(
                    problems[0].benchmark,
                    kind,
                    problems[: cfg.limit] if cfg.limit else problems,
                    instruction,
                    problems,
                    "local data",
                )
            )
            continue
        spec = get_benchmark(str(entry))
        pool = load_problems(spec.shots_from) if template.kind == "fewshot" and spec.shots_from else []
        if template.kind == "fewshot" and not pool:
            raise UserError(f"{spec.name} has no worked solutions for few-shot prompts; use another --template")
        problems = with_math_policy(load_problems(spec.name, cfg.limit), cfg.policy)
        runs.append(BenchmarkRun(spec.name, spec.kind, problems, spec.instruction, pool, spec.notes))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise UserError(f"benchmark listed twice: {names}")
    return runs


def build_prompt(template: Template, run: BenchmarkRun, problem: Problem) -> Prompt:
    shots = pick_shots(run.shot_pool, problem.id, template.shots) if template.kind == "fewshot" else ()
    return render(template, problem.question, run.instruction, shots)


def make_backend(cfg: EvalConfig, model_path: str) -> Backend:
    if cfg.backend == "hf":
        from harness.backends.hf import HFBackend

        return HFBackend(model_path, cfg.dtype, cfg.device, cfg.batch_size, cfg.max_model_len)
    if cfg.backend == "vllm":
        from harness.backends.vllm_engine import VLLMBackend

        return VLLMBackend(
            model_path,
            cfg.dtype,
            cfg.seed,
            cfg.max_model_len,
            cfg.gpu_memory_utilization,
            device=cfg.device,
            kv_cache_gb=cfg.kv_cache_gb,
        )
    from harness.backends.openai_api import OpenAIBackend

    return OpenAIBackend(model_path, cfg.base_url, os.environ.get(cfg.api_key_env), cfg.concurrency)


def preflight(cfg: EvalConfig) -> None:
    """Fail before writing anything when the backend cannot run here."""
    if cfg.backend == "vllm":
        from harness.backends.vllm_engine import require_vllm

        require_vllm(cfg.device)
    if cfg.backend == "openai" and not cfg.base_url:
        raise UserError("the openai backend needs --base-url (e.g. http://localhost:8000/v1)")


def resolve_run_model(cfg: EvalConfig) -> dict[str, Any]:
    """``{name, path, weights_hash}``; remote models are named, not hashed."""
    if cfg.backend == "openai":
        if not cfg.model:
            raise UserError("the openai backend needs --model NAME (the model id the server serves)")
        return {"name": cfg.model, "path": cfg.model, "weights_hash": None}
    from harness.models import resolve_model, weights_hash

    path, name = resolve_model(cfg.model)
    return {"name": name, "path": path, "weights_hash": weights_hash(path)}


def check_resume(run_dir: Path, cfg: EvalConfig) -> None:
    """A run directory only resumes the same protocol and model; say which setting differs."""
    path = run_dir / CONFIG
    if not path.exists():
        return
    old = EvalConfig(**read_yaml(path)).scored_settings()
    new = cfg.scored_settings()
    differing = sorted(k for k in new if old.get(k) != new[k])
    if differing:
        detail = ", ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in differing[:4])
        raise UserError(f"{run_dir} holds a run with other settings ({detail}); pass a new --out")


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


def _chunk_size(cfg: EvalConfig) -> int:
    return {"hf": cfg.batch_size, "vllm": max(256, cfg.batch_size), "openai": 4 * cfg.concurrency}[cfg.backend]


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="sample", dynamic_ncols=True, disable=not enabled or total == 0, desc="eval")


def run_eval(cfg: EvalConfig, engine: Backend | None = None) -> dict[str, Any]:
    """Evaluate ``cfg``; ``engine`` is a live backend to generate with instead of loading the model
    (a trainer's synced vLLM engine: its weights must be those of ``cfg.model``)."""
    started = time.time()
    if cfg.model is None and cfg.backend != "openai":
        from harness.models import EMBEDDED_NAME

        cfg.model = EMBEDDED_NAME  # recorded by name, so config.yaml says what ran
    template = load_template(cfg.template, cfg.shots)
    runs = select_benchmarks(cfg, template)
    run_dir = cfg.run_dir()
    check_resume(run_dir, cfg)
    preflight(cfg)
    model = resolve_run_model(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, run_dir / CONFIG)
    stored = read_samples(run_dir, repair=True)
    done = {(r["id"], r["sample_idx"]) for r in stored}
    todo = [(run, p, j) for run in runs for p in run.problems for j in range(cfg.n) if (p.id, j) not in done]
    grader = EvalGrader(cfg.workers, cfg.math_timeout, cfg.code_limits, test_details=cfg.test_details)
    try:
        refresh_stale_verdicts(run_dir, stored, {p.id: p for run in runs for p in run.problems}, grader)
    except BaseException:
        grader.close()
        raise
    timings = {
        "model_load_s": 0.0,
        "generation_s": 0.0,
        "grading_s": 0.0,
        "samples_generated": len(todo),
        "samples_resumed": len(done),
        "tokens_generated": 0,
    }
    try:
        if todo:
            _generate_and_grade(cfg, template, todo, model, grader, run_dir, timings, engine)
        timings["total_s"] = round(time.time() - started, 2)
        summary = summarize_run(cfg, runs, template, grader, model, run_dir, timings)
    finally:
        grader.close()
    write_json(run_dir / SUMMARY, summary)
    return summary


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
    if cfg.temperature == 0 and cfg.n > 1:
        print(
            f"note: greedy decoding (--temperature 0) with --n {cfg.n} repeats the same sample; set --temperature for "
            "pass@k"
        )
    t0 = time.time()
    backend: Any = engine or (RayEngines(cfg, model["path"]) if cfg.ray else make_backend(cfg, model["path"]))
    timings["model_load_s"] = round(time.time() - t0, 2)
    params = SamplingParams(cfg.temperature, cfg.top_p, cfg.max_tokens, template.stop, template.include_stop)
    prompts: dict[str, Prompt] = {}
    size = _chunk_size(cfg)
    chunks = [todo[start : start + size] for start in range(0, len(todo), size)]
    request_chunks = []
    for chunk in chunks:
        requests = []
        for run, problem, j in chunk:
            if problem.id not in prompts:
                prompts[problem.id] = build_prompt(template, run, problem)
            requests.append(GenerationRequest(prompts[problem.id], sample_seed(cfg.seed, problem.id, j)))
        request_chunks.append(requests)
    if cfg.ray:
        generated = backend.generate_chunks(request_chunks, params)
    else:
        generated = (backend.generate(requests, params) for requests in request_chunks)
    log = SampleLog(run_dir)
    progress = _progress(len(todo), cfg.progress)
    correct = 0
    seen = 0
    try:
        for chunk, requests in zip(chunks, request_chunks):
            t0 = time.time()
            generations = next(generated)
            timings["generation_s"] += time.time() - t0
            t0 = time.time()
            verdicts = grader.grade([(problem, g.text) for (_, problem, _), g in zip(chunk, generations)])
            timings["grading_s"] += time.time() - t0
            records = []
            for (run, problem, j), request, g, v in zip(chunk, requests, generations, verdicts):
                records.append(sample_record(run.name, problem, j, request.seed, template, g, v))
                timings["tokens_generated"] += g.n_tokens or 0
            log.write(records)
            seen += len(records)
            correct += sum(1 for r in records if r["correct"])
            progress.update(len(records))
            progress.set_postfix(acc=f"{correct / seen:.3f}", refresh=False)
    finally:
        progress.close()
        log.close()
        backend.close()
    for key in ("generation_s", "grading_s"):
        timings[key] = round(timings[key], 2)
    if timings["generation_s"]:
        timings["tokens_per_s"] = round(timings["tokens_generated"] / timings["generation_s"], 1)
        timings["samples_per_s"] = round(
            timings["samples_generated"] / (timings["generation_s"] + timings["grading_s"]), 3
        )


def sample_record(
    benchmark: str, problem: Problem, sample_idx: int, seed: int, template: Template, generation: Any, verdict: Any
) -> dict[str, Any]:
    return {
        "id": problem.id,
        "benchmark": benchmark,
        "sample_idx": sample_idx,
        "seed": seed,
        "template": template.name,
        "prompt": generation.prompt,
        "completion": generation.text,
        "extracted": verdict.extracted,
        "correct": bool(verdict.correct),
        "reward": verdict.reward,
        "reason": verdict.reason,
        "detail": verdict.detail,
        "finish_reason": generation.finish_reason,
        "n_tokens": generation.n_tokens,
        "n_prompt_tokens": generation.n_prompt_tokens,
        "verifier": verdict.verifier,
    }


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
    sampling = {
        "n": cfg.n,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        "max_model_len": cfg.max_model_len,
    }
    protocol = protocol_fields(
        template.identity(), sampling, describe_backend(cfg.backend, cfg.dtype, cfg.device), grader.settings()
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
        "versions": versions(("vllm",) if cfg.backend == "vllm" else ("httpx",) if cfg.backend == "openai" else ()),
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
