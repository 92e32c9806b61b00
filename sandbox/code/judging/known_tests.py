"""Test lists a judge has seen, by digest: a benchmark problem's tests reach each judge once
(``PreparedTests``), later requests name them by their SHA-256. Tests stored in the blob store
(cached EvalPlus tests) are read from there: they never cross the pipe."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

from rlvr.sandbox.code.judging import blobs

#: Test lists seen by digest (``PreparedTests``): a benchmark problem's tests arrive once.
TESTS_CACHE: "OrderedDict[str, list[dict[str, Any]]]" = OrderedDict()
TESTS_CACHE_SIZE = 128


def tests_of(request: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's tests: sent in full, sent once with their digest, or known by digest (None:
    the caller must send them)."""
    if "tests" in request:
        return request["tests"]
    digest = request.get("tests_ref")
    if "tests_text" in request:
        _remember(digest, request["tests_text"])
    if digest in TESTS_CACHE:
        TESTS_CACHE.move_to_end(digest)
        return TESTS_CACHE[digest]
    if request.get("tests_blob"):
        try:
            _remember(digest, blobs.load(request["tests_blob"]).decode())
        except (OSError, ValueError):
            return None  # gone, corrupt or not these tests: the caller sends the text
        return TESTS_CACHE[digest]
    return None


def _remember(digest: str | None, text: str) -> None:
    """Keep the tests ``text`` holds under ``digest``, if it is their SHA-256 (``ValueError``
    if not: a judge never keeps tests under another list's name)."""
    if hashlib.sha256(text.encode()).hexdigest() != digest:
        raise ValueError("tests_text does not match tests_ref")
    TESTS_CACHE[digest] = json.loads(text)
    while len(TESTS_CACHE) > TESTS_CACHE_SIZE:
        TESTS_CACHE.popitem(last=False)
