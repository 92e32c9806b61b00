"""``rlvr leaderboard --diff OLD``: what changed between two leaderboard builds.

Both sides are read from their ``leaderboard.parquet`` (every summary field, one row per run x
benchmark). Rows are matched by (run directory name, benchmark). A score *changed* when the new
value lies outside the old 95% CI or the old value outside the new one; smaller moves are
resampling noise and are counted, not listed. Runs only in the new build are *new*, only in the
old one *removed*.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.report_format import markdown_table, percent, percent_ci

KEY = ["run", "benchmark"]
SHOWN = ["model.name", "protocol_fingerprint", "mean_at_n.value", "mean_at_n.ci95_lo", "mean_at_n.ci95_hi"]


def _frame(board: Path):
    import pandas

    path = Path(board) / "leaderboard.parquet"
    if not path.is_file():
        raise UserError(
            f"{board} has no leaderboard.parquet; build it with `rlvr leaderboard --out {board}` (this "
            "version writes one)"
        )
    frame = pandas.read_parquet(path)
    return frame[[c for c in KEY + SHOWN if c in frame.columns]]


def _metric(row: Any, side: str) -> dict[str, Any]:
    return {
        "value": row[f"mean_at_n.value_{side}"],
        "ci95": [row[f"mean_at_n.ci95_lo_{side}"], row[f"mean_at_n.ci95_hi_{side}"]],
    }


def leaderboard_diff(old_board: Path, new_board: Path) -> dict[str, Any]:
    old, new = _frame(old_board), _frame(new_board)
    merged = old.merge(new, on=KEY, how="outer", suffixes=("_old", "_new"), indicator=True)
    report: dict[str, Any] = {
        "old": str(old_board),
        "new": str(new_board),
        "new_runs": [],
        "removed_runs": [],
        "changed": [],
        "unchanged": 0,
    }
    for _, row in merged.iterrows():
        where = row["_merge"]
        entry = {"run": row["run"], "benchmark": row["benchmark"]}
        if where == "right_only":
            report["new_runs"].append({**entry, "model": row["model.name_new"], "mean_at_n": _metric(row, "new")})
        elif where == "left_only":
            report["removed_runs"].append({**entry, "model": row["model.name_old"], "mean_at_n": _metric(row, "old")})
        else:
            a, b = _metric(row, "old"), _metric(row, "new")
            outside = not (a["ci95"][0] <= b["value"] <= a["ci95"][1]) or not (
                b["ci95"][0] <= a["value"] <= b["ci95"][1]
            )
            if outside:
                report["changed"].append(
                    {
                        **entry,
                        "model": row["model.name_new"],
                        "old": a,
                        "new": b,
                        "delta": b["value"] - a["value"],
                        "protocol_changed": row["protocol_fingerprint_old"] != row["protocol_fingerprint_new"],
                    }
                )
            else:
                report["unchanged"] += 1
    return report


def format_diff(report: dict[str, Any]) -> str:
    lines = [f"# Leaderboard diff: {report['old']} -> {report['new']}", ""]
    lines.append(
        f"Run x benchmark scores: {len(report['new_runs'])} new, {len(report['removed_runs'])} removed, "
        f"{len(report['changed'])} changed beyond their 95% CI, {report['unchanged']} unchanged (within CI)."
    )
    if report["changed"]:
        rows = [
            [
                c["run"],
                c["benchmark"],
                percent_ci(c["old"]),
                percent_ci(c["new"]),
                percent(c["delta"], signed=True),
                "yes" if c["protocol_changed"] else "",
            ]
            for c in report["changed"]
        ]
        lines += [
            "",
            "## Changed",
            "",
            markdown_table(["run", "benchmark", "old %", "new %", "delta", "protocol changed"], rows),
        ]
    for title, key in (("New", "new_runs"), ("Removed", "removed_runs")):
        if report[key]:
            rows = [[r["run"], r["benchmark"], r["model"], percent_ci(r["mean_at_n"])] for r in report[key]]
            lines += ["", f"## {title}", "", markdown_table(["run", "benchmark", "model", "mean@n %"], rows)]
    return "\n".join(lines) + "\n"


def write_diff(old_board: Path, new_board: Path) -> dict[str, Any]:
    report = leaderboard_diff(old_board, new_board)
    Path(new_board, "diff.json").write_text(json.dumps(report, indent=2, default=float), encoding="utf-8")
    Path(new_board, "diff.md").write_text(format_diff(report), encoding="utf-8")
    return report
