"""The standard plots, drawn with matplotlib from run summaries alone and returned as inline SVG:
pass@k vs k, accuracy by template, response-length histograms (correct vs incorrect),
truncation and no-answer rates."""

from __future__ import annotations

import io
import re
from collections import defaultdict

from rlvr.harness.leaderboard.tables import Run

MAX_SERIES = 8


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _pyplot().close(fig)
    text = buf.getvalue()
    return re.sub(r"^.*?(<svg)", r"\1", text, count=1, flags=re.S)


def _label(run: Run) -> str:
    template = run.summary["protocol"]["template"]["name"]
    return f"{run.model} / {template} ({run.path.name})"


def pass_at_k_plot(runs: list[Run]) -> str | None:
    """pass@k against k for every run with more than one sample per problem."""
    series = [
        (r, name, b) for r in runs for name, b in r.summary["benchmarks"].items() if len(b.get("pass_at_k") or {}) > 1
    ]
    if not series:
        return None
    plt = _pyplot()
    benches = list(dict.fromkeys(name for _, name, _ in series))
    fig, axes = plt.subplots(1, len(benches), figsize=(5 * len(benches), 3.8), squeeze=False)
    for col, bench in enumerate(benches):
        ax = axes[0][col]
        for run, name, b in [s for s in series if s[1] == bench][:MAX_SERIES]:
            ks = sorted(b["pass_at_k"], key=int)
            values = [100 * b["pass_at_k"][k]["value"] for k in ks]
            lows = [100 * b["pass_at_k"][k]["ci95"][0] for k in ks]
            highs = [100 * b["pass_at_k"][k]["ci95"][1] for k in ks]
            line = ax.plot([int(k) for k in ks], values, marker="o", label=_label(run))[0]
            ax.fill_between([int(k) for k in ks], lows, highs, alpha=0.12, color=line.get_color())
        ax.set(title=f"{bench}: pass@k (95% CI band)", xlabel="k", ylabel="pass@k (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _svg(fig)


def template_plot(runs: list[Run]) -> str | None:
    """mean@n by template for runs that differ only in the template (the ablation)."""
    groups: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        protocol = run.summary["protocol"]
        rest = {k: v for k, v in protocol.items() if k != "template"}
        groups[(run.model, repr(sorted(rest.items())))].append(run)
    groups = {k: v for k, v in groups.items() if len({r.summary["protocol"]["template"]["name"] for r in v}) > 1}
    if not groups:
        return None
    plt = _pyplot()
    panels = [
        (key, members, bench)
        for key, members in groups.items()
        for bench in dict.fromkeys(n for r in members for n in r.summary["benchmarks"])
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.8), squeeze=False)
    for col, (key, members, bench) in enumerate(panels):
        ax = axes[0][col]
        members = [r for r in members if bench in r.summary["benchmarks"]]
        names = [r.summary["protocol"]["template"]["name"] for r in members]
        values = [100 * (r.summary["benchmarks"][bench]["mean_at_n"]["value"] or 0) for r in members]
        cis = [r.summary["benchmarks"][bench]["mean_at_n"]["ci95"] or [0, 0] for r in members]
        errors = [[v - 100 * lo for v, (lo, _) in zip(values, cis)], [100 * hi - v for v, (_, hi) in zip(values, cis)]]
        ax.bar(names, values, yerr=errors, capsize=4, color="#4c72b0")
        ax.set(title=f"{key[0]}: {bench} by template", ylabel="mean@n (%)")
        ax.tick_params(axis="x", rotation=30)
    return _svg(fig)


def length_plot(runs: list[Run]) -> str | None:
    """Histograms of response length for correct vs incorrect answers, per benchmark."""
    series = [(r, name, b) for r in runs for name, b in r.summary["benchmarks"].items() if b.get("length_histogram")]
    if not series:
        return None
    plt = _pyplot()
    from matplotlib import ticker

    benches = list(dict.fromkeys(name for _, name, _ in series))
    fig, axes = plt.subplots(1, len(benches), figsize=(5 * len(benches), 3.8), squeeze=False)
    for col, bench in enumerate(benches):
        ax = axes[0][col]
        for run, _, b in [s for s in series if s[1] == bench][:4]:
            hist = b["length_histogram"]
            centers = [(a + c) / 2 for a, c in zip(hist["edges"], hist["edges"][1:])]
            line = ax.step(centers, hist["correct"], where="mid", label=f"{_label(run)} correct")[0]
            ax.step(
                centers,
                hist["incorrect"],
                where="mid",
                linestyle=":",
                color=line.get_color(),
                label=f"{_label(run)} incorrect",
            )
        ax.set(title=f"{bench}: response length (tokens)", xlabel="tokens", ylabel="responses")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))  # a count of responses is whole
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _svg(fig)


def rates_plot(runs: list[Run]) -> str | None:
    """Truncation and no-answer rates per run and benchmark."""
    bars = [
        (f"{_label(r)} · {name}", b["truncation_rate"] or 0, b["no_answer_rate"] or 0)
        for r in runs
        for name, b in r.summary["benchmarks"].items()
    ]
    if not bars:
        return None
    plt = _pyplot()
    bars = bars[:40]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(bars) + 1.2))
    positions = list(range(len(bars)))
    ax.barh([p - 0.2 for p in positions], [100 * b[1] for b in bars], height=0.4, label="truncated (hit max_tokens)")
    ax.barh([p + 0.2 for p in positions], [100 * b[2] for b in bars], height=0.4, label="no extractable answer")
    ax.set_yticks(positions, [b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="% of responses", title="Truncation and no-answer rates")
    ax.legend(fontsize=7)
    return _svg(fig)


def all_plots(runs: list[Run]) -> list[tuple[str, str, str]]:
    """``[(id, title, svg)]`` for the plots the runs support."""
    out = []
    for pid, title, make in (
        ("passk", "pass@k vs k", pass_at_k_plot),
        ("templates", "Accuracy by template", template_plot),
        ("lengths", "Response length: correct vs incorrect", length_plot),
        ("rates", "Truncation and no-answer rates", rates_plot),
    ):
        svg = make(runs)
        if svg:
            out.append((pid, title, svg))
    return out
