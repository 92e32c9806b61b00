"""Isolation claims, each checked with a hostile program and host-side facts after the run."""

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from code_helpers import sandbox_processes, zombies
from conftest import ROOT
from rlvr.sandbox import CodeGrader


@pytest.fixture(scope="module")
def grader():
    g = CodeGrader(workers=2)
    g.warm_up()
    yield g
    g.close()


def check(grader, probe, limits=None):
    """Probes print OK when every check inside them holds, else the names of failed checks."""
    verdict = grader.verify(probe, [{"input": "", "output": "OK"}], limits=limits or {})
    assert verdict.reason == "ok", verdict.detail


def test_expected_outputs_are_not_in_the_sandbox_memory(grader):
    secret = secrets.token_hex(12)
    probe = f"""
import gc
needle = "{secret[:12]}" + "{secret[12:]}"
found = []
for obj in gc.get_objects():
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for v in list(values):
        if isinstance(v, str) and needle in v and v is not needle:
            found.append("object")
try:
    maps = open("/proc/self/maps").read().splitlines()
    with open("/proc/self/mem", "rb", buffering=0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if perms.startswith("r") and "[v" not in line:
                lo, hi = (int(x, 16) for x in addr.split("-"))
                try:
                    mem.seek(lo)
                    if mem.read(hi - lo).count(needle.encode()) > 2:
                        found.append("memory")
                except (OSError, OverflowError, ValueError):
                    pass
except OSError:
    pass
print("FOUND " + " ".join(found) if found else "NOTFOUND")
"""
    verdict = grader.verify(probe, [{"input": "", "output": f"expected output {secret}"}])
    assert verdict.reason == "wrong_answer"
    assert "NOTFOUND" in verdict.detail, verdict.detail


def test_what_the_program_sees(grader):
    probe = r"""
import os
failed = []
def need(name, ok):
    if not ok:
        failed.append(name)
need("uid", os.getuid() != 0 and os.geteuid() != 0 and os.getgroups() == [])
need("hostname", os.uname().nodename == "sandbox")
TOP = {"usr", "bin", "lib", "lib64", "sbin", "tmp", "proc", "dev", "etc", "root", "prog", "site"}
need("root", set(os.listdir("/")) <= TOP)
need("site", set(os.listdir("/site")) <= {"numpy", "numpy.libs", "sortedcontainers"})
need("etc", sorted(os.listdir("/etc")) == ["ld.so.cache", "passwd"])
need("home", not os.path.exists("/home"))
need("roothome", not os.path.isdir("/root") or os.listdir("/root") == [".pyenv"])
need("pids", len([p for p in os.listdir("/proc") if p.isdigit()]) == 2 and os.path.exists("/proc/1"))
need("net", [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]] == ["lo"])
ENV = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE"}
ENV |= {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}
need("env", set(os.environ) <= ENV)
status = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status")}
need("nonewprivs", status["NoNewPrivs"] == "1")
need("seccomp", status["Seccomp"] == "2")
need("caps", int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0)
PROBES = (("/usr/probe", False), ("/probe", False), ("/etc/probe", False), ("/prog/probe", False))
for path, should in PROBES + (("/site/probe", False), ("/tmp/probe", True)):
    try:
        open(path, "w").write("x")
        need(path, should)
    except OSError:
        need(path, not should)
try:
    os.kill(1, 9)
    need("kill1", False)
except PermissionError:
    pass
print("OK" if not failed else " ".join(failed))
"""
    check(grader, probe)


def test_host_secrets_in_the_environment_do_not_reach_the_program(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    grader = CodeGrader(workers=1)
    probe = (
        "import os\n"
        "try:\n    raw = open('/proc/self/environ', 'rb').read()\nexcept OSError:\n    raw = b''\n"
        "print('OK' if os.environ.get('HF_TOKEN') is None and b'hf_secret' not in raw else 'LEAK')\n"
    )
    try:
        check(grader, probe)
    finally:
        grader.close()


def test_no_temp_dirs_processes_or_zombies_leak(grader):
    before = set(os.listdir(tempfile.gettempdir()))
    programs = [
        "print(1)",
        "import os\nos.fork()\nprint(1)",
        "import subprocess\nsubprocess.Popen(['sleep', '100'])\nprint(1)",
        "open('/tmp/x','w').write('y')\nprint(1)",
    ]
    verdicts = grader.verify_batch([{"completion": p, "tests": [{"input": "", "output": "1"}] * 3} for p in programs])
    assert all(v.reason in ("ok", "wrong_answer") for v in verdicts), verdicts
    assert not sandbox_processes()
    assert not zombies()
    assert set(os.listdir(tempfile.gettempdir())) - before == set()


def test_fork_bomb_does_not_disturb_concurrent_honest_runs(grader):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    honest = "print(sum(range(int(input()))))"
    results = {}

    def run_bomb():
        results["bomb"] = grader.verify(bomb, [{"input": "", "output": "1"}], limits={"time_s": 2, "processes": 64})

    thread = threading.Thread(target=run_bomb)
    thread.start()
    honest_verdicts = [grader.verify(honest, [{"input": "1000", "output": "499500"}]) for _ in range(5)]
    thread.join()
    assert results["bomb"].reason in ("time_limit", "runtime_error")
    assert all(v.correct for v in honest_verdicts)
    assert not sandbox_processes()


def test_output_flood_keeps_the_judge_small(grader):
    verdict = grader.verify(
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        [{"input": "", "output": "1"}],
        limits={"output_kb": 256},
    )
    assert verdict.reason == "output_limit"
    for pid in grader.pool.pids():
        with open(f"/proc/{pid}/status") as fh:
            rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))
        assert rss < 200_000


def test_refuses_to_run_unsafely_without_isolation(monkeypatch):
    monkeypatch.setenv("RLVR_SANDBOX_ISOLATION", "off")
    grader = CodeGrader(workers=1)
    try:
        refused = grader.verify("print(1)", [{"input": "", "output": "1"}])
        allowed = grader.verify("print(1)", [{"input": "", "output": "1"}], unsafe=True)
    finally:
        grader.close()
    assert refused.reason == "sandbox_error"
    assert "isolation unavailable" in refused.detail and "unsafe" in refused.detail
    assert allowed.reason == "ok"


def _can_run_as_nobody() -> bool:
    try:
        return (
            subprocess.run(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    sys.executable,
                    "-c",
                    "import sandbox, subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)",
                ],
                capture_output=True,
                timeout=60,
                env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                cwd="/tmp",
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(
    os.geteuid() != 0 or not _can_run_as_nobody(),
    reason="needs root and an interpreter that an unprivileged user can run",
)
def test_non_root_callers_are_refused_not_run_unsafely():
    script = (
        "from rlvr.sandbox import verify_code\nv = verify_code('print(1)', [{'input': '', 'output': "
        "'1'}])\nprint(v.reason)\nprint(v.detail)\n"
    )
    proc = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(ROOT)},
        cwd="/tmp",
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == "sandbox_error", proc.stderr
    assert "need root" in lines[1]


def test_packages_under_tmp_are_reachable_inside_the_sandbox():
    """The sandbox covers /tmp with its own tmpfs: bind sources under /tmp (a CI checkout's
    virtual environment) must still be bound in (before the fix every code test there failed)."""
    from rlvr.sandbox.code.isolation.primitives import CLONE_NEWNS, RootLayout, build_root, default_layout, unshare

    if os.getuid() != 0:
        pytest.skip("building a sandbox root needs root (as the sandbox itself does)")
    site = Path(tempfile.mkdtemp(dir="/tmp", prefix="rlvr-site-"))
    try:
        (site / "probe_pkg").mkdir()
        (site / "probe_pkg" / "__init__.py").write_text("VALUE = 42\n")
        base = default_layout()
        layout = RootLayout(
            base.readonly_dirs, base.readonly_files, base.symlinks, ((str(site / "probe_pkg"), "probe_pkg"),)
        )
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                unshare(CLONE_NEWNS)
                build_root(layout, 16, 64, 64)
                code = 0 if open("/site/probe_pkg/__init__.py").read() == "VALUE = 42\n" else 3
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        shutil.rmtree(site)
