"""Run directories: ``config.yaml``, ``samples.jsonl`` (appended as samples finish) and
``summary.json``. A run killed at any moment leaves every sample written before the kill
intact; a partial last line (the kill landed mid-write) is cut off on the next open.

Results as data (pandas, for notebooks and for the leaderboard):
``load_summaries(paths)``: one row per run x benchmark. Columns, all flat and stable:
``run`` (directory name), ``run_path``, ``created``, ``fingerprint``, ``protocol_fingerprint``,
``model.name`` / ``model.path`` / ``model.weights_hash``, ``protocol.*`` (``protocol.template.name``,
``protocol.sampling.n``, ``protocol.sampling.temperature``, ...), ``versions.*``, ``benchmark``,
then every field of that benchmark's summary flattened with dots: ``n_problems``,
``mean_at_n.value``, ``mean_at_n.ci95_lo``, ``mean_at_n.ci95_hi``, ``pass_at_k.<k>.value``,
``truncation_rate``, ``length.correct.mean``, ``reasons.<reason>``, ``benchmark_fingerprint``, ``data_revision``,
... (a 95% interval
``[lo, hi]`` becomes ``..._lo`` / ``..._hi``; the length histogram is left out).

``load_samples(paths)``: one row per sample with every field of ``samples.jsonl`` plus ``run``,
``run_path``, ``model`` and ``fingerprint`` of its run.

``paths``: run directories, or folders searched (any depth) for the ``summary.json`` of each run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from rlvr.harness.errors import UserError
from rlvr.harness.report_format import flatten
from rlvr.harness.run_dir import CONFIG_FILE, PARTIAL_FILE

if TYPE_CHECKING:
    import pandas

#: the run directory's files (``rlvr.harness.run_dir`` names config.yaml and the partial marker)
CONFIG, PARTIAL = CONFIG_FILE, PARTIAL_FILE
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"


def read_samples(run_dir: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Every complete sample line. With ``repair``, a torn last line is removed from the file."""
    return read_jsonl(Path(run_dir) / SAMPLES, repair)


def read_jsonl(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Every complete line of an append-only JSON-lines file, up to the first torn or corrupt one;
    with ``repair``, the file is cut back to those lines (so appends continue cleanly)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    rows: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline == -1:  # no newline: the write was cut short
            break
        line = data[pos:newline]
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
        pos = newline + 1
    good_end = pos
    if repair and good_end < len(data):
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    return rows


class SampleLog:
    """Appends sample records and makes each batch durable before returning."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / SAMPLES
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


def rewrite_samples(run_dir: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace ``samples.jsonl`` atomically (a kill leaves the old or the new file, whole)."""
    path = Path(run_dir) / SAMPLES
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def write_json(path: Path, data: Any) -> None:
    """Atomic write (a reader never sees half a summary)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


#: Summary fields that are not per-run facts a table would hold.
_LEFT_OUT = ("length_histogram",)


def run_directories(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Every run directory named by ``paths`` (a run itself, or found below a folder), sorted."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: set[Path] = set()
    for path in map(Path, paths):
        if not path.exists():
            raise UserError(f"{path} does not exist")
        if (path / SUMMARY).is_file() or (path / "samples.jsonl").is_file():
            found.add(path)
        else:
            found.update(p.parent for p in path.rglob(SUMMARY))
    return sorted(found)


def _with_intervals(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key.endswith("ci95") and isinstance(value, (list, tuple)) and len(value) == 2:
            out[f"{key}_lo"], out[f"{key}_hi"] = value
        else:
            out[key] = value
    return out


def summary_rows(summary: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """The rows ``load_summaries`` makes of one run's summary (one per benchmark)."""
    head = {
        "run": run_dir.name,
        "run_path": str(run_dir),
        "created": summary.get("created"),
        "fingerprint": summary.get("fingerprint"),
        "protocol_fingerprint": summary.get("protocol_fingerprint"),
        **flatten({"model": summary.get("model", {})}),
        **_with_intervals(flatten({"protocol": summary.get("protocol", {})})),
        **flatten({"versions": summary.get("versions", {})}),
    }
    rows = []
    for name, metrics in summary.get("benchmarks", {}).items():
        # the benchmark's own fingerprint (protocol + its data) must not hide the run's
        kept = {
            ("benchmark_fingerprint" if k == "fingerprint" else k): v for k, v in metrics.items() if k not in _LEFT_OUT
        }
        rows.append({**head, "benchmark": name, **_with_intervals(flatten(kept))})
    return rows


def load_summaries(paths: str | Path | Iterable[str | Path]) -> "pandas.DataFrame":
    """One row per run x benchmark with every summary field (see the module docstring)."""
    import pandas

    rows = [row for run in run_directories(paths) for row in summary_rows(read_summary(run) or {}, run)]
    return pandas.DataFrame(rows, columns=None if rows else ["run", "run_path", "fingerprint", "benchmark"])


def load_samples(paths: str | Path | Iterable[str | Path]) -> "pandas.DataFrame":
    """One row per sample of every run, with the run's name, path, model and fingerprint."""
    import pandas

    rows = []
    for run in run_directories(paths):
        summary = read_summary(run) or {}
        extra = {
            "run": run.name,
            "run_path": str(run),
            "model": summary.get("model", {}).get("name"),
            "fingerprint": summary.get("fingerprint"),
        }
        rows += [{**sample, **extra} for sample in read_samples(run)]
    return pandas.DataFrame(
        rows, columns=None if rows else ["run", "run_path", "model", "fingerprint", "id", "benchmark", "correct"]
    )
