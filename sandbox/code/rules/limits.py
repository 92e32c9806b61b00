"""Resource limits for one submission, with the defaults a code reward needs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

#: Largest value each limit may take at all (a typo such as ``memory_mb=100000`` is refused, not
#: run); servers apply their own, lower caps on what clients send (``cap``).
MAXIMA: dict[str, float] = {
    "time_s": 3600.0,
    "wall_factor": 10.0,
    "wall_grace_s": 60.0,
    "total_s": 7200.0,
    "memory_mb": 65536,
    "output_kb": 1 << 20,
    "processes": 4096,
    "open_files": 65536,
    "file_kb": 1 << 22,
    "scratch_mb": 16384,
    "scratch_files": 1 << 20,
    "result_mb": 1024,
    "compile_time_s": 600.0,
    "compile_memory_mb": 65536,
}


@dataclass(frozen=True)
class Limits:
    """Per-test and per-submission limits. Every one is enforced, not advisory.

    Attributes:
        time_s: CPU seconds per test (for a functional test: per call), measured by the
            supervisor for the whole sandbox (cgroup), children and threads included.
        wall_factor, wall_grace_s: wall clock per test = time_s * wall_factor + wall_grace_s, so a
            sleeping or blocked program is stopped too.
        total_s: wall clock for the whole submission, compile included.
        memory_mb: memory of the whole sandbox (every process together, a cgroup); where the
            machine has no usable cgroup, the address space of each process (RLIMIT_AS).
        output_kb: stdout bytes kept per test; more is ``output_limit``. A graded stdin test
            keeps stdout as its comparison reads it (whitespace it ignores is not counted) and
            has room for four times its expected output if that is more; stderr, and stdout
            during functional calls, are drained and never a limit.
        processes: processes and threads the sandbox may hold at once.
        open_files, file_kb: descriptors per process, size of one written file.
        scratch_mb, scratch_files: size and file count (inodes) of the per-test ``/tmp``.
        result_mb: size of one encoded functional result.
        compile_time_s, compile_memory_mb: limits for the compiler of compiled languages.
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
    scratch_files: int = 4096
    result_mb: int = 64
    compile_time_s: float = 20.0
    compile_memory_mb: int = 2048

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"limit {f.name} must be a number, got {value!r}")
            if value > MAXIMA[f.name]:
                raise ValueError(f"limit {f.name}={value!r} exceeds the maximum {MAXIMA[f.name]:g}")
        positive = (
            "time_s",
            "total_s",
            "output_kb",
            "processes",
            "open_files",
            "file_kb",
            "scratch_mb",
            "scratch_files",
            "result_mb",
            "compile_time_s",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"limit {name} must be positive, got {getattr(self, name)!r}")
        if self.wall_factor < 1 or self.wall_grace_s < 0:
            raise ValueError("wall_factor must be at least 1 and wall_grace_s not negative")
        if self.memory_mb < 16 or self.compile_memory_mb < 16:
            raise ValueError("memory_mb and compile_memory_mb must be at least 16")
        if self.open_files < 16:
            raise ValueError("open_files must be at least 16 (the interpreter needs a few)")
        for name, value, which in (
            ("open_files", self.open_files, "RLIMIT_NOFILE"),
            ("processes", self.processes, "RLIMIT_NPROC"),
            ("file_kb", self.file_kb * 1024, "RLIMIT_FSIZE"),
        ):
            hard = _hard_limit(which)
            if hard is not None and value > hard:
                shown = hard // 1024 if name == "file_kb" else hard
                raise ValueError(
                    f"limit {name}={getattr(self, name)} exceeds this machine's hard limit ({which} {shown}); lower it"
                )

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


def check_caps(value: "Limits | dict[str, Any] | None", caps: dict[str, float], where: str = "limits") -> None:
    """Refuse client-supplied limits above a server's caps (``ValueError`` naming the field)."""
    if value is None:
        return
    given = value.to_dict() if isinstance(value, Limits) else dict(value)
    for name, cap in caps.items():
        if name in given and isinstance(given[name], (int, float)) and given[name] > cap:
            raise ValueError(f"{where}.{name}: {given[name]!r} exceeds this server's cap of {cap:g}")


def _hard_limit(name: str) -> int | None:
    """The hard rlimit of this process (sandboxes inherit it: a limit above it cannot be set
    without CAP_SYS_RESOURCE, which containers often lack)."""
    try:
        import resource

        hard = resource.getrlimit(getattr(resource, name))[1]
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    return None if hard == -1 else hard


#: Limits a sandbox is not built for: its supervisor receives them with the program, in the judge's
#: first frame (``Box.open``), so a spare sandbox built ahead serves a submission whose values
#: differ (EvalPlus gives each task its own ``total_s``: a spare keyed on it was thrown away and
#: built again for a third of HumanEval+'s submissions). Only ``total_s`` varies that way.
LATE_LIMITS = ("total_s",)


def late_limits(limits: Limits) -> dict[str, Any]:
    """The ``LATE_LIMITS`` values of ``limits``, as the judge sends them to the supervisor."""
    return {name: getattr(limits, name) for name in LATE_LIMITS}


#: How stdin tests get their process: ``test`` (fresh per test) or ``submission`` (one runner).
STDIN_PROCESSES = ("test", "submission")


def stdin_process_of(value: str) -> str:
    if value not in STDIN_PROCESSES:
        raise ValueError(f"stdin_process must be one of {', '.join(STDIN_PROCESSES)}, got {value!r}")
    return value
