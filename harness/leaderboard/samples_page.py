"""``samples/<run>.html``: one self-contained page per run that kept its samples, linked from each
leaderboard cell: every sample with its verdict, extracted answer, gold, prompt and completion,
grouped by benchmark (``#<benchmark>`` anchors), filterable by verdict and text in the browser."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from rlvr.harness.show import load_run

#: Longest completion / prompt shown on the page (the run's samples.jsonl has them whole).
MAX_CHARS = 6000

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem; color: #1f2328; max-width: 1200px; }
.note { color: #57606a; font-size: 0.9rem; } .ok { color: #1a7f37; } .bad { color: #cf222e; }
details.sample { border: 1px solid #d0d7de; border-radius: 6px; margin: 0.3rem 0; padding: 0.3rem 0.6rem; }
details.sample summary { cursor: pointer; } pre { white-space: pre-wrap; background: #f6f8fa; padding: 0.5rem; }
.controls { position: sticky; top: 0; background: white; padding: 0.5rem 0; border-bottom: 1px solid #d0d7de; }
"""

SCRIPT = """
function applyFilter() {
  var verdict = document.getElementById('verdict').value;
  var text = document.getElementById('text').value.toLowerCase();
  var shown = 0;
  document.querySelectorAll('details.sample').forEach(function (el) {
    var ok = (verdict === 'all' || el.dataset.verdict === verdict) &&
             (!text || el.textContent.toLowerCase().indexOf(text) !== -1);
    el.style.display = ok ? '' : 'none';
    if (ok) shown += 1;
  });
  document.getElementById('count').textContent = shown + ' shown';
}
"""


def page_name(run_link: str) -> str:
    """A file name for a run's page from its path relative to the results folder."""
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", run_link).strip("_") + ".html"


def _clip(text: Any) -> str:
    if isinstance(text, list):
        text = "\n".join(f"[{m.get('role')}] {m.get('content')}" if isinstance(m, dict) else str(m) for m in text)
    text = "" if text is None else str(text)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n[... {len(text) - MAX_CHARS} more characters in samples.jsonl]"
    return html.escape(text)


def _sample(s: dict[str, Any]) -> str:
    ok = bool(s.get("correct"))
    mark = (
        '<span class="ok">&#10003; correct</span>'
        if ok
        else f'<span class="bad">&#10007; {html.escape(str(s.get("reason")))}</span>'
    )
    cut = " · cut at the token budget" if s.get("finish_reason") == "length" else ""
    gold = html.escape(str(s.get("gold") if s.get("gold") is not None else "?"))
    summary = (
        f"{html.escape(str(s.get('id')))} · sample {s.get('sample_idx')} · {mark} · extracted "
        f"<code>{html.escape(str(s.get('extracted')))}</code> · gold <code>{gold}</code>"
        f" · {s.get('n_tokens')} tokens{cut}"
    )
    detail = f"<p class='note'>detail: {html.escape(str(s.get('detail')))}</p>" if s.get("detail") else ""
    return (
        f'<details class="sample" data-verdict="{"correct" if ok else "wrong"}"><summary>{summary}</summary>'
        f"<p class='note'>prompt</p><pre>{_clip(s.get('prompt'))}</pre>"
        f"<p class='note'>completion</p><pre>{_clip(s.get('completion'))}</pre>{detail}</details>"
    )


def render_samples_page(run_dir: Path, title: str, back: str) -> str | None:
    """The page of one run, or None when the run kept no samples."""
    try:
        view = load_run(run_dir)
    except Exception:  # summary-only runs (samples not kept) get no page
        return None
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>samples of {html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<p class='note'><a href='{html.escape(back)}'>&larr; leaderboard</a></p>",
        f"<h1>Samples of {html.escape(title)}</h1>",
        f"<p class='note'>{html.escape(str(view.path))}: {len(view.samples)} samples. In a terminal: "
        f"<code>rlvr show {html.escape(str(view.path))}</code>.</p>",
        "<div class='controls'>show <select id='verdict' onchange='applyFilter()'><option value='all'>all</option>"
        "<option value='correct'>correct</option><option value='wrong'>wrong</option></select> "
        "containing <input id='text' oninput='applyFilter()' placeholder='text'> <span id='count' class='note'>"
        "</span></div>",
    ]
    for name in view.benchmarks:
        mine = sorted((s for s in view.samples if str(s.get("benchmark")) == name), key=sample_order)
        correct = sum(1 for s in mine if s.get("correct"))
        parts.append(
            f'<h2 id="{html.escape(anchor(name))}">{html.escape(name)} <span class="note">{correct} of '
            f"{len(mine)} correct</span></h2>"
        )
        parts += [_sample(s) for s in mine]
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def sample_order(sample: dict[str, Any]) -> tuple:
    """Problem by problem in their natural order (``p2`` before ``p10``), samples by index: the
    log is in the order samples finished, which no reader wants."""
    parts = re.split(r"(\d+)", str(sample.get("id")))
    key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p)
    return key, int(sample.get("sample_idx") or 0)


def anchor(benchmark: str) -> str:
    return "bench-" + re.sub(r"[^A-Za-z0-9_-]+", "-", benchmark)
