"""Test lists a judge has seen, by digest: a benchmark problem's tests reach each judge once
(``PreparedTests``), later requests name them by their SHA-256."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

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
        if hashlib.sha256(request["tests_text"].encode()).hexdigest() != digest:
            raise ValueError("tests_text does not match tests_ref")
        TESTS_CACHE[digest] = json.loads(request["tests_text"])
        while len(TESTS_CACHE) > TESTS_CACHE_SIZE:
            TESTS_CACHE.popitem(last=False)
    if digest in TESTS_CACHE:
        TESTS_CACHE.move_to_end(digest)
        return TESTS_CACHE[digest]
    return None
