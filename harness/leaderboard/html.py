"""``index.html``: one self-contained page (inline CSS, JS and SVG; no network) with a sortable
table per protocol, each row linked to its run, and the standard plots."""

from __future__ import annotations

import html
import json
from typing import Any

from rlvr.harness.leaderboard.samples_page import anchor
from rlvr.harness.leaderboard.tables import Table, cell_text, protocol_values
from rlvr.harness.report_format import percent

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem; color: #1f2328; max-width: 1400px; }
h1 { margin-bottom: 0.2rem; } .note { color: #57606a; font-size: 0.9rem; }
a.permalink { color: #8c959f; text-decoration: none; font-weight: normal; } a.permalink:hover { color: #0969da; }
table.board { border-collapse: collapse; margin: 0.8rem 0 2rem; font-size: 0.9rem; }
table.board th, table.board td { border: 1px solid #d0d7de; padding: 0.35rem 0.6rem; text-align: right;
  vertical-align: top; }
table.board th { background: #f6f8fa; cursor: pointer; user-select: none; white-space: nowrap; }
table.board th.sorted-asc::after { content: " \\25B2"; } table.board th.sorted-desc::after { content: " \\25BC"; }
table.board td.text, table.board th.text { text-align: left; }
details { font-size: 0.8rem; color: #57606a; } details pre { white-space: pre-wrap; max-width: 40rem; }
.ci { color: #57606a; font-size: 0.8rem; } .incomplete { color: #9a6700; }
figure { margin: 1rem 0 2rem; } figure svg { max-width: 100%; height: auto; }
"""

SCRIPT = """
document.querySelectorAll('table.board').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, index) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var desc = !th.classList.contains('sorted-desc');
      table.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');
      rows.sort(function (a, b) {
        var x = a.cells[index].getAttribute('data-sort'), y = b.cells[index].getAttribute('data-sort');
        var nx = parseFloat(x), ny = parseFloat(y);
        var cmp = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
        if (isNaN(nx) && !isNaN(ny)) cmp = 1; else if (!isNaN(nx) && isNaN(ny)) cmp = -1;
        return desc ? -cmp : cmp;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _sort_value(bench: dict[str, Any] | None) -> str:
    value = (bench or {}).get("mean_at_n", {}).get("value")
    return "" if value is None else f"{value:.6f}"


def _run_details(row: dict[str, Any], link_prefix: str) -> str:
    s = row["summary"]
    info = {
        "fingerprint": s["fingerprint"],
        "protocol_fingerprint": s["protocol_fingerprint"],
        "model": s["model"],
        "versions": s.get("versions"),
        "timings": s.get("timings"),
    }
    link = html.escape(f"{link_prefix}{row['link']}")
    return (
        f"<details><summary>run {html.escape(row['run'])}</summary>"
        f'<a href="{link}/summary.json">summary.json</a> · <a href="{link}/config.yaml">config.yaml</a>'
        f"<pre>{html.escape(json.dumps(info, indent=1))}</pre></details>"
    )


def table_anchor(table: Table) -> str:
    """The table's permalink id: its protocol key, so a link survives rebuilds and reordering."""
    return "protocol-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in table.key)


def table_html(table: Table, index: int, link_prefix: str, pages: dict[str, str] | None = None) -> str:
    """One protocol's table; each cell links to its samples (``pages``: run link -> samples page)."""
    pages = pages or {}
    head = ['<th class="text">#</th>', '<th class="text">model</th>']
    head += [f'<th class="text">{html.escape(k)}</th>' for k in table.differing]
    head += [f"<th>{html.escape(label)}</th>" for label, _ in table.columns]
    head.append("<th>average</th>")
    body = []
    for row in table.rows:
        cells = [
            f'<td class="text" data-sort="{row["rank"]}">{row["rank"]}</td>',
            f'<td class="text" data-sort="{html.escape(row["model"])}"><strong>{html.escape(row["model"])}</strong>'
            f"{_run_details(row, link_prefix)}</td>",
        ]
        flat = protocol_values(row["summary"])
        cells += [
            f'<td class="text" data-sort="{html.escape(str(flat.get(k)))}">{html.escape(str(flat.get(k)))}</td>'
            for k in table.differing
        ]
        for label, bench_name in table.columns:
            bench = row["cells"].get(label)
            text = cell_text(bench)
            main, _, rest = text.partition(" [")
            shown = html.escape(main) + (f' <span class="ci">[{html.escape(rest)}</span>' if rest else "")
            page = pages.get(row["link"])
            if bench is not None and page:
                target = html.escape(f"{page}#{anchor(bench_name)}")
                shown = f'<a href="{target}" title="the samples behind this number">{shown}</a>'
            cells.append(f'<td data-sort="{_sort_value(bench)}">{shown}</td>')
        average = row["average"]
        css = "" if row["complete"] else ' class="incomplete" title="not every benchmark evaluated"'
        cells.append(f'<td data-sort="{"" if average is None else f"{average:.6f}"}"{css}>{percent(average)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<h2 id="{table_anchor(table)}">{html.escape(table.title.replace("`", ""))} '
        f'<a class="permalink" href="#{table_anchor(table)}" title="link to this table">#</a></h2>'
        f'<p class="note">{html.escape(table.description.replace("`", ""))}</p>'
        '<table class="board" '
        f'id="board-{index}"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def render_page(
    tables: list[Table],
    plots: list[tuple[str, str, str]],
    generated: str,
    link_prefix: str,
    notes: list[str],
    pages: dict[str, str] | None = None,
) -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rlvr leaderboard</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>rlvr leaderboard</h1>",
        f"<p class='note'>Generated {html.escape(generated)} from run summaries. Cells: mean@n in % with the 95% "
        "bootstrap CI "
        "(problems and samples resampled), pass@n where n &gt; 1. One table per protocol fingerprint: numbers in "
        "different tables "
        "were produced under different templates, sampling, engines or verifiers and are not ranked together. Click a "
        "column to sort. Each table's heading links to it (#).</p>",
        "<p class='note'>Download every number: <a href='leaderboard.csv' download>leaderboard.csv</a> · "
        "<a href='leaderboard.parquet' download>leaderboard.parquet</a> (every summary field, one row per run x "
        "benchmark)</p>",
    ]
    parts += [f"<p class='note'>{html.escape(n)}</p>" for n in notes]
    if pages:
        parts.append(
            "<p class='note'>Click a score to see the samples behind it (prompt, completion, extracted answer, gold, "
            "verdict); a run that did not keep its samples.jsonl has no link.</p>"
        )
    parts += [table_html(t, i, link_prefix, pages) for i, t in enumerate(tables)]
    if plots:
        parts.append("<h2>Plots</h2>")
        parts += [
            f'<figure id="plot-{pid}"><figcaption><strong>{html.escape(title)}</strong></figcaption>{svg}</figure>'
            for pid, title, svg in plots
        ]
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)
