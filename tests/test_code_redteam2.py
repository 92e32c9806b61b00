"""Red team, round 2: a policy hunting for reward against the code verifier.

Each class is a mechanism, tested with hostile programs: a value whose encoding would run the
program's code after its clock stopped; bytes on the result channel that the decoder must
classify (zero item sizes, a dtype with a huge field list); a comparison that would make numpy
broadcast inside the judge; a batch of calls that would outlive the judge's deadline; memory the
program leaves charged after its processes die (System V shared memory); test rows that would
pass any program; and three honest programs the verifier used to fail. Every verdict is asserted
with its reason, never ``sandbox_error`` for something the program did, and the host's state
afterwards (no process, no zombie).
"""

import struct
import time

import pytest
from code_helpers import checked_grader, verdict
from rlvr.sandbox.code.rules.testcases import call_args, encode_b64
from rlvr.sandbox.code.running import values

U32 = struct.Struct("!I")


@pytest.fixture(scope="module")
def grader():
    yield from checked_grader()


def forged_answer(payload: bytes) -> str:
    """A function that writes its own answer frame on the result channel (fd 4), then stalls
    (the child writes ``S`` and ``R`` with its answer, so a forged answer carries them too)."""
    frame = b"SRV" + U32.pack(len(payload)) + payload + U32.pack(0)
    return f"import os, time\ndef f(*a):\n    os.write(4, {frame!r})\n    time.sleep(30)\n"


def numpy_value(tag: int, dtype: bytes, shape: list[int], raw: bytes) -> bytes:
    out = bytearray([values.VERSION, tag, values.STR])
    values._varuint(len(dtype), out)
    out += dtype
    if tag == values.NP_ARRAY:
        values._varuint(len(shape), out)
        for dim in shape:
            values._varuint(dim, out)
    out.append(values.BYTES)
    values._varuint(len(raw), out)
    return bytes(out + raw)


ZERO_ITEM_FORGERIES = [
    numpy_value(values.NP_ARRAY, b"<U0", [5], b""),
    numpy_value(values.NP_ARRAY, b"|S0", [1 << 40], b""),
    numpy_value(values.NP_SCALAR, b"<U0", [], b"abcd"),
    numpy_value(values.NP_SCALAR, b"|V0", [], b""),
]


@pytest.mark.parametrize("payload", ZERO_ITEM_FORGERIES)
def test_zero_item_size_values_are_the_programs_failure(grader, payload):
    program = forged_answer(payload)
    for tests in (
        [{"args": [1], "expected": ""}],  # call format
        [{"input": "1", "output": '""', "testtype": "functional"}],  # LiveCodeBench functional
    ):
        v = verdict(grader, program, tests, fn_name="f", limits={"time_s": 1})
        assert v.reason == "wrong_answer" and "unreadable return value" in v.detail, v.detail


def test_a_dtype_with_a_huge_field_list_costs_the_judge_nothing(grader):
    program = """
import os, struct, time
def varuint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))
def f(*a):
    fields = b",".join([b"i4"] * 200_000)
    payload = bytes([1, %d, %d]) + varuint(len(fields)) + fields + bytes([%d, 0])
    os.write(4, b"SRV" + struct.pack("!I", len(payload)) + payload + struct.pack("!I", 0))
    time.sleep(30)
""" % (values.NP_SCALAR, values.STR, values.BYTES)
    start = time.monotonic()
    v = verdict(grader, program, [{"args": [1], "expected": 1}], fn_name="f", limits={"time_s": 1})
    assert v.reason == "wrong_answer" and "not carried" in v.detail, v.detail
    assert time.monotonic() - start < 5


def test_encoding_a_result_never_runs_the_programs_code(grader):
    """A metaclass property read while the result is encoded would compute after the call's
    clock stopped; the encoder reads type names through ``type``'s own descriptors."""
    program = """
import time
class Lazy(type):
    @property
    def __module__(cls):
        t = time.process_time()
        while time.process_time() - t < 3:
            pass
        return "builtins"
class Answer(metaclass=Lazy):
    pass
class Sneaky(int):
    @property
    def __class__(self):
        raise SystemExit(3)
def f(kind):
    return Answer() if kind == "lazy" else Sneaky(7)
"""
    start = time.monotonic()
    v = verdict(grader, program, [{"args": ["lazy"], "expected": 1}], fn_name="f", limits={"time_s": 1})
    assert v.reason == "wrong_answer" and "<Answer object>" in v.detail, v.detail
    assert time.monotonic() - start < 2.5, "the property ran"
    assert verdict(grader, program, [{"args": ["int"], "expected": 7}], fn_name="f").reason == "ok"


def test_constructor_and_stdout_flush_run_on_the_calls_clock(grader):
    program = """
import sys, time
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
class Slow:
    def write(self, text):
        return len(text)
    def flush(self):
        burn(3)
class Solution:
    def __init__(self):
        burn(3)
    def f(self, x):
        return x
def g(x):
    sys.stdout = Slow()
    return x
"""
    for fn_name in ("f", "g"):
        v = verdict(grader, program, [{"args": [1], "expected": 1}], fn_name=fn_name, limits={"time_s": 1})
        assert v.reason == "time_limit", (fn_name, v.reason, v.detail)


def test_an_array_compared_with_a_list_is_not_broadcast_in_the_judge(grader):
    program = "import numpy as np\ndef f(n):\n    return np.arange(500_000).reshape(-1, 1)\n"
    start = time.monotonic()
    for compare in ("python", "evalplus", "livecodebench", "close"):
        v = verdict(
            grader, program, [{"args": [1], "expected": list(range(2_000))}], fn_name="f", compare={"rule": compare}
        )
        assert v.reason == "wrong_answer" and "shape" in v.detail, (compare, v.detail)
    assert time.monotonic() - start < 20


@pytest.mark.slow
def test_fast_answers_then_stalls_end_at_total_s(grader):
    """Each call stays under its own limit, the batch would not: ``total_s`` holds call by call."""
    program = "import time\ndef f(i):\n    if i >= 20:\n        time.sleep(1.8)\n    return i\n"
    start = time.monotonic()
    v = verdict(
        grader,
        program,
        [{"args": [i], "expected": i} for i in range(300)],
        fn_name="f",
        limits={"time_s": 1, "total_s": 4},
    )
    assert v.reason == "time_limit" and "total" in v.detail, v.detail
    assert time.monotonic() - start < 4 + 5
    stdin = "import time\nprint(input())\ntime.sleep(1.8)\n"
    start = time.monotonic()
    v = verdict(grader, stdin, [{"input": "1\n", "output": "1\n"}] * 20, limits={"time_s": 1, "total_s": 4})
    assert v.reason == "time_limit" and "total" in v.detail, v.detail
    assert time.monotonic() - start < 4 + 5


SYSV = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.shmat.restype = ctypes.c_void_p
def hold(mb):
    ident = libc.shmget(0, mb << 20, 0o1600)
    if ident < 0:
        return False
    address = libc.shmat(ident, None, 0)
    ctypes.memset(address, 1, mb << 20)
    libc.shmdt(ctypes.c_void_p(address))
    return True
"""


def test_memory_left_in_system_v_segments_is_the_programs(grader):
    """Segments outlive their processes; they are charged to the program's memory cgroup (never
    the supervisor's) and removed after every test, so the next test starts without them."""
    limits = {"memory_mb": 160, "time_s": 2}
    stdin = SYSV + "hold(100)\nprint('x' * (900 << 10))\n"
    v = verdict(grader, stdin, [{"input": "", "output": "x" * (900 << 10)}] * 4, limits=limits)
    assert v.reason == "ok", v.detail
    call = SYSV + "def f(n):\n    hold(100)\n    return b'y' * (n << 20)\n"
    v = verdict(grader, call, [{"args": [40], "expected": b"y" * (40 << 20)}] * 2, fn_name="f", limits=limits)
    assert v.reason in ("ok", "memory_limit"), v.detail
    # calls share one process: two segments of 100 MiB are the program's 200 MiB
    v = verdict(grader, call, [{"args": [1], "expected": b"y" * (1 << 20)}] * 3, fn_name="f", limits=limits)
    assert v.reason == "memory_limit" and v.first_failure == 1, v.detail


def test_test_rows_that_would_pass_any_program_are_bad_input(grader):
    program = "def f(x):\n    return 42\n"
    no_expectation = [{"args_encoded": call_args([1]), "testtype": "functional"}]
    v = grader.verify(program, no_expectation, fn_name="f")
    assert v.reason == "bad_input" and "test 0" in v.detail and not v.verifiable
    missing = [{"args_encoded": call_args([1]), "expected_digest": "ab" * 32, "expected_size": 3}]
    v = grader.verify(program, missing, fn_name="f")
    assert v.reason == "bad_input" and "test 0" in v.detail
    present = [{"args_encoded": call_args([1]), "expected_encoded": encode_b64(42)}]
    assert grader.verify(program, present, fn_name="f").reason == "ok"


def test_honest_programs_the_verifier_used_to_fail(grader):
    # a literal past Python's 4300-digit cap (the caller checked syntax with the cap on)
    big = "x = " + "9" * 5000 + "\nprint(len(str(x)))\n"
    assert verdict(grader, big, [{"input": "", "output": "5000"}]).reason == "ok"
    assert grader.verify(big, [{"input": "", "output": "5000"}]).reason == "ok"  # unfenced
    broken = "x = " + "9" * 5000 + " +\n"
    assert grader.verify(f"```python\n{broken}```", [{"input": "", "output": ""}]).reason == "compile_error"
    # numpy's empty string equals ''
    program = "import numpy as np\ndef f():\n    return np.str_('')\n"
    assert verdict(grader, program, [{"args": [], "expected": ""}], fn_name="f").reason == "ok"


def test_a_function_that_shadows_a_builtin_can_pass():
    """Mbpp/126 defines ``sum``: the benchmark names it as the entry point, so the asserts'
    ``sum`` is the program's."""
    from rlvr.harness.benchmarks.registry import load_problems
    from rlvr.sandbox import verify_code

    (problem,) = [p for p in load_problems("mbpp") if p.id.endswith("/126")]
    assert problem.gold["fn_name"] == "sum"
    options = {k: v for k, v in problem.gold.items() if k != "tests"}
    right = verify_code(problem.solution, problem.gold["tests"], **options)
    assert right.reason == "ok", right.detail
    wrong = verify_code("```python\ndef sum(a, b):\n    return a + b\n```", problem.gold["tests"], **options)
    assert wrong.reason == "wrong_answer"
