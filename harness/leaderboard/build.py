"""``rlvr leaderboard``: README.md, leaderboard.csv and index.html from a directory of runs."""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.leaderboard.html import render_page
from harness.leaderboard.plots import all_plots
from harness.leaderboard.tables import Table, build_tables, cell_text, collect_runs, describe_protocol, protocol_values
from harness.report_format import markdown_table, percent
from harness.results import load_summaries

CSV_FIELDS = [
    "table",
    "protocol_fingerprint",
    "rank",
    "model",
    "run",
    "benchmark",
    "mean_at_n",
    "ci95_lo",
    "ci95_hi",
    "pass_at_k",
    "k",
    "n_problems",
    "n_samples",
    "truncation_rate",
    "no_answer_rate",
    "timeout_rate",
    "benchmark_fingerprint",
    "template",
    "n",
    "temperature",
    "max_tokens",
    "backend",
    "dtype",
    "math_verifier",
    "code_verifier",
    "run_path",
]


def markdown(tables: list[Table], link_prefix: str, generated: str, notes: list[str]) -> str:
    lines = [
        "# Leaderboard",
        "",
        f"Generated {generated} by `rlvr leaderboard` from run summaries. Cells: mean@n in % with its 95% bootstrap CI "
        "(problems and samples resampled), and pass@n where n > 1. One table per protocol fingerprint; numbers in "
        "different "
        "tables were produced under different protocols and are not ranked together. Each model links to its run "
        "(`summary.json`: fingerprint, versions, timings; `config.yaml`: the resolved settings). Plots: "
        "[index.html](index.html).",
        "",
    ]
    lines += [f"_{n}_" for n in notes]
    for table in tables:
        lines += ["", f"## Protocol `{table.key}`", "", describe_protocol(table.protocol), ""]
        head = ["#", "Model", *table.differing, *[label for label, _ in table.columns], "Avg"]
        rows = []
        for row in table.rows:
            values = protocol_values(row["summary"])
            model = f"[{row['model']}]({link_prefix}{row['link']}/summary.json)"
            average = percent(row["average"]) + ("" if row["complete"] else " (partial)")
            rows.append(
                [
                    row["rank"],
                    model,
                    *[values.get(k) for k in table.differing],
                    *[cell_text(row["cells"].get(label)) for label, _ in table.columns],
                    average,
                ]
            )
        lines.append(markdown_table(head, rows))
    return "\n".join(lines) + "\n"


def csv_text(tables: list[Table], link_prefix: str) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for index, table in enumerate(tables):
        for row in table.rows:
            values = protocol_values(row["summary"])
            for label, _ in table.columns:
                bench = row["cells"].get(label)
                if not bench:
                    continue
                ks = sorted(bench.get("pass_at_k") or {}, key=int)
                ci = bench["mean_at_n"]["ci95"] or [None, None]
                writer.writerow(
                    {
                        "table": index,
                        "protocol_fingerprint": row["summary"]["protocol_fingerprint"],
                        "rank": row["rank"],
                        "model": row["model"],
                        "run": row["run"],
                        "benchmark": label,
                        "mean_at_n": bench["mean_at_n"]["value"],
                        "ci95_lo": ci[0],
                        "ci95_hi": ci[1],
                        "pass_at_k": bench["pass_at_k"][ks[-1]]["value"] if ks else None,
                        "k": ks[-1] if ks else None,
                        "n_problems": bench["n_problems"],
                        "n_samples": bench["n_samples"],
                        "truncation_rate": bench["truncation_rate"],
                        "no_answer_rate": bench["no_answer_rate"],
                        "timeout_rate": bench["timeout_rate"],
                        "benchmark_fingerprint": bench.get("fingerprint"),
                        "template": values["template"],
                        "n": values["n"],
                        "temperature": values["temperature"],
                        "max_tokens": values["max_tokens"],
                        "backend": values["backend"],
                        "dtype": values["dtype"],
                        "math_verifier": values["math verifier"],
                        "code_verifier": values["code verifier"],
                        "run_path": f"{link_prefix}{row['link']}",
                    }
                )
    return buf.getvalue()


def build_leaderboard(results: Path, out: Path, mix: bool = False, plots: bool = True) -> dict[str, Any]:
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise UserError(f"results directory {results} does not exist; run `rlvr eval --out {results}/NAME` first")
    runs, notes = collect_runs(results)
    if not runs:
        raise UserError(f"no run summaries under {results}; `rlvr eval` writes one per run")
    out.mkdir(parents=True, exist_ok=True)
    tables = build_tables(runs, results, mix)
    link_prefix = os.path.relpath(results, out).replace(os.sep, "/") + "/"
    generated = time.strftime("%Y-%m-%d %H:%M %Z")
    (out / "README.md").write_text(markdown(tables, link_prefix, generated, notes), encoding="utf-8")
    (out / "leaderboard.csv").write_text(csv_text(tables, link_prefix), encoding="utf-8")
    # every summary field of every run x benchmark, for pandas / the hub (harness.results.load_summaries)
    frame = load_summaries([run.path for run in runs])
    frame["run_path"] = [os.path.relpath(p, out).replace(os.sep, "/") for p in frame["run_path"]]
    frame.to_parquet(out / "leaderboard.parquet", index=False)
    figures = all_plots(runs) if plots else []
    (out / "index.html").write_text(render_page(tables, figures, generated, link_prefix, notes), encoding="utf-8")
    return {"runs": len(runs), "tables": len(tables), "plots": [pid for pid, _, _ in figures], "out": str(out)}
