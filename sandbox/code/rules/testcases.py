"""Test cases in every accepted form, normalised to the judge's three kinds.

Accepted: LiveCodeBench rows (``{"input", "output", "testtype": "stdin" | "functional"}``, a
functional input being one JSON value per line), ``{"inputs", "outputs", "fn_name"}`` specs,
Python-value rows (``{"args", "expected"}``), pre-encoded rows (``{"args_encoded",
"expected_encoded"}``, base64 of ``rlvr.sandbox.code.running.values``; how EvalPlus expectations travel) and
assert rows (``{"testtype": "assert", "code"}``). Each format brings its benchmark's comparison
rule: LiveCodeBench rows ``livecodebench``, Python-value rows ``python``; a ``compare`` option
overrides both.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr.sandbox.code.judging import blobs
from rlvr.sandbox.code.judging.encoded_facts import plain_encoded
from rlvr.sandbox.code.running.values import Unencodable, encode

#: Largest decimal integer ``int()`` converts without the interpreter's digit cap being lifted.
_INT_CHUNK = 4000


class BadTests(ValueError):
    """The tests themselves cannot be read (a dataset problem)."""


def big_int(text: str) -> int:
    """``int(text)`` for integers of any length, without touching the interpreter-wide
    4300-digit cap (divide and conquer over chunks, near-linear)."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if len(digits) <= _INT_CHUNK:
        return int(text)
    half = len(digits) // 2
    high, low = big_int(digits[:-half]), big_int(digits[-half:])
    return sign * (high * 10**half + low)


def parse_json(text: str) -> Any:
    return json.loads(text, parse_int=big_int)


def encode_b64(value: Any) -> str:
    return base64.b64encode(encode(value)).decode()


def call_args(args: Any, kwargs: Mapping[str, Any] | None = None) -> str:
    """The wire form of a call's arguments: encoded ``(args tuple, kwargs dict)``."""
    return encode_b64((tuple(args), dict(kwargs or {})))


#: The judge's form of tests (``normalize_tests``): part of the key of tests cached whole
#: (``reference.evalplus_tests``), so change it whenever that form changes.
TESTS_FORMAT = 1


@dataclass(frozen=True, repr=False)
class PreparedTests:
    """Tests already in the judge's form, serialised once, named by their digest: graded many
    times (every sample of a benchmark problem), they are sent to each judge once and after
    that referred to by digest."""

    tests: tuple[dict[str, Any], ...]
    fn_name: str | None
    text: str
    digest: str
    #: The text's name in the blob store when it is stored there (cached EvalPlus tests): a
    #: judge that lacks the tests reads them from the store instead of asking for them.
    blob: str | None = None

    def __repr__(self) -> str:
        return f"PreparedTests({len(self.tests)} tests, {self.digest[:16]})"

    __str__ = __repr__


def prepare_tests(tests: Any, fn_name: str | None = None) -> PreparedTests:
    if isinstance(tests, PreparedTests) and tests.fn_name == fn_name:
        return tests
    normalized = normalize_tests(tests, fn_name)
    text = json.dumps(normalized, separators=(",", ":"))
    return PreparedTests(tuple(normalized), fn_name, text, hashlib.sha256(text.encode()).hexdigest())


def normalize_tests(tests: Any, fn_name: str | None = None) -> list[dict[str, Any]]:
    """Return the judge's form of ``tests`` (``BadTests`` naming the test that cannot be read)."""
    if isinstance(tests, PreparedTests):
        if tests.fn_name != fn_name:
            raise BadTests(f"these tests were prepared for fn_name={tests.fn_name!r}, not {fn_name!r}")
        return list(tests.tests)
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as exc:
            raise BadTests(f"tests are not JSON: {exc}") from exc
    if isinstance(tests, Mapping) and "inputs" in tests and "outputs" in tests:
        kind = "functional" if tests.get("fn_name") else "stdin"
        tests = [{"input": i, "output": o, "testtype": kind} for i, o in zip(tests["inputs"], tests["outputs"])]
    if not isinstance(tests, list) or not tests:
        raise BadTests("tests must be a non-empty list")
    out = []
    for number, test in enumerate(tests):
        if not isinstance(test, Mapping):
            raise BadTests(f"test {number} is not an object")
        try:
            out.append(_normalize(test, fn_name))
        except (KeyError, TypeError, ValueError, Unencodable, RecursionError) as exc:
            if isinstance(exc, BadTests):
                raise BadTests(f"test {number}: {exc}") from exc
            raise BadTests(f"test {number}: {type(exc).__name__}: {exc}") from exc
        for key in ("time_s", "group"):
            if test.get(key) is not None:
                out[-1][key] = float(test[key]) if key == "time_s" else str(test[key])
    return out


def check_expectations(tests: list[dict[str, Any]]) -> None:
    """``BadTests`` naming the first call test that has nothing to compare with: arguments
    without an expected value would pass whatever the program returns, and a stored
    expectation that is not there is the row's fault, not the sandbox's."""
    for number, test in enumerate(tests):
        if test["kind"] != "call":
            continue
        digest = test.get("expected_digest")
        if test.get("expected") is None and not digest:
            raise BadTests(f"test {number}: a functional test needs an expected value (expected, expected_encoded)")
        if test.get("expected") is None and digest:
            try:
                present = blobs.exists(digest)
            except ValueError:
                raise BadTests(f"test {number}: expected_digest {str(digest)[:20]!r} is not a blob digest") from None
            if not present:
                raise BadTests(f"test {number}: its stored expected value {digest[:12]} is not in the blob store")


def _normalize(test: Mapping[str, Any], fn_name: str | None) -> dict[str, Any]:
    functional = "args" in test or "args_encoded" in test or "expected_json" in test
    kind = test.get("testtype") or test.get("kind") or ("functional" if functional else "stdin")
    if kind == "stdin":
        if not isinstance(test.get("input", ""), str) or not isinstance(test.get("output"), str):
            raise BadTests("stdin tests need string 'input' and 'output'")
        row: dict[str, Any] = {"kind": "stdin", "input": test.get("input", ""), "output": test["output"]}
        for key, legacy in (("atol", "float_abs_tol"), ("rtol", "float_rel_tol")):
            value = test.get(key, test.get(legacy))
            if value is not None:
                row[key] = float(value)
        return row
    if kind in ("functional", "call"):
        if not fn_name:
            raise BadTests("functional tests need fn_name")
        return _call(test)
    if kind == "assert":
        code = test.get("code") or test.get("input")
        if not isinstance(code, str):
            raise BadTests("assert tests need 'code'")
        return {"kind": "assert", "code": code}
    raise BadTests(f"unknown testtype {kind!r} (stdin, functional, assert)")


def _call(test: Mapping[str, Any]) -> dict[str, Any]:
    """A call test: arguments and expectation, both typed-encoded (base64)."""
    if "args_encoded" in test:
        row = {
            "kind": "call",
            "args": test["args_encoded"],
            "expected": test.get("expected_encoded"),
            "plain": bool(test.get("plain")),
            "rule": test.get("rule"),
        }
        if test.get("expected_digest"):
            row.update(expected_digest=str(test["expected_digest"]), expected_size=int(test["expected_size"]))
        if "floats" in test:
            row["floats"] = bool(test["floats"])
        return row
    if "args" in test:
        args, rule = list(test["args"]), "python"
        kwargs = test.get("kwargs") or {}
    else:
        lines = [line for line in str(test["input"]).split("\n") if line.strip()]
        args, kwargs, rule = [parse_json(line) for line in lines], {}, "livecodebench"
    if "expected_json" in test:
        expected = parse_json(test["expected_json"])
    elif "expected" in test:
        expected = test["expected"]
    else:
        expected = parse_json(test["output"])
        rule = "livecodebench"
    encoded = encode(expected)
    return {
        "kind": "call",
        "args": call_args(args, kwargs),
        "expected": base64.b64encode(encoded).decode(),
        "plain": plain_encoded(encoded),
        "rule": test.get("rule") or rule,
    }
