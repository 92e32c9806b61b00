"""The reward server behind ``rlvr serve``: one verifier service, every trainer's protocol.

Endpoints: ``POST /v1/grade`` (ours), ``POST /get_reward`` (OpenRLHF), ``POST /run_code``
(SandboxFusion), ``GET /healthz``, ``GET /metrics`` (Prometheus text). Grading goes through
``GradingService`` — the same functions as the in-process adapters.

Behaviour: bearer-token auth on everything but ``/healthz`` when a token is set; request bodies
over ``max_body_bytes`` get ``413``; malformed bodies get ``400``/``422`` naming the bad field;
more queued items than ``max_queue_items`` get ``429`` with ``Retry-After``; a crashed or hung
grading worker is killed and replaced by its pool without failing other items; one JSON log line
per request.

Deadlines: a request's deadline bounds how long its items *wait*. A code item takes a judge
slot (``rlvr.sandbox.serving.admission``) only when one is free; an item still waiting at the deadline is
never run and gets a maskable ``sandbox_error`` whose detail is ``rlvr.sandbox.verdict.NOT_RUN`` (on
``/get_reward``, whose answer cannot mask, and ``/run_code``: ``503`` with ``Retry-After``). An item
that started keeps its own limits: the answer waits for its verdict, at most ``total_s`` + 5 s
after it started (past that it is a scored ``time_limit``). A math item not graded by the
deadline is a maskable ``timeout``. Math verdicts are cached; code items run on every request.
Details are redacted (``rlvr.sandbox.verdict.redact``) unless the server runs with ``test_details``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from rlvr.sandbox.service import (
    GradingService,
    Item,
    failure_verdict,
    not_run_verdict,
    overrun_verdict,
    timeout_verdict,
    verdict_row,
)
from rlvr.sandbox.serving.admission import JudgeSlots
from rlvr.sandbox.serving.metrics import Metrics
from rlvr.sandbox.serving.protocols import (
    HTTPProblem,
    grade_request,
    openrlhf_request,
    read_body,
    run_code_request,
    sandbox_fusion_response,
)
from rlvr.sandbox.serving.rewards import openrlhf_response
from rlvr.sandbox.verdict import NOT_RUN, OVERRUN, Verdict, redact
from rlvr.sandbox.version import CODE_VERIFIER, MATH_VERIFIER, PACKAGE_VERSION

DEFAULT_LIMIT_CAPS: dict[str, float] = {
    "time_s": 60.0,
    "wall_factor": 4.0,
    "wall_grace_s": 10.0,
    "total_s": 900.0,
    "memory_mb": 4096,
    "output_kb": 65536,
    "processes": 256,
    "open_files": 1024,
    "file_kb": 1 << 20,
    "scratch_mb": 1024,
    "scratch_files": 65536,
    "result_mb": 256,
    "compile_time_s": 120.0,
    "compile_memory_mb": 4096,
}
MATH_CHUNK = 64
log = logging.getLogger("rlvr.serve")


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    workers: int | None = None
    max_body_bytes: int = 64 * 1024 * 1024
    max_items_per_request: int = 4096
    max_queue_items: int = 16384
    request_timeout: float = 300.0
    math_timeout: float = 1.0
    unsafe: bool = False
    #: Keep the judge's own failure details (they quote hidden expected values); for evaluation
    #: use only, never for a reward path a policy learns from.
    test_details: bool = False
    #: The most each client-supplied code limit (``limits`` of an item, a test's ``time_s``,
    #: ``/run_code``'s timeouts and memory) may ask for; more is refused with 422, never run.
    limit_caps: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LIMIT_CAPS))

    def validate(self) -> None:
        loopback = self.host in ("127.0.0.1", "localhost", "::1") or self.host.startswith("127.")
        if not loopback and not self.token:
            raise ValueError(
                f"binding {self.host} exposes the server beyond this machine: pass --token (clients send "
                "'Authorization: Bearer <token>')"
            )
        if self.request_timeout <= 0 or self.math_timeout <= 0:
            raise ValueError("timeouts must be positive")
        unknown = set(self.limit_caps) - set(DEFAULT_LIMIT_CAPS)
        if unknown:
            raise ValueError(f"unknown limit cap(s) {sorted(unknown)}; known: {sorted(DEFAULT_LIMIT_CAPS)}")


#: What ``ServerState._on_judge`` returns for work that never started / held its judge too long.
NOT_STARTED = object()
OVERRUN_MARK = object()


class ServerState:
    """What the endpoints share: the config, the grading service, the metrics, the grading
    threads, the judge slots and the admission queue (back-pressure: 413 past the per-request
    cap, 429 when full)."""

    def __init__(self, config: ServerConfig, service: GradingService | None):
        self.config = config
        self.service = service
        self.owned = service is None
        self.metrics = Metrics()
        self.executor = ThreadPoolExecutor(
            max_workers=max(4, (config.workers or 2) * 4), thread_name_prefix="rlvr-grade"
        )
        self.slots: JudgeSlots | None = None
        self.code_executor: ThreadPoolExecutor | None = None
        self._requests = itertools.count()
        self._queue_lock = threading.Lock()

    async def start(self) -> None:
        if self.service is None:
            self.service = GradingService(
                workers=self.config.workers,
                math_timeout=self.config.math_timeout,
                unsafe=self.config.unsafe,
                test_details=self.config.test_details,
            )
            await asyncio.to_thread(self.service.warm_up)  # ready means warm
        judges = self.service.code.workers
        self.slots = JudgeSlots(judges)
        # one thread per judge: a code item that holds a slot never waits for a thread
        self.code_executor = ThreadPoolExecutor(max_workers=judges, thread_name_prefix="rlvr-judge")

    def stop(self) -> None:
        self.executor.shutdown(wait=True)
        if self.code_executor is not None:
            self.code_executor.shutdown(wait=True)
        if self.owned and self.service is not None:
            self.service.close()

    async def read_json(self, request: Request) -> Any:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.config.max_body_bytes:
                raise HTTPProblem(413, f"body exceeds the {self.config.max_body_bytes}-byte limit")
        return read_body(body)

    @contextlib.contextmanager
    def admitted(self, n: int) -> Iterator[None]:
        """Hold ``n`` places in the queue while the block runs."""
        config, metrics = self.config, self.metrics
        if n > config.max_items_per_request:
            raise HTTPProblem(
                413, f"{n} items exceed the {config.max_items_per_request}-item limit per request; split the batch"
            )
        with self._queue_lock:
            if metrics.queued + n > config.max_queue_items:
                wait = max(1, int((metrics.queued + n) / max(1, config.max_queue_items) * 5))
                raise HTTPProblem(429, f"{metrics.queued} items queued; retry later", {"Retry-After": str(wait)})
            metrics.queued += n
        try:
            yield
        finally:
            with self._queue_lock:
                metrics.queued -= n

    def shown(self, verdict: Verdict) -> Verdict:
        """Redacted unless this server keeps test details (a given service may keep them)."""
        return verdict if self.config.test_details else redact(verdict)

    async def grade(self, items: list[Item], deadline: float) -> list[dict[str, Any]]:
        """Grade with a per-request deadline on waiting (see the module docstring)."""
        with self.admitted(len(items)):
            request = next(self._requests)
            code_idx = [i for i, it in enumerate(items) if it.kind == "code"]
            math_part = self._grade_math(items, deadline)
            code_part = [self._grade_code(items[i], request, deadline) for i in code_idx]
            math_verdicts, *code_verdicts = await asyncio.gather(math_part, *code_part)
        verdicts: dict[int, Verdict] = {**math_verdicts, **dict(zip(code_idx, code_verdicts))}
        for i, item in enumerate(items):
            if item.kind == "bad":  # refused on its own (``unencodable_item``); the rest is graded
                verdicts[i] = Verdict.bad_input(item.payload["detail"])
        rows = [verdict_row(item.id, self.shown(verdicts[i])) for i, item in enumerate(items)]
        for kind in ("math", "code"):
            self.metrics.observe_items(kind, [r for r, it in zip(rows, items) if it.kind == kind])
        return rows

    async def _grade_math(self, items: list[Item], deadline: float) -> dict[int, Verdict]:
        """Math chunks on the grading threads; a chunk not back by the deadline is ``timeout``."""
        loop = asyncio.get_running_loop()
        math_idx = [i for i, it in enumerate(items) if it.kind == "math"]
        chunks = [math_idx[start : start + MATH_CHUNK] for start in range(0, len(math_idx), MATH_CHUNK)]
        futures = [
            loop.run_in_executor(self.executor, self.service.grade, [items[i] for i in chunk])  # type: ignore[union-attr]
            for chunk in chunks
        ]
        remaining = max(0.0, deadline - time.monotonic())
        done, _ = await asyncio.wait(futures, timeout=remaining) if futures else (set(), set())
        out: dict[int, Verdict] = {}
        for chunk, future in zip(chunks, futures):
            for position, i in enumerate(chunk):
                if future in done and future.exception() is None:
                    out[i] = future.result()[position]
                elif future in done:
                    out[i] = failure_verdict("math", f"grader failed: {future.exception()}")
                else:
                    out[i] = timeout_verdict("request deadline reached before a verdict")
        return out

    async def _on_judge(self, request: int, deadline: float, hold_s: float, work: Callable[[], Any]) -> Any:
        """Run ``work`` on a judge slot: ``NOT_STARTED`` when no slot came by ``deadline``,
        ``OVERRUN_MARK`` when it held the slot past ``hold_s``. The slot is released when ``work``
        returns, never earlier (a request that gives up does not free a busy judge)."""
        assert self.slots is not None and self.code_executor is not None
        token = await self.slots.acquire(request, deadline, hold_s)
        if token is None:
            self.metrics.observe_not_run()
            return NOT_STARTED
        loop = asyncio.get_running_loop()
        slots = self.slots

        def released(_: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the server is stopping
                loop.call_soon_threadsafe(slots.release, token)

        job = self.code_executor.submit(work)
        job.add_done_callback(released)
        running = asyncio.wrap_future(job)
        done, _ = await asyncio.wait([running], timeout=hold_s)
        if not done:
            return OVERRUN_MARK
        return running.result()

    async def _grade_code(self, item: Item, request: int, deadline: float) -> Verdict:
        service = self.service
        assert service is not None
        try:
            result = await self._on_judge(request, deadline, service.hold_s(item), lambda: service.grade([item])[0])
        except Exception as exc:  # the machinery failed, not the program
            return failure_verdict("code", f"grader failed: {exc}")
        if result is NOT_STARTED:
            return not_run_verdict()
        if result is OVERRUN_MARK:
            return overrun_verdict()
        return result

    async def run_program(self, code: str, stdin: str, language: str, limits: dict[str, Any] | None) -> dict[str, Any]:
        service = self.service
        assert service is not None and self.slots is not None
        hold = service.hold_s(Item(0, "code", code, {"language": language, "limits": limits}))
        with self.admitted(1):
            result = await self._on_judge(
                next(self._requests),
                time.monotonic() + self.config.request_timeout,
                hold,
                lambda: service.code.run_program(code, stdin, language, limits),
            )
        if result is NOT_STARTED:
            raise HTTPProblem(503, NOT_RUN, {"Retry-After": str(self.slots.retry_after())})
        if result is OVERRUN_MARK:
            run = {"status": "tle", "stdout": "", "stderr": "", "exit_code": None, "wall_ms": hold * 1000}
            return {"compile": None, "run": run, "reason": "time_limit", "detail": OVERRUN}
        return result


class JSONAnswer(JSONResponse):
    """JSON text that always encodes: a lone surrogate that reached an answer anyway is written
    as its escape (``\\ud800``), never an HTTP 500 for the whole batch."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def request_guard(config: ServerConfig, metrics: Metrics):
    """The HTTP middleware: bearer token, body-size limit, request metrics and one JSON access-log line."""

    async def guard(request: Request, call_next):
        start = time.perf_counter()
        path = request.url.path
        status = 500
        items = 0
        try:
            if config.token and path != "/healthz":
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {config.token}".encode()):
                    status = 401
                    return JSONResponse(
                        {"error": "missing or wrong bearer token (send 'Authorization: Bearer <token>')"},
                        status_code=401,
                        headers={"WWW-Authenticate": "Bearer"},
                    )
            length = request.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > config.max_body_bytes:
                status = 413
                return JSONResponse(
                    {"error": f"body of {length} bytes exceeds the {config.max_body_bytes}-byte limit"}, status_code=413
                )
            response = await call_next(request)
            status = response.status_code
            items = int(response.headers.get("x-rlvr-items", "0"))
            return response
        finally:
            seconds = time.perf_counter() - start
            metrics.observe_request(path, status, seconds)
            line = {
                "ts": round(time.time(), 3),
                "method": request.method,
                "path": path,
                "status": status,
                "items": items,
                "ms": round(seconds * 1000, 2),
                "client": request.client.host if request.client else None,
            }
            print(json.dumps(line), file=sys.stderr, flush=True)

    return guard


def create_app(config: ServerConfig, service: GradingService | None = None):
    """Build the FastAPI application (the service is created here unless given)."""
    config.validate()
    state = ServerState(config, service)

    async def lifespan(app):  # noqa: ANN001
        await state.start()
        yield
        state.stop()

    app = FastAPI(title="rlvr reward server", version=PACKAGE_VERSION, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.middleware("http")(request_guard(config, state.metrics))

    @app.exception_handler(HTTPProblem)
    async def problem_handler(request: Request, exc: HTTPProblem):
        return JSONAnswer({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.post("/v1/grade")
    async def v1_grade(request: Request):
        items, deadline = grade_request(await state.read_json(request), config.limit_caps, config.request_timeout)
        rows = await state.grade(items, deadline)
        return JSONAnswer(
            {"results": rows, "verifier": {"math": MATH_VERIFIER, "code": CODE_VERIFIER}},
            headers={"x-rlvr-items": str(len(rows))},
        )

    @app.post("/get_reward")
    async def get_reward(request: Request):
        items = openrlhf_request(await state.read_json(request), config.limit_caps)
        rows = await state.grade(items, time.monotonic() + config.request_timeout)
        if any(row["detail"] == NOT_RUN for row in rows):  # a reward list cannot mask: ask again
            raise HTTPProblem(503, NOT_RUN, {"Retry-After": str(state.slots.retry_after())})  # type: ignore[union-attr]
        return JSONAnswer(
            openrlhf_response([Verdict.from_dict(r) for r in rows]), headers={"x-rlvr-items": str(len(rows))}
        )

    @app.post("/run_code")
    async def run_code(request: Request):
        result = await state.run_program(*run_code_request(await state.read_json(request), config.limit_caps))
        return JSONAnswer(sandbox_fusion_response(result), headers={"x-rlvr-items": "1"})

    @app.get("/healthz")
    async def healthz():
        return {
            "status": "ok",
            "version": PACKAGE_VERSION,
            "verifiers": {"math": MATH_VERIFIER, "code": CODE_VERIFIER},
            "queued_items": state.metrics.queued,
        }

    @app.get("/metrics")
    async def prometheus():
        return PlainTextResponse(state.metrics.render(state.service.restarts()), media_type="text/plain; version=0.0.4")  # type: ignore[union-attr]

    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is announced (``OSError`` when the address is
    taken or not ours), with uvicorn's own options: address reuse and a 2,048-connection backlog."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(config: ServerConfig, on_listening: Callable[[], None] | None = None) -> None:
    """Run the server until SIGINT/SIGTERM; in-flight requests are drained before exit.
    The address is bound first: ``OSError`` (port in use) comes before ``on_listening`` is called."""
    import uvicorn

    sock = bind_socket(config.host, config.port)
    app = create_app(config)
    if on_listening is not None:
        on_listening()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=int(config.request_timeout) + 5,
        )
    )
    server.run(sockets=[sock])
