"""Shared helpers for the code-verifier tests."""

import json
import os
import time

from conftest import ROOT

MAP = {
    "AC": "ok",
    "WA": "wrong_answer",
    "TLE": "time_limit",
    "MLE": "memory_limit",
    "OLE": "output_limit",
    "RE": "runtime_error",
    "CE": "compile_error",
}
CASES = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "verifier_cases_code.jsonl").open()]


def allowed_reasons(expected: str) -> set[str]:
    words = expected.replace("(", " ").replace(")", " ").replace(",", " ").split()
    if "never" in words:
        words = words[: words.index("never")]
    return {MAP[w] for w in words if w in MAP}


def case_item(case: dict) -> dict:
    """Convert a survey case (program + tests in its own schema) to a verify_code item. The
    survey's float tolerance is a per-test opt-in; its functional cases are JSON values
    compared LiveCodeBench's way (a tuple result stands for a list)."""
    t = case["tests"]
    lim = t.get("limits", {})
    limits = {"time_s": lim.get("time_s", 4), "memory_mb": lim.get("memory_mb", 1024)}
    for src, dst in (("output_kb", "output_kb"), ("max_processes", "processes"), ("compile_time_s", "compile_time_s")):
        if src in lim:
            limits[dst] = lim[src]
    tolerance = {key: lim[src] for key, src in (("atol", "float_abs_tol"), ("rtol", "float_rel_tol")) if src in lim}
    compare = None
    if t["mode"] == "stdio":
        tests = [{"input": c["stdin"], "output": c["stdout"], "testtype": "stdin", **tolerance} for c in t["cases"]]
    elif t["mode"] == "functional":
        tests = [{"args": c["args"], "expected": c["expected"]} for c in t["cases"]]
        compare = "livecodebench"
    else:
        tests = [{"testtype": "assert", "code": "\n".join(t["asserts"])}]
    return {
        "completion": case["program"],
        "tests": tests,
        "fn_name": t.get("entry_point"),
        "language": t["language"],
        "limits": limits,
        "compare": compare,
    }


def process_count() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def sandbox_processes() -> list[int]:
    """Processes running as a sandbox uid that are ours (descendants of this test process) or
    nobody's (orphaned to init): there must be none between submissions. Another grader's
    sandboxes running on the same machine (a second test run) are not counted."""
    from rlvr.sandbox.code.isolation.primitives import SANDBOX_UID_BASE

    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as fh:
                    for line in fh:
                        if line.startswith("Uid:") and int(line.split()[1]) >= SANDBOX_UID_BASE:
                            found.append(int(name))
            except OSError:
                pass
    if not found:
        return found
    parents = _parents()
    return [pid for pid in found if pid in parents and (parents[pid][1] == 1 or _descends(pid, parents, {os.getpid()}))]


def zombies(grace_s: float = 1.0, roots: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Zombies under this test process, or under ``roots`` (processes that were ours before a
    shutdown may have orphaned them), that one of our processes failed to reap. Other processes
    on the machine are not ours, and a child caught between its exit and its parent's wait is
    given ``grace_s`` to be reaped."""
    deadline = time.monotonic() + grace_s
    while True:
        parents = _parents()
        ours = {os.getpid(), *roots}
        found = [pid for pid, (state, _) in parents.items() if state == "Z" and _descends(pid, parents, ours)]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def descendants() -> set[int]:
    """This test process's descendants now (``zombies(roots=...)`` after they are shut down)."""
    parents = _parents()
    return {pid for pid in parents if _descends(pid, parents, {os.getpid()})}


def _parents() -> dict[int, tuple[str, int]]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                parents[int(name)] = (fields[0], int(fields[1]))
            except (OSError, IndexError, ValueError):
                pass
    return parents


def _descends(pid: int, parents: dict[int, tuple[str, int]], ancestors: set[int]) -> bool:
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid][1]
        if pid in ancestors:
            return True
    return False


def checked_grader():
    """A warmed ``CodeGrader`` of two workers for a module's fixture; once the module is done, no
    sandbox process and no zombie may be left behind."""
    from rlvr.sandbox import CodeGrader

    grader = CodeGrader(workers=2)
    grader.warm_up()
    yield grader
    ours = descendants()
    grader.close()
    assert not sandbox_processes()
    assert not zombies(roots=ours)


def verdict(grader, program, tests, **options):
    """The verdict of ``program`` (fenced as a completion); a sandbox error is always a test failure."""
    v = grader.verify(f"```python\n{program}\n```", tests, **options)
    assert v.reason != "sandbox_error", v.detail
    return v
