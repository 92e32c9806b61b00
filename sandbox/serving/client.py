"""A thin client for ``rlvr serve``: the adapters grade remotely with the same results.

Retries are for transport failures and ``429``/``503`` only (honouring ``Retry-After``), and
for items the server answered as never run (``rlvr.sandbox.verdict.NOT_RUN``: no judge was free
before the request deadline); those alone are sent again. A verdict of a program that ran is
never retried into a different verdict.

Each retry is logged (logger ``rlvr.client``, level WARNING) with its cause and wait. A refused
connection before the server ever answered this client is not retried: nothing listens at that
address (a wrong URL, or the server not started), and waiting out the backoff only hides it.
Once the server has answered, a refused connection is a restart and is retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from rlvr.sandbox.service import Item
from rlvr.sandbox.verdict import NOT_RUN, Verdict

#: How long past its deadline a request may take: an item that started keeps its own limits
#: (the server's default cap on ``total_s`` is 900 s, plus 5 s of grace), with room to spare.
RUNNING_GRACE_S = 960.0
log = logging.getLogger("rlvr.client")


class RewardServerError(RuntimeError):
    """The server refused or could not be reached within the retry budget."""


def _payload(items: Sequence[Item]) -> list[dict[str, Any]]:
    out = []
    for index, item in enumerate(items):
        body = {"id": index, "kind": item.kind, "completion": item.completion}
        body.update(item.payload)
        out.append(body)
    return out


def _verdict(row: dict[str, Any]) -> Verdict:
    return Verdict.from_dict(row)


class RewardClient:
    """``RewardClient("http://127.0.0.1:8000", token=...)``; pass it as ``client=`` to any adapter."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 300.0,
        retries: int = 8,
        backoff: float = 0.5,
        running_grace: float = RUNNING_GRACE_S,
    ):
        """``timeout`` is the request deadline sent to the server (how long items may wait for
        a judge); the HTTP read waits ``running_grace`` longer for items that started."""
        self.running_grace = running_grace
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._answered = False

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        delay = self.backoff
        last = ""
        for attempt in range(self.retries + 1):
            try:
                response = httpx.post(
                    self.url + path, json=body, headers=self.headers, timeout=self.timeout + self.running_grace
                )
            except httpx.ConnectError as exc:
                if not self._answered:
                    raise RewardServerError(
                        f"{self.url}{path}: connection refused ({exc}); is `rlvr serve` running at {self.url}?"
                    ) from None
                last = f"{type(exc).__name__}: {exc}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                self._answered = True
                if response.status_code == 200:
                    return response.json()
                if response.status_code not in (429, 502, 503, 504):
                    raise RewardServerError(f"{self.url}{path}: HTTP {response.status_code}: {response.text[:300]}")
                last = f"HTTP {response.status_code}"
                retry_after = response.headers.get("Retry-After")
                if retry_after:
                    delay = max(delay, float(retry_after))
            if attempt < self.retries:
                log.warning(
                    "%s%s: %s; retry %d of %d in %.1f s", self.url, path, last, attempt + 1, self.retries, delay
                )
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
        raise RewardServerError(f"{self.url}{path}: gave up after {self.retries + 1} attempts ({last})")

    def grade(self, items: Sequence[dict[str, Any]], timeout: float | None = None) -> list[dict[str, Any]]:
        """Grade raw items (the ``/v1/grade`` item shape); returns the result rows in order.
        Items the server did not run are sent again (up to ``retries`` times); one still not run
        then keeps its maskable ``sandbox_error``."""
        items = list(items)
        body: dict[str, Any] = {"items": items, "timeout": self.timeout if timeout is None else timeout}
        rows = self._post("/v1/grade", body)["results"]
        delay = self.backoff
        for _ in range(self.retries):
            again = [i for i, row in enumerate(rows) if row.get("detail") == NOT_RUN]
            if not again:
                break
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
            fresh = self._post("/v1/grade", {**body, "items": [items[i] for i in again]})["results"]
            for i, row in zip(again, fresh):
                rows[i] = row
        return rows

    def grade_items(self, items: Sequence[Item]) -> list[Verdict]:
        return [_verdict(row) for row in self.grade(_payload(items))]

    def health(self) -> dict[str, Any]:
        import httpx

        return httpx.get(self.url + "/healthz", timeout=10).json()
