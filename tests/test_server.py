"""`rlvr serve` hit with valid, malformed, oversized, unauthorised and hostile requests."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import ROOT
from rlvr.sandbox.verdict import NOT_RUN
from server_helpers import Server

MATH_OK = {"id": "m1", "kind": "math", "completion": r"so \boxed{2\sqrt{3}}", "answer": r"\sqrt{12}"}
MATH_WRONG = {"id": "m2", "kind": "math", "completion": r"\boxed{5}", "answer": "6"}
CODE_OK = {
    "id": "c1",
    "kind": "code",
    "completion": "```python\nprint(int(input()) * 2)\n```",
    "tests": [{"input": "21", "output": "42", "testtype": "stdin"}],
}
CODE_FN = {
    "id": "c2",
    "kind": "code",
    "completion": "class Solution:\n    def add(self, a, b):\n        return a + b\n",
    "tests": [{"input": "1\n2", "output": "3", "testtype": "functional"}],
    "fn_name": "add",
}


def post(server, path, body, **kw):
    return httpx.post(server.url + path, json=body, timeout=120, **kw)


def strip_timing(rows):
    return [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in rows]


def test_grade_mixed_batch_in_order(server):
    r = post(server, "/v1/grade", {"items": [MATH_OK, CODE_OK, MATH_WRONG, CODE_FN]})
    assert r.status_code == 200
    rows = r.json()["results"]
    assert [row["id"] for row in rows] == ["m1", "c1", "m2", "c2"]
    assert [row["reason"] for row in rows] == ["ok", "ok", "wrong_answer", "ok"]
    assert rows[1]["passed"] == rows[1]["total"] == 1 and "passed" not in rows[0]
    for row in rows:
        assert {"id", "correct", "reward", "reason", "extracted", "elapsed_ms"} <= set(row)


def test_identical_requests_are_idempotent(server):
    body = {
        "items": [
            MATH_OK,
            MATH_WRONG,
            CODE_OK,
            {"id": "h", "kind": "math", "completion": r"\boxed{9^{9^{9^{9}}}}", "answer": "1"},
        ]
    }
    first = post(server, "/v1/grade", body).json()["results"]
    second = post(server, "/v1/grade", body).json()["results"]
    assert strip_timing(first) == strip_timing(second)


def test_openrlhf_protocol(server):
    prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    body = {
        "query": [
            prompt + r"It is \boxed{4}.<|im_end|>",
            prompt + r"It is \boxed{5}.<|im_end|>",
            prompt + "```python\nprint(2+2)\n```<|im_end|>",
        ],
        "prompts": [prompt, prompt, prompt],
        "labels": ["4", "4", json.dumps({"inputs": [""], "outputs": ["4\n"]})],
    }
    r = post(server, "/get_reward", body)
    assert r.status_code == 200
    out = r.json()
    assert out["rewards"] == [1.0, 0.0, 1.0] and out["scores"] == out["rewards"]
    assert out["extra_logs"]["acc"] == [1.0, 0.0, 1.0]


def test_sandbox_fusion_protocol(server):
    ok = post(
        server,
        "/run_code",
        {
            "code": "print(input()[::-1])",
            "stdin": "abc",
            "language": "python",
            "compile_timeout": 10,
            "run_timeout": 5,
            "files": {},
            "fetch_files": [],
        },
    ).json()
    assert ok["status"] == "Success" and ok["run_result"]["status"] == "Finished"
    assert ok["run_result"]["stdout"] == "cba\n" and ok["run_result"]["return_code"] == 0
    bad_exit = post(server, "/run_code", {"code": "import sys\nsys.exit(3)", "language": "python"}).json()
    assert bad_exit["status"] == "Failed" and bad_exit["run_result"]["return_code"] == 3
    assert bad_exit["message"] == "the program exited with code 3"  # not the run status "re"
    tle = post(server, "/run_code", {"code": "while True: pass", "language": "python", "run_timeout": 1}).json()
    assert tle["status"] == "Failed" and tle["run_result"]["status"] == "TimeLimitExceeded"
    ce = post(server, "/run_code", {"code": "int main( {", "language": "cpp"}).json()
    assert ce["status"] == "Failed" and ce["compile_result"]["return_code"] != 0 and ce["run_result"] is None
    assert ce["message"].startswith("compilation failed")
    cpp = post(
        server,
        "/run_code",
        {
            "code": '#include <cstdio>\nint main(){int a;scanf("%d",&a);printf("%d\\n",a*a);}',
            "stdin": "7",
            "language": "cpp",
        },
    ).json()
    assert cpp["status"] == "Success" and cpp["run_result"]["stdout"] == "49\n"


@pytest.mark.parametrize(
    "path, body, status, field",
    [
        ("/v1/grade", "not json", 400, "JSON"),
        ("/v1/grade", [], 422, "body"),
        ("/v1/grade", {}, 422, "items"),
        ("/v1/grade", {"items": [{"kind": "math", "answer": "1"}]}, 422, "items[0].completion"),
        ("/v1/grade", {"items": [{"kind": "lean", "completion": "x"}]}, 422, "items[0].kind"),
        ("/v1/grade", {"items": [{"kind": "code", "completion": "x"}]}, 422, "items[0].tests"),
        ("/v1/grade", {"items": [MATH_OK], "timeout": -1}, 422, "timeout"),
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"colour": 1}}]}, 422, "options"),
        # a misspelled option value is the request's error, never a silent bad_input verdict per item
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"policy": "nope"}}]}, 422, "items[0].options.policy"),
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"policy": "nope"}}]}, 422, "choose from ['aime'"),
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"extract": ["boxd"]}}]}, 422, "items[0].options.extract"),
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"rel_tol": "tight"}}]}, 422, "items[0].options.rel_tol"),
        ("/v1/grade", {"items": [{**MATH_OK, "options": {"sig_figs": "yes"}}]}, 422, "items[0].options.sig_figs"),
        (
            "/v1/grade",
            {"items": [{"kind": "code", "completion": "x", "tests": ["assert 1"], "options": {"language": "cobol"}}]},
            422,
            "items[0].options.language",
        ),
        (
            "/v1/grade",
            {"items": [{"kind": "code", "completion": "x", "tests": ["assert 1"], "options": {"compare": "fuzzy"}}]},
            422,
            "items[0].options.compare",
        ),
        ("/get_reward", {"query": ["x"]}, 422, "labels"),
        ("/get_reward", {"query": "x", "labels": ["1"]}, 422, "query"),
        ("/get_reward", {"query": ["a", "b"], "prompts": ["a"], "labels": ["1", "2"]}, 422, "length"),
        ("/run_code", {"language": "python"}, 422, "code"),
        ("/run_code", {"code": "x", "language": "cobol"}, 422, "language"),
        ("/run_code", {"code": "x", "run_timeout": "soon"}, 422, "run_timeout"),
        # client-supplied limits above the server's caps are refused, never run
        ("/run_code", {"code": "x", "memory_limit_MB": 100000}, 422, "memory_limit_MB"),
        ("/run_code", {"code": "x", "run_timeout": 3600}, 422, "run_timeout"),
        (
            "/v1/grade",
            {
                "items": [
                    {
                        "kind": "code",
                        "completion": "x",
                        "tests": [{"input": "", "output": ""}],
                        "limits": {"memory_mb": 60000},
                    }
                ]
            },
            422,
            "items[0].limits.memory_mb",
        ),
        (
            "/v1/grade",
            {"items": [{"kind": "code", "completion": "x", "tests": [{"input": "", "output": "", "time_s": 500}]}]},
            422,
            "items[0].tests[0].time_s",
        ),
        (
            "/get_reward",
            {"query": ["x"], "labels": [{"tests": [{"input": "", "output": ""}], "limits": {"processes": 100000}}]},
            422,
            "limits.processes",
        ),
    ],
)
def test_malformed_bodies_name_the_field(server, path, body, status, field):
    if isinstance(body, str):
        r = httpx.post(server.url + path, content=body, timeout=30)
    else:
        r = post(server, path, body)
    assert r.status_code == status, r.text
    assert field in r.json()["error"]


def test_hostile_items_are_verdicts_and_the_server_survives(server):
    items = [
        {
            "id": "bomb",
            "kind": "code",
            "completion": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
            "tests": [{"input": "", "output": "1"}],
            "limits": {"time_s": 1},
        },
        {
            "id": "flood",
            "kind": "code",
            "completion": "while True:\n    print('x' * 10000)\n",
            "tests": [{"input": "", "output": "1"}],
        },
        {"id": "tower", "kind": "math", "completion": r"\boxed{9^{9^{9^{9}}}}", "answer": "1"},
        {
            "id": "inject",
            "kind": "math",
            "completion": r"\boxed{__import__('os').system('touch /tmp/pwned_server')}",
            "answer": "0",
        },
        {"id": "megabyte", "kind": "math", "completion": "x" * 2_000_000 + r"\boxed{1}", "answer": "1"},
    ]
    rows = post(server, "/v1/grade", {"items": items}).json()["results"]
    assert [r["reason"] for r in rows] == ["time_limit", "output_limit", "unparseable", "unparseable", "ok"]
    assert not os.path.exists("/tmp/pwned_server")
    assert post(server, "/v1/grade", {"items": [MATH_OK, CODE_OK]}).json()["results"][1]["reason"] == "ok"


@pytest.mark.slow
def test_request_deadline_bounds_waiting_not_running(server):
    """A started item keeps its own limits (the deadline would score it on time it was not
    given); only items still waiting for a judge at the deadline are cut, and those are masked."""
    slow = {
        "id": "slow",
        "kind": "code",
        "completion": "import time\ntime.sleep(3)\nprint(1)",
        "tests": [{"input": "", "output": "1"}],
        "limits": {"time_s": 5},
    }
    start = time.monotonic()
    r = post(server, "/v1/grade", {"items": [MATH_OK, slow, slow, slow], "timeout": 1})
    took = time.monotonic() - start
    assert r.status_code == 200 and 2.5 < took < 10
    rows = r.json()["results"]
    assert [row["reason"] for row in rows] == ["ok", "ok", "ok", "sandbox_error"]  # two judges
    assert rows[3]["detail"] == NOT_RUN and rows[3]["reward"] == 0.0


def _math_restarts(server) -> float:
    metrics = httpx.get(server.url + "/metrics").text
    assert 'rlvr_worker_restarts_total{kind="math"}' in metrics
    return float(
        next(
            line.split()[-1]
            for line in metrics.splitlines()
            if line.startswith('rlvr_worker_restarts_total{kind="math"}')
        )
    )


def test_killed_worker_is_replaced_without_failing_items(server):
    before = server.children()
    assert before, "no grading workers found"
    restarts_before = _math_restarts(server)  # the server is shared: count this test's restart only
    items = [
        {
            "id": i,
            "kind": "math",
            "completion": rf"\boxed{{{i}\sqrt{{2}} + \frac{{\pi}}{{{i + 1}}}}}",
            "answer": rf"\sqrt{{{2 * i * i}}} + \frac{{\pi}}{{{i + 1}}}",
        }
        for i in range(1, 600)
    ]
    result = {}

    def run():
        result["r"] = post(server, "/v1/grade", {"items": items})

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    victim = next(pid for pid, module in server.children().items() if "math" in module)
    os.kill(victim, signal.SIGKILL)
    assert thread.is_alive(), "the request finished before the kill; make it longer"
    thread.join(120)
    r = result["r"]
    assert r.status_code == 200
    rows = r.json()["results"]
    assert len(rows) == len(items)
    assert all(row["reason"] == "ok" for row in rows), [r for r in rows if r["reason"] != "ok"][:3]
    assert _math_restarts(server) >= restarts_before + 1


@pytest.mark.slow
def test_metrics_count_what_was_sent():
    s = Server()
    try:
        post(s, "/v1/grade", {"items": [MATH_OK, MATH_WRONG, CODE_OK]})
        post(s, "/v1/grade", {"items": [MATH_WRONG]})
        httpx.post(s.url + "/v1/grade", content="bad", timeout=10)
        text = httpx.get(s.url + "/metrics").text
    finally:
        s.stop()
    assert 'rlvr_items_total{kind="math",reason="ok"} 1' in text
    assert 'rlvr_items_total{kind="math",reason="wrong_answer"} 2' in text
    assert 'rlvr_items_total{kind="code",reason="ok"} 1' in text
    assert 'rlvr_requests_total{endpoint="/v1/grade",status="200"} 2' in text
    assert 'rlvr_requests_total{endpoint="/v1/grade",status="400"} 1' in text
    assert "rlvr_queue_items 0" in text
    assert 'rlvr_request_seconds_count{endpoint="/v1/grade"} 3' in text
    lines = [json.loads(line) for line in s.logs().splitlines() if line.startswith("{")]
    assert [(line["path"], line["status"]) for line in lines if line["path"] == "/v1/grade"] == [
        ("/v1/grade", 200),
        ("/v1/grade", 200),
        ("/v1/grade", 400),
    ]


def test_auth_limits_and_backpressure():
    s = Server("--token", "s3cret", "--max-body-mb", "0.05", "--max-queue-items", "8")
    try:
        assert httpx.get(s.url + "/healthz").status_code == 200
        assert post(s, "/v1/grade", {"items": [MATH_OK]}).status_code == 401
        assert post(s, "/v1/grade", {"items": [MATH_OK]}, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.get(s.url + "/metrics").status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert post(s, "/v1/grade", {"items": [MATH_OK]}, headers=auth).status_code == 200
        big = post(s, "/v1/grade", {"items": [{**MATH_OK, "completion": "x" * 100_000}]}, headers=auth)
        assert big.status_code == 413 and "limit" in big.json()["error"]
        crowded = post(s, "/v1/grade", {"items": [MATH_OK] * 9}, headers=auth)
        assert crowded.status_code == 429 and int(crowded.headers["Retry-After"]) >= 1
    finally:
        s.stop()


def test_binding_beyond_loopback_requires_a_token():
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr.cli", "serve", "--host", "0.0.0.0", "--port", "8799"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--token" in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "cap, words", [("bogus=1", "NAME=VALUE"), ("memory_mb=lots", "not a number"), ("memory_mb", "NAME=VALUE")]
)
def test_bad_limit_caps_are_one_line_errors(cap, words):
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr.cli", "serve", "--port", "8798", "--limit-cap", cap],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_limit_caps_are_the_servers_choice():
    from rlvr.sandbox.service import BadItem, parse_item
    from rlvr.sandbox.serving.protocols import check_item_caps
    from rlvr.sandbox.serving.server import DEFAULT_LIMIT_CAPS

    item = parse_item(
        {"kind": "code", "completion": "x", "tests": [{"input": "", "output": ""}], "limits": {"memory_mb": 3000}}, 0
    )
    check_item_caps(item, 0, DEFAULT_LIMIT_CAPS)  # within the defaults
    with pytest.raises(BadItem, match=r"items\[0\].limits.memory_mb"):
        check_item_caps(item, 0, {**DEFAULT_LIMIT_CAPS, "memory_mb": 2048})


@pytest.mark.slow
def test_graceful_shutdown_drains_in_flight_requests():
    s = Server()
    result = {}
    slow = {
        "id": "slow",
        "kind": "code",
        "completion": "import time\ntime.sleep(1.5)\nprint(1)",
        "tests": [{"input": "", "output": "1"}],
        "limits": {"time_s": 5},
    }

    def run():
        result["r"] = post(s, "/v1/grade", {"items": [slow, MATH_OK]})

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    workers = set(s.children())
    assert workers
    s.proc.send_signal(signal.SIGTERM)
    thread.join(60)
    code = s.stop()
    assert result["r"].status_code == 200
    assert [row["reason"] for row in result["r"].json()["results"]] == ["ok", "ok"]
    # uvicorn re-raises the signal after draining: the command line's SIGTERM exit (143), or the signal's
    assert code in (0, 143, -signal.SIGTERM)
    time.sleep(0.5)
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")], "grading workers outlived the server"
    assert "Traceback" not in s.logs()
