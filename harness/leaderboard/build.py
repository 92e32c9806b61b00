"""``rlvr leaderboard``: README.md, leaderboard.csv and index.html from a directory of runs."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.leaderboard.html import render_page
from rlvr.harness.leaderboard.plots import all_plots
from rlvr.harness.leaderboard.tables import Table, build_tables, cell_text, collect_runs, protocol_values
from rlvr.harness.report_format import markdown_table, percent
from rlvr.harness.results import summary_rows

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
        lines += ["", f"## {table.title}", "", table.description, ""]
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


#: leaderboard.csv's columns: the frame column each comes from (``load_summaries`` names).
CSV_SOURCES = {
    "mean_at_n": "mean_at_n.value",
    "ci95_lo": "mean_at_n.ci95_lo",
    "ci95_hi": "mean_at_n.ci95_hi",
    "benchmark_fingerprint": "benchmark_fingerprint",
    "template": "protocol.template.name",
    "n": "protocol.sampling.n",
    "temperature": "protocol.sampling.temperature",
    "max_tokens": "protocol.sampling.max_tokens",
    "backend": "protocol.backend.backend",
    "dtype": "protocol.backend.dtype",
    "math_verifier": "protocol.grading.math_verifier",
    "code_verifier": "protocol.grading.code_verifier",
}


def leaderboard_frame(tables: list[Table], link_prefix: str):
    """Every summary field of every ranked cell (``load_summaries``' columns, from the summaries the
    tables already hold), plus its table, rank, the model's display name, the column label, the
    run's link and pass@k at the largest k: leaderboard.parquet, and the source of leaderboard.csv."""
    import pandas

    rows = []
    for index, table in enumerate(tables):
        for row in table.rows:
            fields = {r["benchmark"]: r for r in summary_rows(row["summary"], row["path"])}
            for label, name in table.columns:
                bench = row["cells"].get(label)
                if bench is None:
                    continue
                ks = sorted(bench.get("pass_at_k") or {}, key=int)
                rows.append(
                    {
                        **fields[name],
                        "table": index,
                        "rank": row["rank"],
                        "display_model": row["model"],
                        "column": label,
                        "link": f"{link_prefix}{row['link']}",
                        "k": int(ks[-1]) if ks else None,
                        "pass_at_k": bench["pass_at_k"][ks[-1]]["value"] if ks else None,
                    }
                )
    return pandas.DataFrame(rows)


def csv_text(frame) -> str:
    """leaderboard.csv: the ranked cells, one row each, in the columns of ``CSV_FIELDS``."""
    out = frame.assign(
        model=frame["display_model"],
        benchmark=frame["column"],
        run_path=frame["link"],
        **{name: frame[source] for name, source in CSV_SOURCES.items() if source in frame.columns},
    )
    return out.reindex(columns=CSV_FIELDS).to_csv(index=False, lineterminator="\r\n")


#: The files a build writes, and a line each of them starts with (or holds) when a build wrote it.
OWN_FILES = {
    "README.md": "by `rlvr leaderboard`",
    "index.html": "<title>rlvr leaderboard</title>",
    "leaderboard.csv": "table,protocol_fingerprint,rank",
    "leaderboard.parquet": "",
}


def check_out(out: Path) -> Path:
    """``--out`` must be a directory (or creatable) and hold no file of ours' names that a build
    did not write: a leaderboard never replaces a user's README.md or index.html."""
    from rlvr.harness.paths import output_dir

    out = output_dir(out)
    for name, marker in OWN_FILES.items():
        path = out / name
        if path.is_dir():
            raise UserError(f"--out {out}: {name} there is a directory; choose another --out")
        if marker and path.exists():
            head = path.read_bytes()[:4096].decode("utf-8", errors="replace")
            if marker not in head:
                raise UserError(
                    f"--out {out} holds a {name} that `rlvr leaderboard` did not write; choose another --out "
                    "(a build only replaces its own files)"
                )
    return out


def write_sample_pages(tables: list[Table], out: Path) -> dict[str, str]:
    """``samples/<run>.html`` for every ranked run that kept its samples; run link -> page path
    (relative to ``out``). Pages of runs no longer on the board are removed (only ours)."""
    from rlvr.harness.leaderboard.samples_page import page_name, render_samples_page

    folder = out / "samples"
    pages: dict[str, str] = {}
    for table in tables:
        for row in table.rows:
            if row["link"] in pages:
                continue
            text = render_samples_page(row["path"], f"{row['model']} ({row['run']})", "../index.html")
            if text is None:
                continue
            folder.mkdir(exist_ok=True)
            name = page_name(row["link"])
            (folder / name).write_text(text, encoding="utf-8")
            pages[row["link"]] = f"samples/{name}"
    if folder.is_dir():
        kept = {Path(p).name for p in pages.values()}
        for old in folder.glob("*.html"):
            if old.name not in kept and "<title>samples of " in old.read_text(encoding="utf-8", errors="replace")[:400]:
                old.unlink()
    return pages


def build_leaderboard(
    results: Path, out: Path, mix: bool = False, plots: bool = True, sample_pages: bool = True
) -> dict[str, Any]:
    results, out = Path(results), check_out(Path(out))
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
    frame = leaderboard_frame(tables, link_prefix)
    (out / "leaderboard.csv").write_text(csv_text(frame), encoding="utf-8", newline="")
    # every summary field of every ranked cell, for pandas / the hub (rlvr.harness.results.load_summaries + rank)
    frame.assign(run_path=frame["link"]).drop(columns=["link"]).to_parquet(out / "leaderboard.parquet", index=False)
    figures = all_plots(runs) if plots else []
    pages = write_sample_pages(tables, out) if sample_pages else {}
    (out / "index.html").write_text(
        render_page(tables, figures, generated, link_prefix, notes, pages), encoding="utf-8"
    )
    return {
        "runs": len(runs),
        "tables": len(tables),
        "plots": [pid for pid, _, _ in figures],
        "out": str(out),
        "sample_pages": len(pages),
    }
