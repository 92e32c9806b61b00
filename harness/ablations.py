"""Ablations as ordinary evaluation runs: one run directory per (model, template) cell plus a
manifest, so every cell resumes, re-grades and enters leaderboards like any `rlvr eval` run.

* ``templates`` — Dr. GRPO's Table 1 (Liu et al. 2025, Sec. 2.2): rows model x template, columns
  benchmarks + average, mean@n with 95% CIs, the best template per model marked.
* ``prior`` — the base-model prior (Sec. 2.1 and App. D): answer-format rate per template, the
  pass@k curve for k = 1..n, self-reflection keyword rates, response lengths for correct vs
  incorrect answers; for a second model (e.g. after RL) side by side, with the paired gain.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.eval_config import EvalConfig
from rlvr.harness.metrics import macro_average, paired_difference
from rlvr.harness.report_format import benchmark_label, markdown_table, percent, percent_ci
from rlvr.harness.results import read_samples, write_json

TEMPLATES_DEFAULT = "qwen_math,r1,no_template,fewshot,chat"
PRIOR_TEMPLATES_DEFAULT = "qwen_math,r1,no_template"


def _slug(text: str) -> str:
    """A directory-name form of a model or template (a local path contributes its last part)."""
    name = Path(text).name if Path(text).exists() else text.replace("/", "_")
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", name)


def run_cells(base: EvalConfig, models: list[str | None], templates: list[str], folder: Path) -> list[dict[str, Any]]:
    """Evaluate every (model, template) cell under ``folder`` (resuming finished cells)."""
    from rlvr.harness.evaluate import print_summary, run_eval

    cells = []
    for model in models:
        for template in templates:
            out = folder / f"{_slug(model or 'smollm2-135m-instruct')}-{_slug(Path(template).stem)}"
            cfg = dataclasses.replace(base, model=model, template=template, out=str(out))
            print(f"\n== {cfg.model or 'embedded model'} x {template} -> {out}")
            summary = run_eval(cfg)
            print_summary(summary, out)
            cells.append(
                {
                    "model": summary["model"]["name"],
                    "template": Path(template).stem,
                    "run": out.name,
                    "summary": summary,
                }
            )
    return cells


def _outcomes(run_dir: Path, benchmark: str) -> dict[str, list[float]]:
    per: dict[str, list[float]] = defaultdict(list)
    for row in read_samples(run_dir):
        if row["benchmark"] == benchmark:
            per[row["id"]].append(1.0 if row["correct"] else 0.0)
    return per


def _manifest(
    kind: str, base: EvalConfig, cells: list[dict[str, Any]], folder: Path, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    manifest = {
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmarks": list(base.benchmarks),
        "base_config": {k: v for k, v in dataclasses.asdict(base).items() if k not in ("model", "template", "out")},
        "cells": [
            {
                "model": c["model"],
                "template": c["template"],
                "run": c["run"],
                "fingerprint": c["summary"]["fingerprint"],
            }
            for c in cells
        ],
        **(extra or {}),
    }
    write_json(folder / "manifest.json", manifest)
    return manifest


def template_table(cells: list[dict[str, Any]], folder: Path, benchmarks: list[str]) -> dict[str, Any]:
    """Rows model x template; columns benchmarks + Avg; the best template per model marked."""
    rows = []
    for cell in cells:
        benches = cell["summary"]["benchmarks"]
        names = [b for b in benchmarks if b in benches] or list(benches)
        outcomes = [list(_outcomes(folder / cell["run"], b).values()) for b in names]
        rows.append(
            {
                "model": cell["model"],
                "template": cell["template"],
                "run": cell["run"],
                "cells": {b: benches[b]["mean_at_n"] for b in names},
                "average": macro_average(outcomes),
            }
        )
    for model in {r["model"] for r in rows}:
        mine = [r for r in rows if r["model"] == model and r["average"]["value"] is not None]
        if mine:
            best = max(r["average"]["value"] for r in mine)
            for r in mine:
                r["best"] = r["average"]["value"] == best
    first = cells[0]["summary"] if cells else {}
    labels = {b: benchmark_label(b, first["benchmarks"][b], first) for b in (rows[0]["cells"] if rows else [])}
    return {"benchmarks": list(rows[0]["cells"]) if rows else [], "labels": labels, "rows": rows}


def format_template_table(table: dict[str, Any]) -> str:
    names = table["benchmarks"]
    rows, previous = [], None
    for r in table["rows"]:
        mark = " **(best)**" if r.get("best") else ""
        rows.append(
            [
                r["model"] if r["model"] != previous else "",
                f"[{r['template']}]({r['run']}/summary.json){mark}",
                *[percent_ci(r["cells"].get(b)) for b in names],
                percent_ci(r["average"]),
            ]
        )
        previous = r["model"]
    labels = table.get("labels") or {}
    return markdown_table(["Model", "Template", *[labels.get(b, b) for b in names], "Avg"], rows)


def ablate_templates(
    base: EvalConfig, models: list[str | None], templates: list[str], results: Path, name: str | None = None
) -> dict[str, Any]:
    if not templates:
        raise UserError("--templates is empty; e.g. --templates qwen_math,r1,no_template,fewshot,chat")
    folder = results / (name or f"ablate-templates-{_slug(models[0] or 'smollm2-135m-instruct')}")
    folder.mkdir(parents=True, exist_ok=True)
    cells = run_cells(base, models, templates, folder)
    table = template_table(cells, folder, list(base.benchmarks))
    _manifest("templates", base, cells, folder, {"templates": templates, "table": table})
    text = format_template_table(table)
    protocol = cells[0]["summary"]["protocol"]["sampling"]
    header = (
        f"# Template ablation\n\nmean@n in % with 95% bootstrap CIs; n={protocol['n']}, "
        f"temperature={protocol['temperature']}, "
        f"max_tokens={protocol['max_tokens']}, seed={protocol['seed']}. Avg = mean over benchmarks. Each template "
        "links to its run.\n\n"
    )
    (folder / "table.md").write_text(header + text + "\n", encoding="utf-8")
    _write_csv(folder / "table.csv", table)
    return {"folder": str(folder), "table": table, "markdown": text}


def _write_csv(path: Path, table: dict[str, Any]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["model", "template", "benchmark", "mean_at_n", "ci95_lo", "ci95_hi", "best_template", "run"])
    for r in table["rows"]:
        for bench, metric in [*r["cells"].items(), ("average", r["average"])]:
            lo, hi = metric["ci95"] or (None, None)
            writer.writerow([r["model"], r["template"], bench, metric["value"], lo, hi, bool(r.get("best")), r["run"]])
    path.write_text(buf.getvalue(), encoding="utf-8")


# ---- the base-model prior ---------------------------------------------------------------------
def prior_report(cells: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """Per model, template and benchmark: the prior statistics; per template and benchmark, the
    paired gain of the second model over the first."""
    report: dict[str, Any] = {"models": [], "cells": [], "gains": []}
    for cell in cells:
        if cell["model"] not in report["models"]:
            report["models"].append(cell["model"])
        for bench, m in cell["summary"]["benchmarks"].items():
            report["cells"].append(
                {
                    "model": cell["model"],
                    "template": cell["template"],
                    "benchmark": bench,
                    "label": benchmark_label(bench, m, cell["summary"]),
                    "run": cell["run"],
                    "answer_rate": m.get("answer_rate"),
                    "pass_at_k": {k: v["value"] for k, v in m["pass_at_k"].items()},
                    "mean_at_n": m["mean_at_n"],
                    "reflection": m.get("reflection"),
                    "length": m["length"],
                    "length_histogram": m.get("length_histogram"),
                    "truncation_rate": m["truncation_rate"],
                }
            )
    if len(report["models"]) == 2:
        first, second = report["models"]
        for template in dict.fromkeys(c["template"] for c in cells):
            a = next(c for c in cells if c["model"] == first and c["template"] == template)
            b = next(c for c in cells if c["model"] == second and c["template"] == template)
            for bench in a["summary"]["benchmarks"]:
                oa, ob = _outcomes(folder / a["run"], bench), _outcomes(folder / b["run"], bench)
                shared = sorted(set(oa) & set(ob))
                if shared:
                    gain = paired_difference([oa[p] for p in shared], [ob[p] for p in shared])
                    report["gains"].append({"template": template, "benchmark": bench, **gain})
    return report


def format_prior(report: dict[str, Any]) -> str:
    header = [
        "Model",
        "Template",
        "Benchmark",
        "answer rate",
        "pass@1",
        "pass@n",
        "mean@n [95% CI]",
        "Dr. GRPO reflection",
        "recheck",
        "hesitation",
        "exploration",
        "len correct / wrong",
        "trunc",
    ]
    rows = []
    for c in report["cells"]:
        ks = sorted(c["pass_at_k"], key=int)
        refl = c["reflection"] or {}
        lengths = f"{c['length']['correct']['mean'] or '-'} / {c['length']['incorrect']['mean'] or '-'}"
        rows.append(
            [
                c["model"],
                f"[{c['template']}]({c['run']}/summary.json)",
                c.get("label", c["benchmark"]),
                percent(c["answer_rate"]),
                percent(c["pass_at_k"].get("1")),
                f"{percent(c['pass_at_k'][ks[-1]]) if ks else '-'} (n={ks[-1] if ks else '-'})",
                percent_ci(c["mean_at_n"]),
                percent(refl.get("drgrpo")),
                percent(refl.get("recheck")),
                percent(refl.get("hesitation")),
                percent(refl.get("exploration")),
                lengths,
                percent(c["truncation_rate"]),
            ]
        )
    lines = [markdown_table(header, rows)]
    if report["gains"]:
        a, b = report["models"]
        lines += [
            "",
            f"Gain of {b} over {a} (mean@n, points, paired over the same problems):",
            "",
            markdown_table(
                ["Template", "Benchmark", "B - A [95% CI]", "problems B better / A better"],
                [
                    [g["template"], g["benchmark"], percent_ci(g, signed=True), f"{g['b_better']} / {g['a_better']}"]
                    for g in report["gains"]
                ],
            ),
        ]
    return "\n".join(lines)


def prior_figure(report: dict[str, Any], path: Path) -> None:
    """Top: pass@k curves per model x template. Bottom: response lengths of correct (solid) and
    incorrect (dotted) answers per model, summed over templates. One column per benchmark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(dict.fromkeys(c["benchmark"] for c in report["cells"]))
    fig, axes = plt.subplots(2, len(benches), figsize=(5.5 * len(benches), 7.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, bench in enumerate(benches):
        cells = [c for c in report["cells"] if c["benchmark"] == bench]
        for i, c in enumerate(cells):
            ks = sorted(c["pass_at_k"], key=int)
            style = "-" if c["model"] == report["models"][0] else "--"
            axes[0][col].plot(
                [int(k) for k in ks],
                [100 * c["pass_at_k"][k] for k in ks],
                style,
                marker="o",
                color=colors[i % len(colors)],
                label=f"{c['model']} / {c['template']}",
            )
        axes[0][col].set(title=f"{bench}: pass@k", xlabel="k", ylabel="pass@k (%)")
        axes[0][col].xaxis.get_major_locator().set_params(integer=True)
        axes[0][col].legend(fontsize=7)
        for m, model in enumerate(report["models"]):
            hists = [c["length_histogram"] for c in cells if c["model"] == model and c["length_histogram"]]
            if not hists:
                continue
            edges = hists[0]["edges"]
            centers = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
            for key, style in (("correct", "-"), ("incorrect", ":")):
                counts = [sum(h[key][i] for h in hists) for i in range(len(centers))]
                axes[1][col].step(
                    centers, counts, style, where="mid", color=colors[m % len(colors)], label=f"{model} {key}"
                )
        axes[1][col].set(title=f"{bench}: response length (all templates)", xlabel="tokens", ylabel="responses")
        axes[1][col].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def ablate_prior(
    base: EvalConfig, models: list[str | None], templates: list[str], results: Path, name: str | None = None
) -> dict[str, Any]:
    if len(models) > 2:
        raise UserError("the prior report compares at most two models (--model and --compare-model)")
    slug = "-vs-".join(_slug(m or "smollm2-135m-instruct") for m in models)
    folder = results / (name or f"ablate-prior-{slug}")
    folder.mkdir(parents=True, exist_ok=True)
    cells = run_cells(base, models, templates, folder)
    report = prior_report(cells, folder)
    _manifest("prior", base, cells, folder, {"templates": templates, "models": report["models"]})
    write_json(folder / "prior.json", report)
    prior_figure(report, folder / "prior.svg")
    text = format_prior(report)
    sampling = cells[0]["summary"]["protocol"]["sampling"]
    header = (
        f"# Base-model prior\n\nn={sampling['n']} samples per problem at temperature {sampling['temperature']}, "
        f"max_tokens={sampling['max_tokens']}. "
        "answer rate = responses with an extractable answer; reflection columns = share of responses with a keyword "
        "hit "
        "(Dr. GRPO's list; recheck/hesitation/exploration are our reconstruction of SRPO's categories). Figure: "
        "[prior.svg](prior.svg).\n\n"
    )
    (folder / "prior.md").write_text(header + text + "\n", encoding="utf-8")
    return {"folder": str(folder), "report": report, "markdown": text}
