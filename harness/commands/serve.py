"""``rlvr serve``: the reward server (TRL/verl clients, OpenRLHF, SandboxFusion-compatible)."""

from __future__ import annotations

import argparse

from rlvr.harness.commands.options import add_ray_option
from rlvr.harness.errors import UserError

EPILOG = """\
endpoints:
  POST /v1/grade    {"items": [{"id", "kind": "math"|"code", "completion", "answer" | "tests",
                    "fn_name"?, "options"?}], "timeout"?} -> {"results": [...]} (one per item, in order)
  POST /get_reward  OpenRLHF: {"query": [...], "prompts": [...], "labels": [...]}
                    -> {"rewards", "scores", "extra_logs"}
  POST /run_code    SandboxFusion: {"code", "language", "stdin", "run_timeout", ...}
  GET  /healthz     liveness and verifier versions (no token needed)
  GET  /metrics     Prometheus text: requests, items by reason, queue, latency, worker restarts

examples:
  rlvr serve                                        # 127.0.0.1:8000, no token needed on loopback
  rlvr serve --host 0.0.0.0 --port 8000 --token "$RLVR_TOKEN" --workers 8
  # OpenRLHF: --reward.remote_url http://HOST:8000/get_reward
  # verl:     reward.sandbox_fusion.url=http://HOST:8000/run_code
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve rewards over HTTP (our API, OpenRLHF, SandboxFusion)",
        description="Serve the verifiers over HTTP. Binding beyond loopback requires --token.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--token", default=None, help="bearer token clients must send (required off loopback)")
    p.add_argument(
        "--workers", type=int, default=None, help="grading worker processes per verifier (default: min(4, CPUs))"
    )
    p.add_argument("--request-timeout", type=float, default=300.0, help="deadline per request in seconds")
    p.add_argument("--math-timeout", type=float, default=1.0, help="CPU-time budget per math item in seconds")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="largest accepted request body")
    p.add_argument("--max-queue-items", type=int, default=16384, help="items in flight before answering 429")
    p.add_argument(
        "--unsafe", action="store_true", help="run code even where the sandbox cannot isolate (NOT isolated)"
    )
    p.add_argument(
        "--test-details",
        action="store_true",
        help="answer with the verifiers' own failure details, which quote hidden expected values (evaluation "
        "only: a policy trained on them learns the tests); by default details are redacted",
    )
    p.add_argument(
        "--limit-cap",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the most a client may ask for one code limit, e.g. --limit-cap memory_mb=2048 (repeatable; defaults: "
        "time_s=60, memory_mb=4096, total_s=900, processes=256, ...); larger requests get 422",
    )
    add_ray_option(
        p,
        "deploy as a Ray Serve application on the cluster at ADDRESS (none: RAY_ADDRESS, a cluster here, "
        "else a local one); the URL load-balances over --replicas replicas",
    )
    p.add_argument("--replicas", type=int, default=2, help="with --ray: server replicas (default 2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvr.sandbox.serving.server import ServerConfig, serve

    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    if not 0 < args.port < 65536:
        raise UserError("--port must be between 1 and 65535")
    from rlvr.sandbox.serving.server import DEFAULT_LIMIT_CAPS

    caps = dict(DEFAULT_LIMIT_CAPS)
    for entry in args.limit_cap:
        name, sep, value = entry.partition("=")
        if not sep or name not in caps:
            raise UserError(f"--limit-cap {entry!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(caps))}")
        try:
            caps[name] = float(value)
        except ValueError:
            raise UserError(f"--limit-cap {entry!r}: {value!r} is not a number") from None
    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token,
        workers=args.workers,
        request_timeout=args.request_timeout,
        math_timeout=args.math_timeout,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_queue_items=args.max_queue_items,
        unsafe=args.unsafe,
        test_details=args.test_details,
        limit_caps=caps,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.ray is not None:
        return _serve_on_ray(config, args)
    auth = "token required" if args.token else "no token"
    try:
        serve(config, lambda: print(f"rlvr serve: listening on http://{args.host}:{args.port} ({auth})", flush=True))
    except OSError as exc:
        raise UserError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
            "(choose another --port, or stop what holds it)"
        ) from exc
    return 0


def _serve_on_ray(config, args: argparse.Namespace) -> int:
    """Deploy on Ray Serve and stay up until interrupted (then the application is deleted)."""
    import signal
    import threading

    from rlvr.sandbox.serving.ray_grading import RayUnavailable

    if args.replicas < 1:
        raise UserError("--replicas must be at least 1")
    from rlvr.sandbox.serving import ray_serve

    try:
        url = ray_serve.run(config, args.replicas, args.ray)
    except RayUnavailable as exc:
        raise UserError(str(exc)) from exc
    print(f"rlvr serve: {args.replicas} Ray Serve replicas at {url} (Ctrl-C removes them)", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    from ray import serve

    serve.delete("rlvr-reward")
    return 0
