"""The reward server's Prometheus metrics: request counts and latency histograms per endpoint,
verdict counts per kind and reason, code items never run (their request's deadline passed while
they waited for a judge), the queue depth and worker restarts."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(LATENCY_BUCKETS)
        self.total = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.total += 1
        self.sum += seconds
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1

    def observe_not_run(self) -> None:
        with self.lock:
            self.not_run += 1

    def render(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        lines = [f'{name}_bucket{{{labels}{sep}le="{b}"}} {c}' for b, c in zip(LATENCY_BUCKETS, self.counts)]
        lines.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.total}')
        lines.append(f"{name}_sum{{{labels}}} {self.sum:.6f}" if labels else f"{name}_sum {self.sum:.6f}")
        lines.append(f"{name}_count{{{labels}}} {self.total}" if labels else f"{name}_count {self.total}")
        return lines


@dataclass
class Metrics:
    requests: Counter = field(default_factory=Counter)
    items: Counter = field(default_factory=Counter)
    request_latency: dict[str, Histogram] = field(default_factory=dict)
    item_latency: dict[str, Histogram] = field(default_factory=dict)
    queued: int = 0
    not_run: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests[(endpoint, status)] += 1
            self.request_latency.setdefault(endpoint, Histogram()).observe(seconds)

    def observe_items(self, kind: str, rows: list[dict[str, Any]]) -> None:
        with self.lock:
            for row in rows:
                self.items[(kind, row["reason"])] += 1
                self.item_latency.setdefault(kind, Histogram()).observe((row.get("elapsed_ms") or 0) / 1000)

    def observe_not_run(self) -> None:
        with self.lock:
            self.not_run += 1

    def render(self, restarts: dict[str, int]) -> str:
        with self.lock:
            out = [
                "# HELP rlvr_requests_total HTTP requests by endpoint and status.",
                "# TYPE rlvr_requests_total counter",
            ]
            out += [
                f'rlvr_requests_total{{endpoint="{e}",status="{s}"}} {n}' for (e, s), n in sorted(self.requests.items())
            ]
            out += [
                "# HELP rlvr_items_total Graded items by kind and verdict reason.",
                "# TYPE rlvr_items_total counter",
            ]
            out += [f'rlvr_items_total{{kind="{k}",reason="{r}"}} {n}' for (k, r), n in sorted(self.items.items())]
            out += [
                "# HELP rlvr_queue_items Items accepted and not yet answered.",
                "# TYPE rlvr_queue_items gauge",
                f"rlvr_queue_items {self.queued}",
                "# HELP rlvr_not_run_total Code items never run: no judge was free before the request deadline.",
                "# TYPE rlvr_not_run_total counter",
                f"rlvr_not_run_total {self.not_run}",
            ]
            out += ["# HELP rlvr_request_seconds Request latency.", "# TYPE rlvr_request_seconds histogram"]
            for endpoint, hist in sorted(self.request_latency.items()):
                out += hist.render("rlvr_request_seconds", f'endpoint="{endpoint}"')
            out += ["# HELP rlvr_item_seconds Grading time per item.", "# TYPE rlvr_item_seconds histogram"]
            for kind, hist in sorted(self.item_latency.items()):
                out += hist.render("rlvr_item_seconds", f'kind="{kind}"')
        out += [
            "# HELP rlvr_worker_restarts_total Grading workers killed and replaced.",
            "# TYPE rlvr_worker_restarts_total counter",
        ]
        out += [f'rlvr_worker_restarts_total{{kind="{k}"}} {n}' for k, n in sorted(restarts.items())]
        return "\n".join(out) + "\n"
