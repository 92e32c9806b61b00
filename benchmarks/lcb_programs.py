"""Programs over the shipped LiveCodeBench problems for comparing our verdicts with LiveCodeBench's
own runner (``benchmarks/lcb_peer.py``, ``tests/test_code_livecodebench.py``).

Every problem gets a program correct by construction: it looks its answer up by a digest of the
input (the public tests are known), so it is right on exactly the tests both graders run. Mutants
of it change one thing each: the output format, the return type, how the program exits, state
kept on the ``Solution`` instance, time, or output volume. ``DEPARTURES`` are the classes where
our verdict deliberately differs from LiveCodeBench's (the README names each): programs correct
by any reading that its in-process harness fails, an object claiming equality, a sleep past its
wall-clock alarm. ``SLOW`` classes wait out a 6 s limit and run only in the slow test.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Callable

#: Class -> why we differ from LiveCodeBench there (our verdict is the first word).
DEPARTURES = {
    "open0": "pass: open(0) reads stdin (LiveCodeBench's `from builtins import *` binds the real open)",
    "stdin_buffer": "pass: sys.stdin.buffer exists (its stdin is a StringIO)",
    "stdout_buffer": "pass: sys.stdout.buffer exists (its stdout is a StringIO)",
    "quit_after": "pass: quit() ends the program (its reliability_guard sets builtins.quit = None)",
    "module_global": "pass: `global` names the module's variable (it wraps the program in a function)",
    "os_exit0": "pass: os._exit(0) after a flush is a normal exit (it ends its whole test process)",
    "os_write": "pass: os.write(1, ...) is output (it captures sys.stdout only)",
    "main_guard": "pass: `if __name__ == '__main__':` runs (it unwraps the guard only as the last statement)",
    "sleep_7s": "pass: limits are CPU seconds (its 6 s alarm is wall clock)",
    "always_equal": "fail: a program-defined object claiming equality equals nothing",
    "int_claims_equal": "fail: an int subclass compares by its integer value",
}
SLOW = {"sleep_7s", "busy_loop", "busy_loop_call"}
STDIN_HEAD = "import hashlib\nimport sys\n"
FLOOD = 3 << 20


def digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()[:16]


def stdin_key(data: str) -> str:
    return digest(" ".join(data.split()))


def call_key(args: list[Any]) -> str:
    return digest(json.dumps(args))


def _table(problem: Any) -> str:
    tests = problem.gold["tests"]
    if problem.gold.get("fn_name"):
        rows = {
            call_key([json.loads(line) for line in t["input"].split("\n") if line.strip()]): t["output"] for t in tests
        }
    else:
        rows = {stdin_key(t["input"]): t["output"].rstrip("\n") for t in tests}
    return "ANSWERS = " + repr(rows) + "\n"


# ---- stdin programs -----------------------------------------------------------------------------
READS = {
    "read": "data = sys.stdin.read()\n",
    "input": (
        "lines = []\nwhile True:\n    try:\n        lines.append(input())\n    except EOFError:\n        break\n"
        "data = '\\n'.join(lines)\n"
    ),
    "iterate": "data = ''.join(line for line in sys.stdin)\n",
}
LOOKUP = "ans = ANSWERS.get(hashlib.md5(' '.join(data.split()).encode()).hexdigest()[:16], '')\n"
PRINTS = {
    "print": "print(ans)\n",
    "write": "sys.stdout.write(ans)\n",
    "lines": "for line in ans.split('\\n'):\n    print(line)\n",
}

#: Class -> (read, what follows the look-up). ``ans`` holds the expected output.
STDIN_MUTANTS: dict[str, tuple[str, str]] = {
    "exit1_after": ("read", "print(ans)\nexit(1)\n"),
    "sys_exit_main": ("read", "def main():\n    print(ans)\n    return 3\n\n\nsys.exit(main())\n"),
    "exit_message_after": ("read", "print(ans)\nsys.exit('done')\n"),
    "exit0_before": ("read", "sys.exit(0)\nprint(ans)\n"),
    "exit1_midway": ("read", "print(ans.split('\\n')[0] if '\\n' in ans else '')\nsys.exit(1)\nprint(ans)\n"),
    "raise_after": ("read", "print(ans)\nraise RuntimeError('after the answer')\n"),
    "stderr_flood": ("read", f"print(ans)\nfor _ in range({FLOOD >> 16}):\n    sys.stderr.write('e' * 65536)\n"),
    "trailing_space_flood": ("read", f"for line in ans.split('\\n'):\n    print(line + ' ' * {FLOOD})\n"),
    "blank_line_flood": ("read", f"print(ans)\nsys.stdout.write('\\n' * {FLOOD})\n"),
    "leading_blank_flood": ("read", f"sys.stdout.write(' \\n' * {FLOOD >> 1})\nprint(ans)\n"),
    "interior_space_flood": ("read", f"print('\\n'.join((' ' * {FLOOD}).join(l.split()) for l in ans.split('\\n')))\n"),
    "stdout_flood": ("read", f"print(ans)\nprint('x' * {FLOOD})\n"),
    "crlf": ("read", "sys.stdout.write(ans.replace('\\n', '\\r\\n') + '\\r\\n')\n"),
    "double_space": ("read", "print('\\n'.join('  '.join(l.split()) for l in ans.split('\\n')))\n"),
    "float_format": (
        "read",
        "print('\\n'.join(' '.join(t + '.0' if t.lstrip('-').isdigit() else t for t in l.split()) "
        "for l in ans.split('\\n')))\n",
    ),
    "lowercase": ("read", "print(ans.lower())\n"),
    "off_by_one": (
        "read",
        "toks = ans.split(' ')\nfor i, t in enumerate(toks):\n    if t.strip().lstrip('-').isdigit():\n"
        "        toks[i] = str(int(t) + 1)\n        break\nelse:\n    toks.append('x')\nprint(' '.join(toks))\n",
    ),
    "missing_last_line": ("read", "print('\\n'.join(ans.split('\\n')[:-1]))\n"),
    "extra_line": ("read", "print(ans)\nprint(0)\n"),
    "no_trailing_newline": ("read", "print(ans, end='')\n"),
    "flush_each_line": ("read", "for line in ans.split('\\n'):\n    print(line, flush=True)\n"),
    "from_sys_stdin": ("from_sys", "print(ans)\n"),
    "readline_loop": ("readline", "print(ans)\n"),
    # departures
    "open0": ("open0", "print(ans)\n"),
    "stdin_buffer": ("buffer", "print(ans)\n"),
    "stdout_buffer": ("read", "sys.stdout.buffer.write(ans.encode() + b'\\n')\n"),
    "quit_after": ("read", "print(ans)\nquit()\n"),
    "module_global": (
        "read",
        "result = None\n\n\ndef solve():\n    global result\n    result = ans\n\n\nsolve()\nprint(result)\n",
    ),
    "os_exit0": ("read", "import os\nprint(ans)\nsys.stdout.flush()\nos._exit(0)\n"),
    "os_write": ("read", "import os\nos.write(1, (ans + '\\n').encode())\n"),
    "main_guard": ("read", "def main():\n    print(ans)\n\n\nif __name__ == '__main__':\n    main()\nmain = None\n"),
    "sleep_7s": ("read", "import time\ntime.sleep(7)\nprint(ans)\n"),
    "busy_loop": ("read", "while True:\n    pass\n"),
}
EXTRA_READS = {
    "open0": "data = open(0).read()\n",
    "buffer": "data = sys.stdin.buffer.read().decode()\n",
    "from_sys": "from sys import stdin\ndata = stdin.read()\n",
    "readline": (
        "parts = []\nwhile True:\n    line = sys.stdin.readline()\n    if not line:\n        break\n"
        "    parts.append(line)\ndata = ''.join(parts)\n"
    ),
}


def stdin_program(problem: Any, kind: str, style: int = 0) -> str:
    if kind == "correct":
        read, body = list(READS)[style % 3], list(PRINTS.values())[(style // 3) % 3]
    else:
        read, body = STDIN_MUTANTS[kind]
    return STDIN_HEAD + _table(problem) + {**READS, **EXTRA_READS}[read] + LOOKUP + body


# ---- functional programs ------------------------------------------------------------------------
CALL_HEAD = "import hashlib\nimport json\n\n"
CALL_LOOKUP = "value = json.loads(ANSWERS[hashlib.md5(json.dumps(list(args)).encode()).hexdigest()[:16]])"

#: Class -> (when it applies to an expected value, the method's body after ``value`` is known).
CALL_MUTANTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "correct": (lambda v: True, "return value"),
    "tuple_for_list": (lambda v: isinstance(v, list), "return tuple(value)"),
    "nested_tuples": (
        lambda v: isinstance(v, list) and v and isinstance(v[0], list),
        "return [tuple(x) for x in value]",
    ),
    "numpy_scalar": (lambda v: type(v) is int, "import numpy\n        return numpy.int64(value)"),
    "numpy_array": (lambda v: isinstance(v, list) and len(v) > 1, "import numpy\n        return numpy.array(value)"),
    "float_for_int": (lambda v: type(v) is int, "return float(value)"),
    "bool_for_int": (lambda v: type(v) is int and v in (0, 1), "return bool(value)"),
    "int_for_bool": (lambda v: type(v) is bool, "return int(value)"),
    "str_of_result": (lambda v: True, "return str(value)"),
    "none": (lambda v: v is not None, "return None"),
    "off_by_one": (
        lambda v: type(v) in (int, list, str, bool),
        "return (not value) if isinstance(value, bool) else value + 1 if isinstance(value, int) "
        "else value + [0] if isinstance(value, list) else value + 'x'",
    ),
    "generator": (lambda v: isinstance(v, list), "return iter(value)"),
    "print_flood": (lambda v: True, f"print('p' * {FLOOD})\n        return value"),
    "stderr_flood": (lambda v: True, f"import sys\n        sys.stderr.write('e' * {FLOOD})\n        return value"),
    "instance_counter": (
        lambda v: type(v) is int,
        "self.calls = getattr(self, 'calls', 0) + 1\n        return value if self.calls == 1 else value + 1",
    ),
    "instance_cache": (
        lambda v: True,
        "self.seen = getattr(self, 'seen', [])\n        self.seen.append(value)\n        return self.seen[-1]",
    ),
    "class_counter": (
        lambda v: type(v) is int,
        "type(self).calls = getattr(type(self), 'calls', 0) + 1\n"
        "        return value if type(self).calls == 1 else value + 1",
    ),
    "exit_in_call": (lambda v: True, "import sys\n        sys.exit(0)"),
    "raise_in_call": (lambda v: True, "raise ValueError('no')"),
    "always_equal": (
        lambda v: True,
        "class Any:\n            def __eq__(self, other):\n                return True\n\n        return Any()",
    ),
    "int_claims_equal": (
        lambda v: type(v) is int and v != 0,
        "class E(int):\n            def __eq__(self, other):\n                return True\n\n"
        "            __hash__ = int.__hash__\n\n        return E(0)",
    ),
    "sleep_7s": (lambda v: True, "import time\n        time.sleep(7)\n        return value"),
    "busy_loop_call": (lambda v: True, "while True:\n            pass"),
}


def call_program(problem: Any, kind: str) -> str:
    fn = problem.gold["fn_name"]
    if kind == "module_function":
        return f"{CALL_HEAD}{_table(problem)}\n\ndef {fn}(*args):\n    {CALL_LOOKUP}\n    return value\n"
    body = CALL_MUTANTS[kind][1]
    return (
        f"{CALL_HEAD}{_table(problem)}\n\nclass Solution:\n    def {fn}(self, *args):\n"
        f"        {CALL_LOOKUP}\n        {body}\n"
    )


def _expected(problem: Any) -> Any:
    return json.loads(problem.gold["tests"][0]["output"])


def build(problems: list[Any], per_class: int = 8, departures: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    """Rows ``{"id", "problem_id", "class", "program", "slow"}``: a correct program for every
    problem, and each mutant class on ``per_class`` problems it applies to (``departures`` for the
    departure classes, 2 for slow ones)."""
    rng = random.Random(seed)
    stdin = [p for p in problems if not p.gold.get("fn_name")]
    calls = [p for p in problems if p.gold.get("fn_name")]
    rows = []

    def add(problem: Any, kind: str, program: str) -> None:
        rows.append(
            {
                "id": f"{problem.id}#{kind}",
                "problem_id": problem.id,
                "class": kind,
                "program": program,
                "slow": kind in SLOW,
            }
        )

    for number, problem in enumerate(stdin):
        add(problem, "correct", stdin_program(problem, "correct", number))
    for problem in calls:
        add(problem, "correct", call_program(problem, "correct"))

    def count(kind: str) -> int:
        return 2 if kind in SLOW else departures if kind in DEPARTURES else per_class

    for kind in STDIN_MUTANTS:
        for problem in rng.sample(stdin, count(kind)):
            add(problem, kind, stdin_program(problem, kind))
    for kind, (applies, _) in [*CALL_MUTANTS.items(), ("module_function", (lambda v: True, ""))]:
        if kind == "correct":
            continue
        chosen = [p for p in calls if applies(_expected(p)) and (len(p.gold["tests"]) > 1 or "counter" not in kind)]
        for problem in rng.sample(chosen, min(count(kind), len(chosen))):
            add(problem, kind, call_program(problem, kind))
    return rows
