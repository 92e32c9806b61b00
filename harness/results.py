"""Run directories: ``config.yaml``, ``samples.jsonl`` (appended as samples finish) and
``summary.json``. A run killed at any moment leaves every sample written before the kill
intact; a partial last line (the kill landed mid-write) is cut off on the next open."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

CONFIG = "config.yaml"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"


def read_samples(run_dir: Path, repair: bool = False) -> list[dict[str, Any]]:
    """Every complete sample line. With ``repair``, a torn last line is removed from the file."""
    path = Path(run_dir) / SAMPLES
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
