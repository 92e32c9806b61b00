"""Red team: hostile programs against ``verify_code``, one or more per attack class.

Each test asserts the verdict, its reason (never one the program chose, never ``sandbox_error``
for something the program did) and the host's state afterwards: no canary read (a root-only
file, a variable in the caller's environment, a key in the caller's session keyring), no process
left, nothing left in the host's temporary directory.
"""

import ctypes
import os
import secrets
import socket
import tempfile
import time

import pytest
from code_helpers import descendants, sandbox_processes, zombies
from rlvr.sandbox import CodeGrader
from rlvr.sandbox.code.rules.limits import Limits

SECRET_FILE = secrets.token_hex(16)
SECRET_ENV = secrets.token_hex(16)
SECRET_KEY = secrets.token_hex(16)
SECRETS = (SECRET_FILE, SECRET_ENV, SECRET_KEY)
NR_ADD_KEY, KEY_SPEC_SESSION_KEYRING = 248, -3


def _plant_key() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    payload = SECRET_KEY.encode()
    key = libc.syscall(NR_ADD_KEY, b"user", b"rlvr-canary", payload, len(payload), KEY_SPEC_SESSION_KEYRING)
    return key > 0


@pytest.fixture(scope="module")
def grader():
    canary = tempfile.NamedTemporaryFile(prefix="rlvr-canary-", dir=tempfile.gettempdir(), delete=False)
    canary.write(SECRET_FILE.encode())
    canary.close()
    os.chmod(canary.name, 0o600)
    os.environ["RLVR_CANARY"] = SECRET_ENV
    _plant_key()
    before = set(os.listdir(tempfile.gettempdir()))
    g = CodeGrader(workers=2)
    g.warm_up()
    yield g
    ours = descendants()
    g.close()
    os.environ.pop("RLVR_CANARY", None)
    os.unlink(canary.name)
    assert not sandbox_processes()
    assert not zombies(roots=ours)
    left = {name for name in set(os.listdir(tempfile.gettempdir())) - before if not name.startswith("pytest-of-")}
    assert left == set(), left


def halves(values):
    return [(v[: len(v) // 2], v[len(v) // 2 :]) for v in values]


MEMORY = r'''
def scan_memory():
    """Own memory, every readable mapping (the needles themselves are there a few times)."""
    try:
        maps = open("/proc/self/maps").read().splitlines()
        with open("/proc/self/mem", "rb", buffering=0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                if perms.startswith("r"):
                    lo, hi = (int(x, 16) for x in addr.split("-"))
                    try:
                        mem.seek(lo)
                        look(mem.read(hi - lo), "memory", allowed=4)
                    except (OSError, OverflowError, ValueError):
                        pass
    except OSError:
        pass
'''


def verdict(grader, program, tests, **options):
    v = grader.verify(f"```python\n{program}\n```", tests, **options)
    text = f"{v.detail} {v.extracted}"
    assert not any(s in text for s in SECRETS), "a canary reached the verdict"
    assert v.reason != "sandbox_error", v.detail
    return v


SCAN = r"""
import os
SECRETS = [a + b for a, b in {parts!r}]  # built here: the program text holds only halves
found = []
def look(data, where, allowed=0):
    for s in SECRETS:
        if data.count(s.encode()) > allowed:
            found.append(where)
for root in ("/", "/tmp", "/prog", "/site", "/etc", "/proc/self", "/proc/1"):
    try:
        names = os.listdir(root)
    except OSError:
        continue
    for name in names:
        path = os.path.join(root, name)
        try:
            if os.path.isfile(path) and os.path.getsize(path) < 1 << 20:
                look(open(path, "rb").read(), path)
        except OSError:
            pass
try:
    look(open("/proc/self/environ", "rb").read(), "environ")
    look(open("/proc/keys", "rb").read(), "keys")
except OSError:
    pass
"""


# ---- 1. assert-style tests ---------------------------------------------------------------------
ASSERT_TESTS = [
    {"testtype": "assert", "code": "assert add(2, 3) == 5"},
    {"testtype": "assert", "code": "assert add(-1, 1) == 0"},
]


def test_honest_assert_solution_passes(grader):
    assert verdict(grader, "def add(a, b):\n    return a + b", ASSERT_TESTS).correct


def test_always_equal_object_fails_assert_tests(grader):
    program = (
        "class E:\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return "
        "False\ndef add(a, b):\n    return E()"
    )
    assert verdict(grader, program, ASSERT_TESTS).reason == "wrong_answer"


def test_exiting_early_with_status_zero_is_not_a_pass(grader):
    v = verdict(grader, "import os\ndef add(a, b):\n    os._exit(0)", ASSERT_TESTS)
    assert v.reason == "wrong_answer" and not v.correct
    v = verdict(grader, "import sys\nsys.exit(0)\ndef add(a, b):\n    return 0", ASSERT_TESTS)
    assert not v.correct


def test_frame_walking_finds_no_completion_marker_or_expected_values(grader):
    program = r"""
import gc, sys
def add(a, b):
    seen = []
    frame = sys._getframe()
    while frame is not None:
        seen.append(frame.f_code.co_name)
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            if isinstance(value, str) and ("assert" in value or "nonce" in value):
                return value
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, str) and "assert add" in obj:
            return obj
    return None
"""
    v = verdict(grader, program, ASSERT_TESTS)
    assert v.reason == "wrong_answer"


def test_the_test_code_is_not_in_the_programs_sandbox(grader):
    marker = secrets.token_hex(8)
    tests = [{"testtype": "assert", "code": f"assert add(1, 2) == 3, '{marker}'"}]
    program = (
        SCAN.format(parts=halves([marker]))
        + MEMORY
        + r"""
def add(a, b):
    scan_memory()
    return 3 if not found else -1
"""
    )
    assert verdict(grader, program, tests).correct  # nothing found: the honest answer passes


# ---- 2. the program cannot choose its verdict reason ------------------------------------------------
def test_self_chosen_exit_codes_signals_and_stderr_are_runtime_errors(grader):
    stdin = [{"input": "", "output": "1"}]
    cases = [
        "import os\nos._exit(97)",
        "import os, sys\nprint('std::bad_alloc', file=sys.stderr, flush=True)\nos._exit(3)",
        "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "raise MemoryError()",
        "import os\nos.abort()",
    ]
    for program in cases:
        assert verdict(grader, program, stdin).reason == "runtime_error", program
    # SystemExit ends a stdin program normally, as in LiveCodeBench's runner: what it printed decides
    raised = "import sys\nprint('std::bad_alloc', file=sys.stderr)\nraise SystemExit(3)"
    assert verdict(grader, raised, stdin).reason == "wrong_answer"


def test_enormous_numbers_where_a_number_is_expected(grader):
    start = time.perf_counter()
    assert (
        verdict(grader, "import sys\nsys.stdout.write('9' * 900_000)", [{"input": "", "output": "5"}]).reason
        == "wrong_answer"
    )
    assert (
        verdict(grader, "def f():\n    return 10 ** 1_000_000", [{"args": [], "expected": 5}], fn_name="f").reason
        == "wrong_answer"
    )
    assert (
        verdict(grader, "def f():\n    return 1e308 * 10", [{"args": [], "expected": 10**400}], fn_name="f").reason
        == "wrong_answer"
    )
    assert (
        verdict(
            grader,
            "def f(xs):\n    return 10 ** 500",
            [{"args": [[-4, 0, 1]], "expected": 2.0}],
            fn_name="f",
            compare={"rule": "evalplus", "oracle": "find_zero", "atol": 1e-4},
        ).reason
        == "wrong_answer"
    )
    assert time.perf_counter() - start < 20


def test_forged_bytes_on_the_result_channel(grader):
    forgeries = [
        "os.write(4, b'SR' + b'V' + b'\\xff\\xff\\xff\\xff')",  # absurd length
        # count beyond data
        "os.write(4, b'SRV' + (6).to_bytes(4, 'big') + b'\\x01\\x0a\\xff\\xff\\xff\\x7f' + bytes(4))",
        "os.write(4, b'SRV' + (4).to_bytes(4, 'big') + b'\\x01\\x0a\\x01' + b'\\x0a' + bytes(4))",  # truncated
        "os.write(4, b'garbage' * 1000)",
        "os.write(4, b'SRV' + (203).to_bytes(4, 'big') + b'\\x01' + b'\\x0a\\x01' * 101 + bytes(4))",  # too deep
        "os.write(4, b'SRE' + (10 ** 6).to_bytes(4, 'big'))",
    ]
    for forge in forgeries:
        program = f"import os, time\ndef f(x):\n    {forge}\n    time.sleep(30)"
        v = verdict(grader, program, [{"args": [1], "expected": 1}], fn_name="f", limits={"time_s": 1})
        assert v.reason in ("wrong_answer", "output_limit", "time_limit"), (forge, v.reason, v.detail)


def test_a_forged_correct_looking_answer_still_has_to_be_correct(grader):
    from rlvr.sandbox.code.running.values import encode

    blob = encode(42)
    # the child writes S and R with the answer, after the call: the forgery is a whole answer
    program = (
        f"import os, time\ndef f(x):\n    os.write(4, b'SRV' + ({len(blob)}).to_bytes(4, 'big') + {blob!r} + "
        "bytes(4))\n    time.sleep(30)"
    )
    assert verdict(grader, program, [{"args": [1], "expected": 42}], fn_name="f").correct  # it knew the answer
    assert verdict(grader, program, [{"args": [1], "expected": 7}], fn_name="f").reason == "wrong_answer"


# ---- 3. nothing crosses from one submission to the next -------------------------------------------
def test_later_programs_find_nothing_of_earlier_ones(grader):
    marker = secrets.token_hex(10)
    first = grader.verify(f"```python\nSECRET = '{marker}'\nprint(SECRET)\n```", [{"input": "", "output": marker}])
    assert first.correct
    grader.verify(
        "def add(a, b):\n    return a + b", [{"testtype": "assert", "code": f"assert add(1, 1) == 2, '{marker}'"}]
    )
    probe = (
        SCAN.format(parts=halves([marker]))
        + MEMORY
        + "scan_memory()\nprint('CLEAN' if not found else 'LEAK ' + ' '.join(found))\n"
    )
    for _ in range(3):  # whichever judge and zygote the pool picks
        assert verdict(grader, probe, [{"input": "", "output": "CLEAN"}]).correct


def test_canaries_in_files_environment_and_keyring_are_out_of_reach(grader):
    probe = (
        SCAN.format(parts=halves(SECRETS))
        + MEMORY
        + r"""
import ctypes
scan_memory()
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(4096)
for keyring in (-3, -4, -5, -6):  # session, user, user-session, group
    if libc.syscall(250, 11, keyring, buf, 4096) > 0:  # KEYCTL_READ of the keyring
        look(buf.raw, "keyring")
if libc.syscall(250, 1, None) >= 0:  # join a session keyring
    found.append("keyctl allowed")
print("CLEAN" if not found else "LEAK " + " ".join(found))
"""
    )
    assert verdict(grader, probe, [{"input": "", "output": "CLEAN"}]).correct


def test_sandbox_uids_are_fresh_for_every_submission(grader):
    uids = set()
    for _ in range(12):
        v = grader.verify("import os\nprint(os.getuid())", [{"input": "", "output": "x"}])
        uids.add(v.detail.rsplit("got", 1)[-1])
    assert len(uids) == 12


# ---- 4. limits hold for the whole sandbox ----------------------------------------------------------
def test_memory_is_limited_across_forked_processes(grader):
    program = r"""
import os, time
children = []
for _ in range(12):
    pid = os.fork()
    if pid == 0:
        block = bytearray(200 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(5)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("done")
"""
    v = verdict(
        grader, program, [{"input": "", "output": "done"}], limits={"memory_mb": 256, "time_s": 10, "processes": 32}
    )
    assert not v.correct, v
    # with a cgroup the sandbox's memory is one budget: the kernel's OOM count says memory_limit
    assert v.reason == "memory_limit" or "no cgroup" in v.detail, v


def test_scratch_files_are_capped_and_scratch_must_be_positive(grader):
    program = (
        "import os\nn = 0\ntry:\n    while n < 200000:\n        open(f'/tmp/f{n}', 'w').close()\n        n += "
        "1\nexcept OSError:\n    pass\nprint(n)"
    )
    v = verdict(grader, program, [{"input": "", "output": "x"}], limits={"scratch_mb": 1, "scratch_files": 500})
    created = int(v.detail.rsplit("got '", 1)[1].rstrip("'"))
    assert created < 500
    assert grader.verify("print(1)", [{"input": "", "output": "1"}], limits={"scratch_mb": 0}).reason == "bad_input"


def test_limits_beyond_the_machine_are_refused_up_front():
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY:
        with pytest.raises(ValueError, match="open_files"):
            Limits(open_files=hard + 1)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=100_000)


# ---- 5. deadlines do not depend on the program --------------------------------------------------------
@pytest.mark.slow
def test_a_program_that_never_reads_its_large_input_times_out_at_its_limit(grader):
    start = time.perf_counter()
    v = verdict(
        grader, "import time\ntime.sleep(60)", [{"input": "x" * (50 << 20), "output": "1"}], limits={"time_s": 1}
    )
    assert v.reason == "time_limit" and time.perf_counter() - start < 10


@pytest.mark.slow
def test_a_program_that_blocks_before_reading_call_arguments(grader):
    start = time.perf_counter()
    v = verdict(
        grader,
        "import time\ntime.sleep(60)\ndef f(x):\n    return x",
        [{"args": ["y" * (20 << 20)], "expected": 1}],
        fn_name="f",
        limits={"time_s": 1},
    )
    assert v.reason in ("time_limit", "runtime_error") and time.perf_counter() - start < 15


def test_set_oracle_on_a_huge_list_is_linear(grader):
    start = time.perf_counter()
    v = verdict(
        grader,
        "def f():\n    return list(range(60000))",
        [{"args": [], "expected": list(range(59999))}],
        fn_name="f",
        compare={"rule": "evalplus", "oracle": "set"},
    )
    assert v.reason == "wrong_answer" and time.perf_counter() - start < 10
    crafted = "def f():\n    return [k * (2 ** 61 - 1) for k in range(60000)]"
    start = time.perf_counter()
    assert (
        verdict(
            grader, crafted, [{"args": [], "expected": [0]}], fn_name="f", compare={"rule": "evalplus", "oracle": "set"}
        ).reason
        == "wrong_answer"
    )
    assert time.perf_counter() - start < 10


# ---- 6. kernel surface --------------------------------------------------------------------------------
def test_system_calls_a_test_never_needs_are_refused(grader):
    probe = r"""
import ctypes, os, socket, errno
libc = ctypes.CDLL(None, use_errno=True)
open_ = []
def call(name, nr, *args):
    if libc.syscall(nr, *args) >= 0:
        open_.append(name)
call("io_uring_setup", 425, 8, ctypes.create_string_buffer(120))
call("keyctl", 250, 0, -3, 0)
call("pidfd_open", 434, 1, 0)
call("inotify_init1", 294, 0)
call("fanotify_init", 300, 0, 0)
call("unshare(user)", 272, 0x10000000)
call("unshare(net)", 272, 0x40000000)
call("mount", 165, b"none", b"/tmp", b"tmpfs", 0, None)
call("ptrace", 101, 16, 1, 0, 0)
call("perf_event_open", 298, ctypes.create_string_buffer(128), 0, -1, -1, 0)
call("bpf", 321, 0, None, 0)
call("userfaultfd", 323, 0)
call("setns", 308, 0, 0)
for family in (socket.AF_INET, socket.AF_INET6, 40, socket.AF_NETLINK, socket.AF_PACKET):
    try:
        socket.socket(family, socket.SOCK_DGRAM if family != socket.AF_PACKET else socket.SOCK_RAW)
        open_.append(f"socket {family}")
    except OSError:
        pass
a, b = socket.socketpair()
print("SEALED" if not open_ else "OPEN " + " ".join(open_))
"""
    v = verdict(grader, probe, [{"input": "", "output": "SEALED"}])
    assert v.correct, v.detail


def test_scratch_is_fresh_for_every_test_and_the_program_read_only(grader):
    program = r"""
import os
seen = os.path.exists("/tmp/marker")
open("/tmp/marker", "w").write("x")
try:
    open("/prog/solution.py", "a").write("print('tampered')")
    tampered = True
except OSError:
    tampered = False
print("fresh" if not seen and not tampered else "stale")
"""
    v = verdict(grader, program, [{"input": "", "output": "fresh"}] * 3)
    assert v.correct, v.detail


def test_a_compiled_program_cannot_replace_its_binary_for_later_tests(grader):
    program = r"""
#include <cstdio>
#include <cstdlib>
int main() {
    FILE *f = fopen("/prog/main", "wb");
    FILE *g = fopen("/tmp/seen", "r");
    printf("%s\n", (f == nullptr && g == nullptr) ? "fresh" : "stale");
    FILE *h = fopen("/tmp/seen", "w");
    if (h) fclose(h);
    return 0;
}
"""
    v = grader.verify(f"```cpp\n{program}\n```", [{"input": "", "output": "fresh"}] * 3, language="cpp")
    assert v.correct, v.detail


# ---- 7. and the classes already contained --------------------------------------------------------------
@pytest.mark.slow
def test_fork_bomb_daemons_and_floods_leave_nothing_behind(grader):
    cases = {
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass": (
            "time_limit",
            "runtime_error",
        ),
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\nprint(1)": ("ok",),
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)": ("output_limit",),
        "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)": ("time_limit",),  # drained, never read
    }
    for program, reasons in cases.items():
        v = verdict(grader, program, [{"input": "", "output": "1"}], limits={"time_s": 2})
        assert v.reason in reasons, (program, v.reason, v.detail)
    assert not sandbox_processes()


def test_host_escapes_stay_closed(grader):
    probe = r"""
import os, socket
bad = []
for path in ("/proc/1/root/etc/shadow", "/proc/1/root/root", "/home", "/root/.ssh", "/etc/shadow"):
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read()
        bad.append(path)
    except OSError:
        pass
try:
    os.setuid(0)
    bad.append("setuid")
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    bad.append("loopback")
except OSError:
    pass
print("CLOSED" if not bad else " ".join(bad))
"""
    assert verdict(grader, probe, [{"input": "", "output": "CLOSED"}]).correct


def test_the_judge_does_not_import_from_the_callers_directory(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    for name in ("json", "select", "secrets", "struct", "numpy"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    g = CodeGrader(workers=1)
    try:
        assert g.verify("print(1)", [{"input": "", "output": "1"}]).correct
    finally:
        g.close()
    assert not marker.exists()


def test_network_and_loopback_listener_are_unreachable(grader):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        probe = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    "
            "print('REACHED')\nexcept OSError:\n    print('BLOCKED')"
        )
        assert verdict(grader, probe, [{"input": "", "output": "BLOCKED"}]).correct
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
