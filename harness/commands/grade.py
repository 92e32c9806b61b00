"""``rlvr grade``: grade a JSONL file of completions with the sandbox verifiers."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from rlvr.harness.commands.options import add_ray_option
from rlvr.harness.errors import UserError
from rlvr.harness.grade_files import CODE_FIELDS, count_lines, grade_stream, read_rows, row_kind, row_problem

EPILOG = """\
input rows (JSON Lines):
  math: {"id": ..., "completion": "... \\\\boxed{42}", "answer": "42"}
        optional per row: "policy", "answer_type", "tolerance", "multiple"
  code: {"id": ..., "completion": "```python ...```", "tests": [{"input", "output",
        "testtype": "stdin"|"functional"}], "fn_name"?, "starter_code"?}
        optional per row: "language" (python, cpp, c), "limits" {...}, "oracle", "partial"
  mixed files: a row's own "kind" ("math" | "code") picks its verifier; else --kind; else its
  fields ("tests" -> code, otherwise math)
output rows, one per input row, in input order:
  {"id", "correct", "reward", "reason", "extracted", "elapsed_ms", "detail", "verifier", ...}
  code rows add "passed", "total", "first_failure".
  math reasons: ok, wrong_answer, no_answer, unparseable, timeout, grader_error
  code reasons: ok, wrong_answer, time_limit, memory_limit, output_limit, runtime_error,
                compile_error, no_code, sandbox_error
  bad_input marks a row that could not be read (not counted in accuracy); extra input fields
  pass through, and "kind" says which verifier graded the row.

examples:
  rlvr grade --kind math --input completions.jsonl --output verdicts.jsonl
  rlvr grade --kind math --input c.jsonl --output - --workers 4 --timeout 2 --policy minerva
  rlvr grade --kind code --input programs.jsonl --output verdicts.jsonl --timeout 6
  rlvr grade --input mixed.jsonl --output verdicts.jsonl         # each row by its own "kind"
  rlvr grade --kind math --input c.jsonl --output v.jsonl --ray            # RAY_ADDRESS or local
  rlvr grade --kind math --input c.jsonl --output v.jsonl --ray head:6379 --actors 64
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade",
        help="grade a JSONL file of completions (math or code)",
        description="Grade completions with the same verifier that serves training rewards.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--kind",
        choices=["math", "code"],
        default=None,
        help="verifier for rows without their own 'kind' field (default: a row with 'tests' is code, else math); "
        "a row's own 'kind' always wins, so one file may mix both",
    )
    p.add_argument("--input", required=True, help="input JSONL path, or - for standard input")
    p.add_argument("--output", required=True, help="output JSONL path, or - for standard output")
    p.add_argument("--workers", type=int, default=None, help="grading worker processes (default: min(4, CPUs))")
    p.add_argument(
        "--shards",
        type=int,
        default=None,
        help="math: processes extracting answers in parallel (default: one per core on 4+ cores, else 1)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="math: CPU seconds per item for the grading worker (default 1; wall-clock backstop 10x + 5 s); "
        "code: CPU seconds per test (default 4)",
    )
    p.add_argument(
        "--policy",
        default="math",
        help="math grading policy preset (math, gsm8k, minerva, olympiadbench, aime, arith, boxed_only, r1_format)",
    )
    p.add_argument(
        "--partial", action="store_true", help="code: reward is the fraction of tests passed (all tests run)"
    )
    p.add_argument(
        "--unsafe",
        action="store_true",
        help="code: run even where namespaces/chroot/uid switch are unavailable (NOT isolated)",
    )
    p.add_argument(
        "--stdin-process",
        choices=("test", "submission"),
        default=None,
        help="code: a fresh process for every stdin test (test, the default) or one per submission "
        "(submission: Python only, as LiveCodeBench's runner; a program's leftover state is shared "
        "between its own tests); a row's own stdin_process wins",
    )
    add_ray_option(
        p,
        "grade on a Ray cluster: ADDRESS (host:port, ray://...), or none/auto for RAY_ADDRESS, "
        "a cluster running here, else a new local one",
    )
    p.add_argument("--actors", type=int, default=None, help="with --ray: grading actors (default: one per cluster CPU)")
    p.add_argument("--summary-json", default=None, help="also write the summary as JSON to this path")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


class KindGraders:
    """The verifiers a file's rows need, each started on its first row: one ``rlvr grade`` run
    grades a mixed math/code file, every row by its own ``kind`` (``rlvr.harness.grade_files.row_kind``).
    ``grade_chunk`` is called from several threads; it keeps each row's place in the chunk."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.made: dict[str, tuple[Any, Callable[[list[dict[str, Any]]], list[Any]]]] = {}
        self.lock = threading.Lock()
        self.ray = _ray_grader(args) if args.ray is not None else None

    @property
    def actors(self) -> tuple:
        return getattr(self.ray, "actors", ())

    def _for(self, kind: str) -> Callable[[list[dict[str, Any]]], list[Any]]:
        with self.lock:
            if kind not in self.made:
                self.made[kind] = _local_grader(self.args, kind)
            return self.made[kind][1]

    def grade_chunk(self, rows: list[dict[str, Any]]) -> list[Any]:
        if self.ray is not None:
            return self.ray.grade([_ray_item(self.args, row) for row in rows])
        verdicts: list[Any] = [None] * len(rows)
        for kind in dict.fromkeys(row["kind"] for row in rows):
            places = [i for i, row in enumerate(rows) if row["kind"] == kind]
            for i, verdict in zip(places, self._for(kind)([rows[i] for i in places])):
                verdicts[i] = verdict
        return verdicts

    def close(self) -> None:
        if self.ray is not None:
            self.ray.close()
        for grader, _ in self.made.values():
            grader.close()


def _ray_grader(args: argparse.Namespace):
    """``--ray``: the same grading service, one actor per cluster CPU (``rlvr.sandbox.serving.ray_grading``);
    one service grades both kinds."""
    from rlvr.sandbox.serving.ray_grading import RayGrader, RayUnavailable

    if args.actors is not None and args.actors < 1:
        raise UserError("--actors must be at least 1")
    try:
        return RayGrader(
            args.actors,
            address=args.ray,
            math_timeout=args.timeout or 1.0,
            code_limits={"time_s": args.timeout} if args.timeout else None,
            unsafe=args.unsafe,
            test_details=True,  # as `rlvr grade` without --ray: an offline grader keeps the judge's details
        )
    except RayUnavailable as exc:
        raise UserError(str(exc)) from exc


def _ray_item(args: argparse.Namespace, row: dict[str, Any]) -> dict[str, Any]:
    if row["kind"] == "math":
        # a row's own policy wins, as with verify_batch(policy=...) in process
        return {**row, "answer": str(row["answer"]), "policy": row.get("policy") or args.policy}
    row = _with_stdin_process(args, row)
    return {**row, "partial": True} if args.partial else row


def _with_stdin_process(args: argparse.Namespace, row: dict[str, Any]) -> dict[str, Any]:
    if args.stdin_process is None or row.get("stdin_process") is not None:
        return row
    return {**row, "stdin_process": args.stdin_process}


def _local_grader(args: argparse.Namespace, kind: str):
    """The in-process verifier for ``kind`` and its chunk grader."""
    if kind == "math":
        from rlvr.sandbox.math.verify import MathGrader

        grader = MathGrader(workers=args.workers, timeout=args.timeout or 1.0, shards=args.shards)
        grader.start()

        def grade_math(rows: list[dict[str, Any]]):
            return grader.verify_batch([{**row, "answer": str(row["answer"])} for row in rows], policy=args.policy)

        return grader, grade_math
    from rlvr.sandbox.code.verify import CodeGrader

    code = CodeGrader(
        workers=args.workers, limits={"time_s": args.timeout} if args.timeout else None, unsafe=args.unsafe
    )

    def grade_code(rows: list[dict[str, Any]]):
        rows = [_with_stdin_process(args, row) for row in rows]
        return code.verify_batch(rows, partial=args.partial) if args.partial else code.verify_batch(rows)

    return code, grade_code


def check_paths(args: argparse.Namespace) -> None:
    """Refuse an output that is the input (it would be emptied before it is read) and paths that
    cannot be written, before the graders start."""
    from rlvr.harness.paths import output_file, same_file

    outputs = [("--output", args.output), ("--summary-json", args.summary_json)]
    for flag, path in outputs:
        if path in (None, "-"):
            continue
        if args.input != "-" and same_file(args.input, path):
            raise UserError(f"{flag} {path} is the input file; write the verdicts to another file")
        output_file(path, flag)
    if args.summary_json and args.output != "-" and same_file(args.output, args.summary_json):
        raise UserError("--summary-json and --output name the same file; give them different paths")


def kind_hint(kind: str | None, row: dict[str, Any] | None) -> str:
    """What to try when every row was unreadable for ``kind``: usually the other verifier."""
    keys = sorted(row) if row else []
    if kind == "code" and row and "tests" not in row and "answer" in row:
        return "the rows have 'answer' and no 'tests': they look like math rows; use --kind math"
    if kind == "math" and row and "tests" in row and "answer" not in row:
        return "the rows have 'tests' and no 'answer': they look like code rows; use --kind code"
    return f"the first row's fields are {keys}; see `rlvr grade --help` for the fields each kind needs"


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and args.timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    if args.shards is not None and args.shards < 1:
        raise UserError("--shards must be at least 1")
    check_paths(args)
    source = sys.stdin if args.input == "-" else _open_input(args.input)
    total = None if args.input == "-" else count_lines(Path(args.input))
    if total == 0:
        source.close()
        raise UserError(f"{args.input} holds no rows; pass a JSONL file with one JSON object per line")
    from rlvr.sandbox.math.policy import PRESETS
    from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER

    if args.policy not in PRESETS:
        raise UserError(f"unknown math policy {args.policy!r}; choose one of {', '.join(sorted(PRESETS))}")
    verifier = {"math": MATH_VERIFIER, "code": CODE_VERIFIER}.get(args.kind, "")
    extra_fields = CODE_FIELDS if args.kind == "code" else ()
    grader = KindGraders(args)
    out = sys.stdout if args.output == "-" else _open_output(args.output)
    progress = None
    if not args.no_progress and args.output != "-":
        from tqdm import tqdm

        progress = tqdm(total=total, unit="row", desc="grading", file=sys.stderr, disable=None)

    def write(row: dict[str, Any]) -> None:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")

    first_row: list[dict[str, Any]] = []

    kinds: set[str] = set()

    def check(row: dict[str, Any]) -> str:
        if not first_row:
            first_row.append(row)
        kind = row_kind(row, args.kind)
        problem = row_problem(row, kind)
        if not problem:
            row["kind"] = kind  # passed through to the output row: which verifier graded it
            kinds.add(kind)
        return problem

    try:
        window = max(4, len(grader.actors))
        summary = grade_stream(
            read_rows(source),
            grader.grade_chunk,
            check,
            write,
            verifier,
            extra_fields,
            progress=progress,
            window=window,
        )
    finally:
        if progress is not None:
            progress.close()
        grader.close()
        if out is not sys.stdout:
            out.close()
        if source is not sys.stdin:
            source.close()
    if args.summary_json:
        versions = {"math": MATH_VERIFIER, "code": CODE_VERIFIER}
        used = [versions[k] for k in ("math", "code") if k in kinds] or [verifier]
        Path(args.summary_json).write_text(
            json.dumps({"verifier": ", ".join(used), **summary.to_dict()}, indent=2) + "\n"
        )
    print(summary.line(), file=sys.stderr if args.output == "-" else sys.stdout)
    if summary.count == 0:
        raise UserError(f"{args.input} holds no rows; pass JSON Lines with one object per line")
    bad = summary.reasons.get("bad_input", 0)
    if bad == summary.count:
        hint = kind_hint(args.kind, first_row[0] if first_row else None)
        which = f" for --kind {args.kind}" if args.kind else ""
        raise UserError(f"every row is bad_input{which} (see the detail field of {args.output}); {hint}")
    if bad:
        print(
            f"warning: {bad} of {summary.count} rows are bad_input (unreadable, not counted in accuracy; their "
            "detail says why)",
            file=sys.stderr,
        )
    return 0


def _open_input(path: str):
    p = Path(path)
    if not p.is_file():
        raise UserError(f"input file {path!r} does not exist; pass a JSONL file or - for standard input")
    return p.open(encoding="utf-8", errors="replace")


def _open_output(path: str):
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        return p.open("w", encoding="utf-8", buffering=1 << 16)
    except OSError as exc:
        raise UserError(f"cannot write {path!r}: {exc.strerror}") from exc
