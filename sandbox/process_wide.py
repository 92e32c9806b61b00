"""One instance per process, made on first use and closed when the process exits: the default
math grader, code grader and grading service behind ``verify_math``, ``verify_code`` and the
reward adapters (each owns worker processes, so making one per call would be wasteful)."""

from __future__ import annotations

import atexit
import threading
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class ProcessWide(Generic[T]):
    def __init__(self, factory: Callable[[], T]):
        self._factory = factory
        self._instance: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._instance is None:
                self._instance = self._factory()
                atexit.register(self._instance.close)  # type: ignore[attr-defined]
            return self._instance
