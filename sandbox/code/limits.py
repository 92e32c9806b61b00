"""Resource limits for one submission, with the defaults a code reward needs."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Per-test and per-submission limits. Every one is enforced, not advisory.

    Attributes:
        time_s: CPU seconds per test (RLIMIT_CPU, plus a per-call budget in call mode).
        wall_factor, wall_grace_s: wall clock per test = time_s * wall_factor + wall_grace_s, so a
            sleeping program is stopped too.
        total_s: wall clock for the whole submission, compile included.
        memory_mb: address space per process (RLIMIT_AS); exceeding it is ``memory_limit``.
        output_kb: stdout (and separately stderr) bytes read per test; more is ``output_limit``.
        processes: processes/threads the sandbox uid may hold (RLIMIT_NPROC).
        open_files, file_kb, scratch_mb: descriptors, size of one written file, size of /tmp.
        compile_time_s, compile_memory_mb: limits for the compiler of compiled languages.
        float_abs_tol, float_rel_tol: token-wise float tolerance when comparing outputs.
    """

    time_s: float = 4.0
    wall_factor: float = 1.5
    wall_grace_s: float = 0.5
    total_s: float = 60.0
    memory_mb: int = 1024
    output_kb: int = 1024
    processes: int = 32
    open_files: int = 64
    file_kb: int = 16384
    scratch_mb: int = 64
    compile_time_s: float = 20.0
    compile_memory_mb: int = 2048
    float_abs_tol: float = 1e-6
    float_rel_tol: float = 1e-6

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"limit {f.name} must be a non-negative number, got {value!r}")
        if self.time_s <= 0 or self.memory_mb < 16 or self.processes < 1:
            raise ValueError("time_s must be positive, memory_mb at least 16, processes at least 1")

    @property
    def wall_s(self) -> float:
        return self.time_s * self.wall_factor + self.wall_grace_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_any(cls, value: "Limits | dict[str, Any] | None", **overrides: Any) -> "Limits":
        if value is None:
            base = cls()
        elif isinstance(value, Limits):
            base = value
        else:
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise ValueError(f"unknown limit(s) {sorted(unknown)}; known: {[f.name for f in fields(cls)]}")
            base = cls(**value)
        return replace(base, **overrides) if overrides else base
