"""User data as a benchmark: a local JSONL / JSON / Parquet file or a Hugging Face dataset.

A field mapping says which column holds what (``question=problem,answer=gold``); unmapped
fields are looked up under their usual names. Rows with ``tests`` are code problems, the
rest math, unless ``kind`` says otherwise.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from rlvr.harness.benchmarks.problems import Problem
from rlvr.harness.errors import UserError

DEFAULT_FIELDS = {
    "id": ("id", "task_id", "question_id", "unique_id", "idx"),
    "question": ("question", "problem", "prompt", "question_content", "input"),
    "answer": ("answer", "ground_truth", "final_answer", "target", "label"),
    "tests": ("tests", "test_cases", "input_output"),
    "fn_name": ("fn_name", "entry_point", "func_name"),
    "starter_code": ("starter_code",),
    "solution": ("solution", "canonical_solution"),
}


def is_custom_source(name: str) -> bool:
    """A hub dataset, a data file, or a datasets.save_to_disk directory (not a benchmark name)."""
    return (
        name.startswith("hf:")
        or Path(name).suffix in (".jsonl", ".json", ".parquet", ".arrow", ".gz")
        or (("/" in name or name.startswith(".")) and Path(name).is_dir())
    )


def parse_fields(text: str | dict[str, str] | None) -> dict[str, str]:
    """``"question=problem,answer=gold"`` (or a dict) -> mapping of our field to their column."""
    if not text:
        return {}
    if isinstance(text, dict):
        pairs = dict(text)
    else:
        pairs = {}
        for part in text.split(","):
            if "=" not in part:
                raise UserError(f"--fields entry {part!r} is not OUR=THEIRS (e.g. question=problem,answer=gold)")
            ours, theirs = (s.strip() for s in part.split("=", 1))
            pairs[ours] = theirs
    unknown = set(pairs) - set(DEFAULT_FIELDS)
    if unknown:
        raise UserError(f"--fields: unknown field(s) {sorted(unknown)}; choose from {sorted(DEFAULT_FIELDS)}")
    return pairs


def _read_rows(source: str, label: str = "benchmark file") -> list[dict[str, Any]]:
    """Rows of a data file, directory or hub dataset; ``label`` names it in errors (benchmark
    file, training file)."""
    if source.startswith("hf:"):
        return _hub_rows(source[3:])
    path = Path(source).expanduser()
    if not path.exists():
        raise UserError(f"{label} {source} does not exist")
    if path.is_dir():
        return _saved_dataset_rows(path)
    if path.suffix == ".arrow":
        try:
            import datasets
        except ImportError as exc:
            raise UserError("reading .arrow files needs the datasets package: pip install datasets") from exc
        return [dict(row) for row in datasets.Dataset.from_file(str(path))]
    try:
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError as exc:
                raise UserError("reading Parquet needs pyarrow: pip install pyarrow") from exc
            return pq.read_table(path).to_pylist()
        if path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise UserError(f"{source}: a .json {label} must hold a list of objects")
            return data
    except json.JSONDecodeError as exc:
        raise UserError(f"{source} is not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    rows = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise UserError(f"{source}: line {number} is not valid JSON ({exc.msg})") from exc
    return rows


def _saved_dataset_rows(path: Path) -> list[dict[str, Any]]:
    """A ``datasets.Dataset.save_to_disk`` directory (a DatasetDict: its ``train`` split, else its only one)."""
    try:
        import datasets
    except ImportError as exc:
        raise UserError("reading a saved dataset directory needs the datasets package: pip install datasets") from exc
    try:
        data = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(f"{path} is a directory but not a datasets.save_to_disk directory ({exc})") from exc
    if isinstance(data, datasets.DatasetDict):
        split = "train" if "train" in data else next(iter(data))
        data = data[split]
    return [dict(row) for row in data]


def training_rows(
    source: str, fields: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows as read, rows as {question, answer})`` of a training file: what a contamination check reads.

    A file in which no row has question text (the field has another name) is an error that
    names the fields the rows do have: checking nothing would report a false "0 flagged"."""
    fields = fields or {}
    raw = _read_rows(source, "training file")
    if not raw:
        raise UserError(f"training file {source} holds no rows")
    bad = next((i for i, row in enumerate(raw) if not isinstance(row, dict)), None)
    if bad is not None:
        raise UserError(f"training file {source}: row {bad + 1} is not an object")
    rows = [{"question": _pick(row, "question", fields), "answer": _pick(row, "answer", fields)} for row in raw]
    if not any(isinstance(r["question"], str) and r["question"].strip() for r in rows):
        names = sorted({k for row in raw[:100] for k in row})
        looked = [fields["question"]] if "question" in fields else list(DEFAULT_FIELDS["question"])
        raise UserError(
            f"training file {source}: no row has question text under {', '.join(looked)}; its rows have the fields "
            f"{', '.join(names)}; map one with --fields question=FIELD"
        )
    return raw, rows


def _hub_rows(spec: str) -> list[dict[str, Any]]:
    """``hf:NAME[:CONFIG][@SPLIT]`` (split defaults to test)."""
    name, _, split = spec.partition("@")
    name, _, config = name.partition(":")
    try:
        import datasets
    except ImportError as exc:
        raise UserError("loading hub datasets needs the datasets package: pip install datasets") from exc
    try:
        ds = datasets.load_dataset(name, config or None, split=split or "test")
    except Exception as exc:  # the hub's errors are many and unhelpful; give one line
        raise UserError(
            f"cannot load hub dataset {name!r} ({type(exc).__name__}); without network access, download it elsewhere "
            "and pass a local .jsonl/.parquet"
        ) from exc
    return [dict(row) for row in ds]


def _pick(row: dict[str, Any], field: str, fields: dict[str, str]) -> Any:
    if field in fields:
        return row.get(fields[field])
    return next((row[k] for k in DEFAULT_FIELDS[field] if row.get(k) is not None), None)


def load_custom(
    source: str,
    fields: dict[str, str] | None = None,
    kind: str | None = None,
    policy: str | None = None,
    name: str | None = None,
) -> list[Problem]:
    """Problems from a user file or hub dataset, validated row by row with a clear error."""
    fields = fields or {}
    rows = _read_rows(source)
    bench = name or (source[3:].replace("/", "_") if source.startswith("hf:") else Path(source).name.split(".")[0])
    problems = []
    for index, row in enumerate(rows):
        # rows are counted from 1, as lines are (row N of a JSONL file is its Nth non-blank line)
        if not isinstance(row, dict):
            raise UserError(f"{source}: row {index + 1} is not an object")
        has = f"its fields are {', '.join(sorted(map(str, row))) or 'none'}"
        question = _pick(row, "question", fields)
        if not isinstance(question, str) or not question.strip():
            raise UserError(
                f"{source}: row {index + 1} has no question text ({has}); map it with --fields question=COLUMN"
            )
        tests = _pick(row, "tests", fields)
        row_kind = kind or ("code" if tests is not None else "math")
        if row_kind == "code":
            if tests is None:
                raise UserError(f"{source}: row {index + 1} has no tests ({has}); map them with --fields tests=COLUMN")
            gold: dict[str, Any] = {"tests": json.loads(tests) if isinstance(tests, str) else tests}
            for key in ("fn_name", "starter_code"):
                value = _pick(row, key, fields)
                if value:
                    gold[key] = value
        else:
            answer = _pick(row, "answer", fields)
            if answer is None:
                raise UserError(f"{source}: row {index + 1} has no answer ({has}); map it with --fields answer=COLUMN")
            gold = {"answer": str(answer), "policy": policy or "math"}
        rid = _pick(row, "id", fields)
        problems.append(
            Problem(
                f"{bench}/{rid if rid is not None else index}",
                bench,
                row_kind,
                question,
                gold,
                _pick(row, "solution", fields),
            )
        )
    if not problems:
        raise UserError(f"{source} holds no rows")
    return problems
