"""What the zygote prepares once so that each sandbox's PID 1 does not (issue 41).

A sandbox's PID 1 is a fresh fork of the zygote, and every page it writes is copied: work done
once in the zygote (limits parsed, the sandbox's import path found in the root template, host
modules dropped, a fixed pattern compiled) is work no sandbox repeats. These tests pin that the
sandbox still sees what it saw when PID 1 did that work itself.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rlvr.sandbox.code.isolation import child
from rlvr.sandbox.code.isolation.primitives import isolation_available, read_bytes, write_bytes
from rlvr.sandbox.code.isolation.zygote import PRELOAD, Zygote
from rlvr.sandbox.code.rules.limits import Limits
from rlvr.sandbox.code.running.output import SANDBOX_RUN, StrippedLines, shorten_runs
from rlvr.sandbox.code.verify import CodeGrader
from rlvr.sandbox.wire import compact_json

ROOT = Path(__file__).resolve().parents[1]
ISOLATED = isolation_available()[0]

SANDBOX_VIEW = """
import os, sys
import numpy
host = [m for m in sys.modules if m.split(".")[:2] in (["rlvr", "harness"], ["rlvr", "trainers"])]
path_ok = sys.path[-1] == "/site" and all(os.path.isdir(p) for p in sys.path[:-1])
print("OK" if not host and path_ok else f"host modules {host[:5]} path {sys.path}")
"""


def judge_in_fresh_process(program: str, tests: list[dict], *, unsafe: bool = False, preamble: str = "") -> dict:
    """``program`` graded on ``tests`` in a fresh interpreter that runs ``preamble``, then forks
    a zygote (isolated unless ``unsafe``) and loads the judge, as ``judge_main`` does; the
    judge's reply."""
    script = "\n".join(
        [
            "import json",
            preamble,
            "from rlvr.sandbox.code.isolation import box",
            "from rlvr.sandbox.code.isolation.primitives import isolation_available",
            "from rlvr.sandbox.code.isolation.zygote import start_zygote",
            f"isolation = (True, '') if {unsafe!r} else isolation_available()",
            f"zygote = start_zygote(not {unsafe!r})",
            "from rlvr.sandbox.code.judging import judge",
            "judge.ISOLATION, box.ZYGOTE = isolation, zygote",
            "from rlvr.sandbox.code.verify import CodeGrader",
            f"_, request, _ = CodeGrader(workers=1, unsafe={unsafe!r}).prepare({program!r}, {tests!r})",
            "print(json.dumps(judge.handle(dict(request))))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_the_shared_frame_encoder_writes_what_json_dumps_did(value):
    assert compact_json(value) == json.dumps(value, separators=(",", ":"))


def test_write_bytes_writes_exactly_with_the_mode_whatever_the_umask(tmp_path):
    path = tmp_path / "main.py"
    path.write_text("old content that is longer than the new one\n")
    data = "print('é')\n\udcff".encode("utf-8", "surrogateescape")
    old = os.umask(0o777)
    try:
        write_bytes(str(path), data, 0o444)
    finally:
        os.umask(old)
    assert path.read_bytes() == data
    assert path.stat().st_mode & 0o777 == 0o444


def test_read_bytes_reads_past_one_read(tmp_path):
    path = tmp_path / "big"
    data = os.urandom(200_000)
    path.write_bytes(data)
    assert read_bytes(str(path)) == data
    with pytest.raises(FileNotFoundError):
        read_bytes(str(tmp_path / "missing"))


def test_planned_import_path_keeps_only_directories_in_the_template(tmp_path, monkeypatch):
    kept, dropped = sys.path[1], "/nonexistent/rlvr-probe"
    (tmp_path / kept.lstrip("/")).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [kept, dropped, ""])
    monkeypatch.setattr(child, "_PLANNED_PATH", None)
    child.plan_import_path(str(tmp_path))
    assert child._PLANNED_PATH == [kept, child.SITE_DIR]


def test_zygote_parses_each_setups_limits_once_and_bounds_what_it_keeps():
    zygote = Zygote(isolated=False)
    setup = {"language": "python", "limits": {"time_s": 2.0}}
    first = zygote.limits_of(setup, "key")
    assert first == Limits(time_s=2.0)
    assert zygote.limits_of({"language": "python", "limits": {"time_s": 9.0}}, "key") is first
    for n in range(200):
        zygote.limits_of({"language": "python", "limits": {"time_s": 1.0 + n}}, f"k{n}")
    assert len(zygote.parsed) <= 64
    with pytest.raises(ValueError):
        zygote.limits_of({"language": "python", "limits": {"no_such_limit": 1}}, "bad")


def test_the_sandbox_pattern_is_shared_and_shortens_as_before():
    a, b = StrippedLines(1 << 20, SANDBOX_RUN), StrippedLines(1 << 20, SANDBOX_RUN)
    assert a.long_run is b.long_run
    text = b"a" + b" \t" * 40 + b"b"
    assert shorten_runs(text, 3) == b"a    b"
    assert shorten_runs(b"a   b", 3) == b"a   b"


@pytest.mark.skipif(not ISOLATED, reason="needs the sandbox's isolation (root, namespaces)")
def test_a_sandbox_sees_the_template_import_path_and_no_host_modules_of_its_zygotes_caller():
    """The zygote is forked here from a process that has loaded the harness (as a caller
    embedding the judge would): the program still sees none of it, and an import path of
    directories that exist in the sandbox, ending in ``/site``, from which numpy imports."""
    reply = judge_in_fresh_process(
        SANDBOX_VIEW,
        [{"input": "", "output": "OK"}],
        preamble="import rlvr.harness.grading  # the caller's own modules, loaded before the zygote forks",
    )
    assert reply.get("passed") == 1, reply


ENVIRONMENT_VIEW = """
import json, os
env = dict(os.environ)
home, tmp = env.pop("HOME", None), env.pop("TMPDIR", None)
print("OK" if env == EXPECTED and home == tmp == os.getcwd() else json.dumps([home, tmp, env]))
"""


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_program_sees_exactly_the_sandbox_environment(unsafe, monkeypatch):
    """The zygote makes its environment the sandbox's once (isolated) and a test child checks
    only that marker; without isolation each child rebuilds it. Either way a program sees
    ``SANDBOX_ENV`` with ``HOME``/``TMPDIR`` at its scratch directory, and nothing of the
    judge's environment (a secret set before the zygote was forked)."""
    if not unsafe and not ISOLATED:
        pytest.skip("needs the sandbox's isolation (root, namespaces)")
    monkeypatch.setenv("RLVR_PROBE_SECRET", "hf_probe_secret")
    expected = {k: v for k, v in child.SANDBOX_ENV.items() if k not in ("HOME", "TMPDIR")}
    program = f"EXPECTED = {expected!r}\n" + ENVIRONMENT_VIEW
    reply = judge_in_fresh_process(program, [{"input": "", "output": "OK"}] * 2, unsafe=unsafe)
    assert reply.get("passed") == 2, reply


FORK_HOOKS_VIEW = """
import sys
loaded = [m for m in ("threading", "logging", "multiprocessing", "concurrent.futures") if m in sys.modules]
print("OK" if not loaded else f"loaded before the program: {loaded}")
"""


@pytest.mark.parametrize("unsafe", [False, True])
def test_no_module_that_hooks_fork_is_loaded_in_a_judges_zygote(unsafe):
    """Every sandbox process is a fork of the zygote, itself a fork of the judge: a module loaded
    before that fork that registers an after-fork handler (``threading``, ``logging``) runs that
    handler in every PID 1 and test process, and its writes are copy-on-write faults (~160 per
    sandbox, ~80 per further test, measured when ``blobs`` imported ``threading``). A program
    sees none of them loaded."""
    if not unsafe and not ISOLATED:
        pytest.skip("needs the sandbox's isolation (root, namespaces)")
    reply = judge_in_fresh_process(FORK_HOOKS_VIEW, [{"input": "", "output": "OK"}] * 2, unsafe=unsafe)
    assert reply.get("passed") == 2, reply


JUDGE_ONLY_VIEW = """
import sys
JUDGE_ONLY = (
    "rlvr.sandbox.code.judging.judge", "rlvr.sandbox.code.judging.compare", "rlvr.sandbox.code.judging.known_tests",
    "rlvr.sandbox.code.judging.blobs", "hmac", "secrets", "shutil", "bz2", "lzma", "platform",
)
loaded = [m for m in JUDGE_ONLY if m in sys.modules]
missing = [m for m in PRELOAD if m not in sys.modules]
print("OK" if not loaded and not missing else f"loaded before the program: {loaded}; preloads missing: {missing}")
"""


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_judges_zygote_holds_its_preloads_and_nothing_only_the_judge_uses(unsafe):
    """Through the pool, as users grade: a judge forks its zygote before loading its own
    modules (``judge_main``), and the sandbox's modules load nothing only the judge uses
    (``secrets`` with ``hmac``, ``shutil`` with ``bz2``/``lzma``, ``platform``). Every sandbox
    process copies the zygote's page tables at fork and frees them at exit. And every preload is
    there: a module that was loaded by accident and is no longer (``hashlib``, ~6 CPU-ms to import
    in a test process) would be paid again by every test that imports it."""
    if not unsafe and not ISOLATED:
        pytest.skip("needs the sandbox's isolation (root, namespaces)")
    grader = CodeGrader(workers=1, unsafe=unsafe)
    try:
        program = f"PRELOAD = {PRELOAD!r}\n" + JUDGE_ONLY_VIEW
        verdict = grader.verify(program, [{"input": "", "output": "OK"}] * 2)
    finally:
        grader.close()
    assert verdict.reason == "ok", verdict.detail


IPC_SWEEP = """
import ctypes, os, sys
from rlvr.sandbox.code.isolation.ipc import remove_ipc_objects
from rlvr.sandbox.code.isolation.primitives import unshare
unshare(0x08000000)  # CLONE_NEWIPC: a namespace of this process's own, never the host's
libc = ctypes.CDLL(None, use_errno=True)
made = [libc.shmget(0, 1 << 16, 0o600), libc.shmget(0, 1 << 16, 0o600), libc.semget(0, 3, 0o600), libc.msgget(0, 0o600)]
assert all(m >= 0 for m in made), made
print(remove_ipc_objects(), remove_ipc_objects())
"""


@pytest.mark.skipif(not ISOLATED, reason="needs the sandbox's isolation (root, namespaces)")
def test_the_ipc_sweep_removes_every_segment_semaphore_set_and_queue():
    """PID 1 sweeps System V objects after every test with declared ``shmctl``/``semctl``/
    ``msgctl`` calls (no ctypes objects made after the fork): in a fresh IPC namespace holding
    two segments, a semaphore set and a queue it removes all four, then finds nothing."""
    done = subprocess.run(
        [sys.executable, "-c", IPC_SWEEP], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["4", "0"]


def test_a_uid_is_not_handed_out_again_while_remembered(monkeypatch):
    """The zygote remembers its last ``REMEMBERED_UIDS`` uids in order and as a set (a draw is
    a set lookup, not a scan of the window): a uid drawn again inside the window is redrawn,
    one that has left the window may come back, and the two records never disagree."""
    zygote = Zygote(isolated=False)
    monkeypatch.setattr(Zygote, "REMEMBERED_UIDS", 3)
    draws = iter([1, 2, 1, 3, 2, 4, 1, 5, 4, 6, 7])
    monkeypatch.setattr("rlvr.sandbox.code.isolation.zygote.sandbox_uid", lambda: next(draws))
    handed = [zygote.uid() for _ in range(7)]
    assert handed == [1, 2, 3, 4, 1, 5, 6]
    assert list(zygote.recent_uids) == [1, 5, 6] and zygote.recent_uid_set == {1, 5, 6}
