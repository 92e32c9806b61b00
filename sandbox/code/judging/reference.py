"""Expected outputs from a reference solution (EvalPlus rows ship inputs only).

The reference runs once, in the same sandbox as submissions (batches spread over the grader's
judges), and its results are cached on disk as typed encodings, keyed by the reference, the
inputs, the entry point and the verifier version. With each result comes the reference's wall
time per call as the supervisor observed it (start to return of the call, warm, arguments
already decoded): the quantity EvalPlus's time rule multiplies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlvr.sandbox.code.judging import blobs
from rlvr.sandbox.code.judging.compare import describe_value
from rlvr.sandbox.code.judging.decoding import decode
from rlvr.sandbox.code.rules.testcases import TESTS_FORMAT, BadTests, PreparedTests, call_args, prepare_tests
from rlvr.sandbox.code.running.values import encode
from rlvr.sandbox.code.verify import CodeGrader, default_code_grader
from rlvr.sandbox.version import CODE_VERIFIER

#: EvalPlus 0.3.1 (``evalplus.config``): each input may take max(1 s, 4 x the reference's time).
EVALPLUS_MIN_TIME_S = 1.0
EVALPLUS_TIME_FACTOR = 4.0
#: ... and one group of inputs (base or plus) at most 60 s (``EVALPLUS_TIMEOUT_PER_TASK``) + 1 s.
EVALPLUS_GROUP_CAP_S = 60.0


def cache_dir() -> Path:
    return blobs.cache_root() / "expected_outputs"


class ReferenceFailed(RuntimeError):
    """The reference solution itself failed on an input (the row cannot be graded)."""


@dataclass(frozen=True)
class Expected:
    """A reference result: its typed encoding (base64 inline when small, else ``None`` and the
    bytes in the blob store), its digest and size, the reference's wall time in ms, whether the
    value equals itself byte for byte (no NaN, no numpy, no opaque object), and EvalPlus's
    ``is_floats`` of it."""

    encoded: str | None
    digest: str
    size: int
    wall_ms: float
    plain: bool
    floats: bool

    @classmethod
    def of(cls, raw: bytes, wall_ms: float) -> "Expected":
        return cls.from_facts(describe_value(raw), wall_ms)

    @classmethod
    def from_facts(cls, facts: dict[str, Any], wall_ms: float) -> "Expected":
        return cls(facts["result"], facts["digest"], facts["size"], wall_ms, facts["plain"], facts["floats"])

    def row(self) -> dict[str, Any]:
        """The expectation fields of a test row."""
        if self.encoded is not None:
            return {"expected_encoded": self.encoded, "plain": self.plain, "floats": self.floats}
        return {"expected_digest": self.digest, "expected_size": self.size, "plain": self.plain, "floats": self.floats}

    def raw(self) -> bytes:
        return base64.b64decode(self.encoded) if self.encoded is not None else blobs.load(self.digest)


def expected_outputs(
    reference: str,
    inputs: list[list[Any]],
    fn_name: str,
    grader: CodeGrader | None = None,
    limits: dict[str, Any] | None = None,
) -> tuple[list[str], list[Expected]]:
    """Run ``reference`` on every argument list in ``inputs``: (the inputs encoded as calls,
    the results in input order). Both are cached on disk, so a warm run encodes nothing."""
    key = hashlib.sha256(
        CODE_VERIFIER.encode() + reference.encode() + fn_name.encode() + pickle.dumps(inputs, protocol=4)
    ).hexdigest()
    path = cache_dir() / key[:2] / f"{key}.json"
    if path.exists():
        try:
            cached = json.loads(path.read_text())
            expected = [Expected(*row) for row in cached["expected"]]
            for e in expected:
                if e.encoded is None:
                    blobs.check(e.digest)  # still there and intact
            return cached["inputs"], expected
        except (ValueError, TypeError, KeyError, OSError):
            path.unlink(missing_ok=True)
    encoded_inputs = [call_args(args) for args in inputs]
    grader = grader or default_code_grader()
    budget = {"time_s": 20.0, "total_s": 900.0, "memory_mb": 2048, "output_kb": 65536, **(limits or {})}
    try:
        outcomes = grader.run_collect(reference, encoded_inputs, fn_name, limits=budget)
    except (RuntimeError, ValueError) as exc:
        raise ReferenceFailed(str(exc)) from exc
    results = []
    for index, outcome in enumerate(outcomes):
        if outcome["status"] != "ok" or "digest" not in outcome:
            raise ReferenceFailed(
                f"reference failed on input {index}: {outcome['status']} "
                f"{(outcome.get('error') or outcome.get('stderr') or '')[-200:]}"
            )
        results.append(Expected.from_facts(outcome, float(outcome.get("wall_ms") or 0.0)))
    if len(results) != len(inputs):
        raise ReferenceFailed(f"reference answered {len(results)} of {len(inputs)} inputs")
    rows = [[r.encoded, r.digest, r.size, r.wall_ms, r.plain, r.floats] for r in results]
    _write_atomically(path, json.dumps({"inputs": encoded_inputs, "expected": rows}))
    return encoded_inputs, results


def evalplus_time_s(
    wall_ms: float, factor: float = EVALPLUS_TIME_FACTOR, floor_s: float = EVALPLUS_MIN_TIME_S
) -> float:
    return max(floor_s, factor * wall_ms / 1000)


def differential_tests(
    inputs: list[str],
    expected: list[Expected],
    groups: list[str] | None = None,
    factor: float = EVALPLUS_TIME_FACTOR,
    floor_s: float = EVALPLUS_MIN_TIME_S,
) -> list[dict[str, Any]]:
    """Functional tests from reference results, with EvalPlus's time rule: each input may take
    ``max(floor_s, factor * reference wall time)``, as CPU time of the call (so a busy machine
    does not turn a correct solution into a time-out)."""
    groups = groups or ["all"] * len(inputs)
    return [
        {
            "args_encoded": args,
            **e.row(),
            "testtype": "functional",
            "group": group,
            "time_s": evalplus_time_s(e.wall_ms, factor, floor_s),
        }
        for args, e, group in zip(inputs, expected, groups)
    ]


def evalplus_total_s(tests: list[dict[str, Any]]) -> float:
    """EvalPlus's per-group budget, summed over groups: min(60, sum of the group's limits) + 1."""
    per_group: dict[str, float] = {}
    for test in tests:
        per_group[test.get("group", "all")] = per_group.get(test.get("group", "all"), 0.0) + test["time_s"]
    return sum(min(EVALPLUS_GROUP_CAP_S, total) + 1.0 for total in per_group.values())


def not_none_expected(expected: list[Expected]) -> list[Expected]:
    """EvalPlus's ground truth for its "not None" tasks: whether the reference returned a value
    (``[i is not None for i in ret]``), since a regex match object cannot be compared."""
    return [Expected.of(encode(decode(e.raw(), None) is not None), e.wall_ms) for e in expected]


def evalplus_tests(
    reference: str,
    inputs: list[list[Any]],
    fn_name: str,
    groups: list[str] | None = None,
    oracle: str | None = None,
    grader: CodeGrader | None = None,
) -> tuple[PreparedTests | list[dict[str, Any]], float]:
    """An EvalPlus problem's tests in the judge's form, with its whole budget
    (``evalplus_total_s``). Cached whole, beside the expected outputs: a warm run reads one
    index entry and the serialised tests instead of rebuilding them row by row from the
    expected outputs (HumanEval+'s 124,253 rows cost the caller ~0.85 s of CPU each run, before
    any judge started). ``oracle="not_none"``: EvalPlus's "not None" tasks (``not_none_expected``).
    Rows that cannot be prepared come back as a plain list, not cached: each item graded
    with them is then ``bad_input`` saying why."""
    path = cache_dir() / "tests" / f"{_tests_key(reference, inputs, fn_name, groups, oracle)}.json"
    cached = _cached_tests(path, fn_name)
    if cached is not None:
        return cached
    encoded, expected = expected_outputs(reference, inputs, fn_name, grader)
    if oracle == "not_none":
        expected = not_none_expected(expected)
    tests = differential_tests(encoded, expected, groups)
    total_s = evalplus_total_s(tests)
    try:
        prepared = prepare_tests(tests, fn_name)
    except BadTests:
        return tests, total_s
    name = blobs.store(prepared.text.encode())
    _write_atomically(path, json.dumps({"text": name, "total_s": total_s}))
    return replace(prepared, blob=name), total_s


def _tests_key(
    reference: str, inputs: list[list[Any]], fn_name: str, groups: list[str] | None, oracle: str | None
) -> str:
    """Everything the prepared tests depend on: the verifier, the judge's test format, the
    reference and its inputs, the grouping, the oracle and EvalPlus's time rule."""
    settings = [CODE_VERIFIER, TESTS_FORMAT, reference, fn_name, groups, oracle]
    settings += [EVALPLUS_TIME_FACTOR, EVALPLUS_MIN_TIME_S, EVALPLUS_GROUP_CAP_S]
    return hashlib.sha256(json.dumps(settings).encode() + pickle.dumps(inputs, protocol=4)).hexdigest()


def _cached_tests(path: Path, fn_name: str) -> tuple[PreparedTests, float] | None:
    """The prepared tests an index entry names, if the entry, its text and every value blob the
    tests name are there and intact (a corrupt blob is removed, so the rebuild stores it anew)."""
    if not path.exists():
        return None
    try:
        index = json.loads(path.read_text())
        text = blobs.load(index["text"]).decode()
        tests = json.loads(text)
        for test in tests:
            if test.get("expected_digest"):
                blobs.check(test["expected_digest"])
        digest = hashlib.sha256(text.encode()).hexdigest()
        return PreparedTests(tuple(tests), fn_name, text, digest, index["text"]), float(index["total_s"])
    except (ValueError, TypeError, KeyError, OSError, AttributeError):
        path.unlink(missing_ok=True)
        return None


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a file of this process and thread renamed into place,
    so a reader sees the old file or the whole new one (gold is resolved on several threads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
