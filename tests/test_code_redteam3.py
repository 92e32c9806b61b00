"""Red team, round 3: a policy hunting for reward against the code verifier and the server.

Each class is a mechanism, tested with hostile programs sent through the public entry points:
the expected output's shape read from the sandbox's own memory (frames, the garbage collector,
raw memory through ``ctypes``); program code that ran on the codec's allowance instead of the
call's clock (a replaced call-server function, a profile hook, a class the arguments are
rebuilt into); a ``StopIteration`` that ended the test's ``map`` early; one bad string that
failed a whole server batch, and non-finite numbers the server accepted; and honest programs
our syntax check refused. Every verdict is asserted with its reason, and the host's state
afterwards (no process, no zombie).
"""

import ast
import json
import struct
import time

import httpx
import pytest
from code_helpers import checked_grader, verdict
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvr.sandbox.code.rules.extract import check_python_syntax
from rlvr.sandbox.code.running.channels import BatchReader


@pytest.fixture(scope="module")
def grader():
    yield from checked_grader()


# ---- 1. nothing of the expected output in the sandbox ------------------------------------------
#: Finds whatever the sandbox holds of the expected output: the frames above the program (the
#: supervisor's, forked), every object the garbage collector tracks (dicts, sequences, object
#: attributes, compiled patterns), and every anonymous readable byte of its memory (``ctypes``;
#: ``/proc/self/mem`` is closed to it). The needles are the canary expected output's text and
#: every number derived from it (its whitespace run 123457 and that run + 1 and + 2; its length
#: 685312; the room it makes, 2741 KiB = 2806784 bytes), written so that the program's own
#: text holds none of them.
MEMORY_SEARCH = r"""
import ctypes, gc, re, sys

WANTED = frozenset({123456 + 1, 123456 + 2, 123456 + 3, 2740 + 1, 2806783 + 1, 685311 + 1})
TEXT = re.compile(rb"Kx7Qp-canar[y]|12345[7-9]|280678[4]|68531[2]")


def hit(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value in WANTED:
        return value
    if isinstance(value, (str, bytes, bytearray)):
        found = TEXT.search(value.encode("utf-8", "replace") if isinstance(value, str) else bytes(value))
        return found and found.group()
    if isinstance(value, re.Pattern):
        return hit(value.pattern)
    return None


def scan(where, values, found):
    for value in values:
        got = hit(value)
        if got is not None:
            found.append(f"{where}:{got!r}")


def search():
    found = []
    frame = sys._getframe()
    while frame is not None:
        scan("frame", list(frame.f_locals.values()), found)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            scan("dict", list(obj.values()), found)
        elif isinstance(obj, (list, tuple)):
            scan("seq", list(obj), found)
        else:
            attrs = getattr(obj, "__dict__", None)
            scan("attr", list(attrs.values()) if isinstance(attrs, dict) else [], found)
            scan("object", [obj], found)
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if not fields[1].startswith("r") or (len(fields) > 5 and fields[5] not in ("[heap]", "[stack]")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        got = TEXT.search(ctypes.string_at(start, end - start))
        if got:
            found.append(f"mem:{got.group()!r}")
    return sorted(set(found))
"""
CANARY_LINE = "Kx7Qp-canary a" + " " * 123457 + "b"
CANARY_OUTPUT = CANARY_LINE + "\n" + "c" * (685312 - len(CANARY_LINE) - 1)
CANARY_VALUE = "Kx7Qp-canary-Zz9"
U32 = struct.Struct("!I")


@pytest.mark.parametrize("compare", [None, "livecodebench", "python"])
def test_a_stdin_test_leaves_nothing_of_its_expected_output_in_the_sandbox(grader, compare):
    """Old code: the supervisor held the longest whitespace run and the room for the output
    (the request's ``graded`` dict, the sink's attributes, its compiled pattern), all found."""
    assert len(CANARY_OUTPUT.strip()) == 685312
    program = MEMORY_SEARCH + (
        "\ninput()\nreport = search()\nif report:\n    raise RuntimeError('found ' + ' '.join(report)[:150])\n"
        "print('clean')\n"
    )
    options = {"compare": compare} if compare else {}
    v = verdict(grader, program, [{"input": "1", "output": CANARY_OUTPUT}], limits={"time_s": 20}, **options)
    assert v.reason == "wrong_answer" and "found" not in v.detail, v.detail


@pytest.mark.parametrize("mode", ["call", "livecodebench", "assert"])
def test_call_and_assert_tests_leave_nothing_of_their_expected_value_in_the_sandbox(grader, mode):
    """Pinned (the expected value of a call or assert test never crossed into the program's
    sandbox before either): the search finds nothing, so the function returns 'clean'."""
    program = MEMORY_SEARCH + (
        "\ndef f(x):\n    report = search()\n    if report:\n"
        "        raise ValueError('found ' + ' '.join(report)[:150])\n    return 'clean'\n"
    )
    tests = {
        "call": [{"args": [1], "expected": CANARY_VALUE}],
        "livecodebench": [{"input": "1", "output": json.dumps(CANARY_VALUE), "testtype": "functional"}],
        "assert": [{"testtype": "assert", "code": f"assert f(1) == {CANARY_VALUE!r}"}],
    }[mode]
    v = verdict(grader, program, tests, fn_name="f", limits={"time_s": 20})
    assert v.reason == "wrong_answer" and "found" not in v.detail, v.detail


#: The attack itself: read a rule's number from the supervisor's frames or the collector.
FIND_FORM = """
import gc, sys
def find(key):
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict):
                if key in value:
                    return value[key]
                if isinstance(value.get("graded"), dict) and key in value["graded"]:
                    return value["graded"][key]
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and key in obj and "system_exit" in obj:
            return obj[key]
    return None
"""


def test_the_whitespace_run_cannot_be_read_from_memory(grader):
    """Old code: ``ok`` (the run's length, 37, was in the supervisor's memory)."""
    program = FIND_FORM + "\nrun = find('run')\ninput()\nprint('a' + ' ' * (run or 1) + 'b')\n"
    v = verdict(grader, program, [{"input": "1", "output": "a" + " " * 37 + "b"}])
    assert v.reason == "wrong_answer", v.detail


def test_the_room_for_the_output_cannot_be_read_from_memory(grader):
    """The same input, two expected outputs; old code: both pass (the room told 100 from 5,000
    characters), a blind program passes at most one."""
    program = FIND_FORM + "\nkb = find('stdout_kb')\ninput()\nprint('L' * 5000 if kb and kb > 70 else 'short')\n"
    tests = [{"input": "1", "output": "short"}, {"input": "1", "output": "L" * 5000}]
    v = verdict(grader, program, tests, partial=True)
    assert not v.correct and v.passed == 1, (v.reason, v.detail)


# ---- 2. every CPU-second of the program's code on the call's clock -----------------------------
BURN = """
import sys, time
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
"""
#: 0.8 s in the function and 0.8 s outside it: together past a 1 s limit, each alone within it
#: and within the old codec allowance (1 s).
CODEC_ROUTES = {
    "patched send": BURN
    + """
child = sys.modules["rlvr.sandbox.code.isolation.child"]
real = child._send
def patched(fd, data):
    if data[:2] == b"SR":  # the answer goes out in one write, after encoding: work before it
        burn(0.8)
    real(fd, data)
child._send = patched
def f(x):
    burn(0.8)
    return [42]
""",
    "profile hook": BURN
    + """
def f(x):
    burn(0.8)
    out = []
    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__init__" and "values" in frame.f_code.co_filename:
            sys.setprofile(None)
            burn(0.8)
            out.append(42)
    sys.setprofile(hook)
    return out
""",
    "all inside": BURN + "\ndef f(x):\n    burn(1.6)\n    return [42]\n",
}


@pytest.mark.parametrize("route", sorted(CODEC_ROUTES))
def test_work_around_the_call_is_charged_to_the_call(grader, route):
    """Old code: ``ok`` for the patched send and the profile hook (the value was finished
    while the result was encoded, on the codec's own allowance); ``time_limit`` all inside."""
    v = verdict(grader, CODEC_ROUTES[route], [{"args": [1], "expected": [42]}], fn_name="f", limits={"time_s": 1})
    assert v.reason == "time_limit", (route, v.reason, v.detail)


NODE_SETUP = "class Node:\n    def __init__(self, val):\n        self.val = val\n"


@pytest.mark.parametrize("outside", [True, False])
def test_a_class_the_arguments_are_rebuilt_into_runs_on_the_calls_clock(grader, outside):
    """The program defines the class a test's arguments are rebuilt into; its ``__new__`` runs
    while the arguments are decoded. Old code: ``ok`` with 0.8 s there and 0.8 s in the
    function; ``time_limit`` with 1.6 s in the function."""
    new_s, call_s = (0.8, 0.8) if outside else (0.0, 1.6)
    program = BURN + (
        f"\nclass Node:\n    def __new__(cls, *a):\n        burn({new_s})\n        return object.__new__(cls)\n"
        f"def f(node):\n    burn({call_s})\n    return node.val * 2\n"
    )
    tests = [{"testtype": "assert", "code": "assert f(Node(21)) == 42"}]
    v = verdict(grader, program, tests, fn_name="f", test_setup=NODE_SETUP, limits={"time_s": 1})
    assert v.reason == "time_limit", (outside, v.reason, v.detail)


def test_one_clock_holds_every_phase_of_a_call():
    """The mechanism under the three routes: from the request to the complete answer, the
    reader's CPU budget and deadline never move (old code: a fresh allowance while arguments
    were decoded and again while the result was encoded), and the call is charged all of it."""
    cpu = {"now": 10.0}
    batch = BatchReader(lambda: cpu["now"], 1 << 20, [(1.0, 2.0), (1.0, 2.0)], cpu_from=7.5)
    assert batch.cpu_limit() == 8.5  # the previous batch ended at 7.5: the gap is the call's
    deadline = batch.deadline()
    value = b"x" * 10
    for step, chunk in enumerate([b"S", b"R", b"V" + U32.pack(len(value)), value, U32.pack(0)]):
        cpu["now"] += 0.2
        time.sleep(0.001)  # the batch reads the sandbox's CPU at most every 0.1 ms
        assert batch.cpu_limit() == 8.5 and batch.deadline() == deadline, step
        batch.feed(chunk, time.monotonic(), batch.sandbox_cpu)
    assert batch.outcomes[0].result == value
    assert batch.outcomes[0].cpu_ms == pytest.approx((11.0 - 7.5) * 1000)
    assert batch.cpu_limit() == pytest.approx(12.0)  # the next call starts where this one ended


# ---- 3. a StopIteration from the program ends no iteration of the test -------------------------
def test_stop_iteration_from_the_program_is_a_runtime_error(grader):
    """PEP 479's rule at the call boundary. Old code: ``ok`` (the exception ended the test's
    ``map``, so ``all`` saw nothing false)."""
    tests = [{"testtype": "assert", "code": "assert all(map(lambda x: f(x) == x + 1, [1, 2, 3]))"}]
    for raised in ("StopIteration", "StopAsyncIteration"):
        v = verdict(grader, f"def f(x):\n    raise {raised}\n", tests, fn_name="f")
        assert v.reason == "runtime_error" and "PEP 479" in v.detail, (raised, v.detail)
    honest = (
        "def f(x):\n    it = iter([])\n    try:\n        next(it)\n    except StopIteration:\n        return x + 1\n"
    )
    assert verdict(grader, honest, tests, fn_name="f").reason == "ok"
    expects = [{"testtype": "assert", "code": "try:\n    f(0)\n    assert False\nexcept ValueError:\n    pass"}]
    assert verdict(grader, "def f(x):\n    raise ValueError(x)\n", expects, fn_name="f").reason == "ok"


# ---- 5. the syntax check accepts what the interpreter compiles --------------------------------
def elif_chain(n: int) -> str:
    return "def f(x):\n    if x == 0:\n        return 0\n" + "".join(
        f"    elif x == {i}:\n        return {i}\n" for i in range(1, n)
    )


def test_a_thousand_branch_elif_chain_is_a_program(grader):
    """Old code: ``compile_error`` (RecursionError compiling the ``ast.parse`` tree)."""
    program = elif_chain(1000)
    v = verdict(grader, program, [{"args": [999], "expected": 999}], fn_name="f")
    assert v.reason == "ok", v.detail
    unfenced = grader.verify(program, [{"args": [500], "expected": 500}], fn_name="f")
    assert unfenced.reason == "ok", unfenced.detail


FAMILIES = {
    "elif": elif_chain,
    "or": lambda n: "def f(x):\n    return " + " or ".join(f"x == {i}" for i in range(n)) + "\n",
    "and/or": lambda n: "y = " + " ".join(f"a{i} {'and' if i % 2 else 'or'}" for i in range(n)) + " z\n",
    "plus": lambda n: "y = " + " + ".join(["1"] * n) + "\n",
    "not": lambda n: "y = " + "not " * n + "1\n",
    "attr": lambda n: "y = a" + ".b" * n + "\n",
    "parens": lambda n: "y = " + "(" * n + "1" + ")" * n + "\n",
    "nested if": lambda n: "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass\n",
}


def _interpreter_compiles(source: str) -> bool:
    try:
        compile(source, "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(FAMILIES)), st.integers(1, 3500))
def test_the_syntax_check_agrees_with_compile(family, n):
    source = FAMILIES[family](n)
    try:
        check_python_syntax(source)
        ours = True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        ours = False
    assert ours == _interpreter_compiles(source), (family, n)


def test_the_syntax_check_still_lifts_only_the_digit_cap():
    check_python_syntax("x = " + "7" * 5000 + "\n")
    with pytest.raises(SyntaxError):
        check_python_syntax("def f(:\n")
    assert isinstance(ast.parse("x = 1"), ast.Module)


# ---- 4. the server answers every item on its own ---------------------------------------------
def raw_post(server, path, text):
    return httpx.post(server.url + path, content=text, headers={"content-type": "application/json"}, timeout=120)


MATH_OK = {"id": "ok", "kind": "math", "completion": r"\boxed{2}", "answer": "2"}


def test_a_lone_surrogate_is_that_items_bad_input(server):
    """Old code: HTTP 500 for the whole batch (the answer could not be encoded) or a judge
    crash; the ``\\ud800`` escape is valid JSON and decodes to a lone surrogate."""
    items = [
        json.dumps(MATH_OK),
        r'{"id": "id\ud800", "kind": "math", "completion": "\\boxed{2}", "answer": "2"}',
        r'{"id": "math", "kind": "math", "completion": "\\boxed{2}\ud800", "answer": "2"}',
        r'{"id": "code", "kind": "code", "completion": "print(1) # \udfff", "tests": [{"input": "", "output": "1"}]}',
        r'{"id": "input", "kind": "code", "completion": "print(1)", "tests": [{"input": "\ud800", "output": "1"}]}',
        json.dumps({**MATH_OK, "id": "last"}),
    ]
    r = raw_post(server, "/v1/grade", '{"items": [' + ", ".join(items) + "]}")
    assert r.status_code == 200, r.text
    rows = r.json()["results"]
    assert [row["id"] for row in rows] == ["ok", "id\\ud800", "math", "code", "input", "last"]
    assert [row["reason"] for row in rows] == ["ok", "bad_input", "bad_input", "bad_input", "bad_input", "ok"]
    r = raw_post(server, "/get_reward", r'{"query": ["\\boxed{2}", "\\boxed{2}\ud800"], "labels": ["2", "2"]}')
    assert r.status_code == 200 and r.json()["rewards"] == [1.0, 0.0], r.text
    r = raw_post(server, "/run_code", r'{"code": "print(1) # \ud800", "language": "python"}')
    assert r.status_code == 422 and "code" in r.json()["error"], r.text


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"items": [%s], "timeout": NaN}' % json.dumps(MATH_OK), "timeout"),
        ('{"items": [%s], "timeout": Infinity}' % json.dumps(MATH_OK), "timeout"),
        ('{"items": [%s], "timeout": 1e999}' % json.dumps(MATH_OK), "timeout"),
        (
            '{"items": [{"kind": "code", "completion": "x", "tests": [{"input": "", "time_s": -Infinity}]}]}',
            "items[0].tests[0].time_s",
        ),
        ('{"items": [{"kind": "code", "completion": "x", "tests": "t", "limits": {"time_s": NaN}}]}', "limits.time_s"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(server, body, field):
    """Old code: ``"timeout": NaN`` was accepted (NaN compares false with every bound)."""
    r = raw_post(server, "/v1/grade", body)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"] and "finite" in r.json()["error"], r.text
