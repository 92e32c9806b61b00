"""The 22 labelled code cases of the verifier survey, with the host-side checks they name."""

import os
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from code_helpers import CASES, allowed_reasons, case_item, sandbox_processes, zombies
from rlvr.sandbox import CodeGrader


def verify_item(grader, item):
    keys = ("fn_name", "language", "limits", "compare")
    return grader.verify(item["completion"], item["tests"], **{k: item[k] for k in keys})


@pytest.fixture(scope="module")
def grader():
    g = CodeGrader(workers=2)
    g.warm_up()
    yield g
    g.close()


def test_case_file_is_complete():
    assert len(CASES) == 22


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["class"] for c in CASES])
def test_case(grader, index, monkeypatch):
    case = CASES[index]
    item = case_item(case)
    canary = None
    if case["class"] == "hostile/host_file_canary":
        canary = tempfile.NamedTemporaryFile(prefix="verifier_canary_", dir=tempfile.gettempdir(), delete=False)
    if case["class"] == "hostile/env_secret_leak":
        monkeypatch.setenv("VERIFIER_CANARY_TOKEN", "secret")
    listener = None
    connections = []
    if case["class"] == "hostile/network_egress":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 8080))
        listener.listen(8)
        listener.settimeout(0.2)

        def accept(sock=listener):
            while True:
                try:
                    connections.append(sock.accept())
                except socket.timeout:
                    continue
                except OSError:
                    return

        threading.Thread(target=accept, daemon=True).start()
    escape_paths = [
        Path(tempfile.gettempdir()) / "escape_canary",
        Path.home() / "escape_canary",
        Path(os.getcwd()).parent / "escape_canary",
    ]
    judge_pids = grader.pool.pids()
    try:
        start = time.monotonic()
        verdict = verify_item(grader, item)
        took = time.monotonic() - start
    finally:
        if canary is not None:
            os.unlink(canary.name)
        if listener is not None:
            sock, listener = listener, None
            sock.close()
    assert verdict.reason in allowed_reasons(case["expected"]), (case["class"], verdict)
    assert verdict.correct is (verdict.reason == "ok")
    limits = item["limits"]
    assert took < limits.get("time_s", 4) * 1.5 + 0.5 + 3, took
    assert not sandbox_processes(), "a sandboxed process survived the verdict"
    assert not zombies()
    assert connections == [], "the program reached the host's loopback"
    for path in escape_paths:
        assert not path.exists(), path
    assert set(grader.pool.pids()) == set(judge_pids), "a judge died"
    if case["class"] == "hostile/read_etc_passwd":
        assert "root:x:0:0" not in verdict.detail


def test_honest_submission_right_after_each_hostile_one(grader):
    honest = case_item(CASES[0])
    hostile = [case_item(c) for c in CASES if c["class"].startswith(("hostile/", "resource/"))]
    items = []
    for h in hostile:
        items += [h, honest]
    verdicts = grader.verify_batch(items)
    for v in verdicts[1::2]:
        assert v.reason == "ok", v


def test_nothing_runs_after_a_verdict_given_while_calls_were_pending(grader):
    """A wrong first answer while later calls were already sent: the judge kills the sandbox
    without grace, and the verdict must still wait until every process of it is gone (this
    raced in about one verdict in seven before the zygote emptied the cgroup before replying)."""
    item = case_item(next(c for c in CASES if c["class"] == "functional/always_equal_object"))
    for _ in range(30):
        verdict = verify_item(grader, item)
        assert verdict.reason == "wrong_answer"
        assert not sandbox_processes() and not zombies()
