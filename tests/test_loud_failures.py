"""Failures a user would otherwise meet as silence: a refused connection, a port in use, a retry
loop that says nothing. Each must be one line that names what failed and what to do."""

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT
from rlvr.sandbox.serving.client import RewardClient, RewardServerError
from server_helpers import free_port


def test_refused_first_connection_fails_at_once_with_the_url():
    port = free_port()  # nothing listens there
    client = RewardClient(f"http://127.0.0.1:{port}", retries=8, backoff=0.5)
    start = time.monotonic()
    with pytest.raises(RewardServerError) as err:
        client.grade([{"kind": "math", "completion": "2", "answer": "2"}])
    assert time.monotonic() - start < 5  # not 8 backed-off retries (the old behaviour: ~94 s)
    assert f"http://127.0.0.1:{port}/v1/grade" in str(err.value)
    assert "rlvr serve" in str(err.value)


class _Flaky(BaseHTTPRequestHandler):
    """503 with Retry-After: 0 for the first ``fail`` requests, then an empty result list."""

    fail = 2
    seen = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen += 1
        if type(self).seen <= type(self).fail:
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        body = json.dumps({"results": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_each_retry_is_logged_and_a_restart_after_contact_is_retried(caplog):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = RewardClient(url, retries=3, backoff=0.01)
        with caplog.at_level(logging.WARNING, logger="rlvr.client"):
            assert client.grade([]) == []
        retries = [r.getMessage() for r in caplog.records if r.name == "rlvr.client"]
        assert len(retries) == 2 and all("HTTP 503" in m and url in m for m in retries), retries
        assert "retry 1 of 3" in retries[0] and "retry 2 of 3" in retries[1]
    finally:
        server.shutdown()
        server.server_close()
    # the server has answered this client once: a refused connection now is a restart, retried
    client.retries, client.backoff = 1, 0.01
    with caplog.at_level(logging.WARNING, logger="rlvr.client"), pytest.raises(RewardServerError) as err:
        client.grade([])
    assert "gave up after 2 attempts" in str(err.value) and url in str(err.value)


def test_serve_on_a_port_in_use_is_one_line_and_exit_2_before_announcing():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.close()
    assert proc.returncode == 2, proc.stderr
    assert "listening" not in proc.stdout  # nothing announced that is not true
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "--port" in lines[0]
