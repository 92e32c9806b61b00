"""The ``openai`` backend: any OpenAI-compatible endpoint (vLLM, SGLang, TGI, llama.cpp, OpenAI).

Text prompts go to ``/completions``, chat prompts (the ``chat`` template) to
``/chat/completions``. One request per sample with ``n=1`` and the sample's seed, so each
sample is reproducible where the server honours ``seed``. Requests run concurrently up to a
limit; connection errors, timeouts, 429 and 5xx are retried with exponential backoff (honouring
``Retry-After``); other 4xx errors stop the run with the server's message.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from rlvr.harness.backends.base import Generation, GenerationRequest, OnSample, OnTokens, SamplingParams
from rlvr.harness.errors import UserError

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 6,
        backoff_s: float = 0.5,
    ):
        if not base_url:
            raise UserError("the openai backend needs --base-url (e.g. http://localhost:8000/v1)")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.retries = 0

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        on_sample: OnSample | None = None,
        on_tokens: OnTokens | None = None,
    ) -> list[Generation]:
        """Every request concurrently (up to ``concurrency``); ``on_sample`` hears of each answer
        as it arrives, ``on_tokens`` of its completion tokens (the server's usage count)."""
        return asyncio.run(self._generate_all(requests, params, on_sample, on_tokens))

    async def _generate_all(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        on_sample: OnSample | None = None,
        on_tokens: OnTokens | None = None,
    ) -> list[Generation]:
        import httpx

        limit = asyncio.Semaphore(self.concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers) as client:

            async def one(index: int, request: GenerationRequest) -> Generation:
                async with limit:
                    generation = await self._one(client, request, params)
                if on_tokens is not None:
                    on_tokens(generation.n_tokens or 0)
                if on_sample is not None:
                    on_sample(index, generation)
                return generation

            tasks = [asyncio.ensure_future(one(i, r)) for i, r in enumerate(requests)]
            try:
                return list(await asyncio.gather(*tasks))
            finally:
                for task in tasks:  # one request failed: the others stop (their answers so far were reported)
                    task.cancel()

    def _body(self, request: GenerationRequest, params: SamplingParams) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": 1,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": request.seed,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if isinstance(request.prompt, str):
            return "/completions", {**body, "prompt": request.prompt}
        return "/chat/completions", {**body, "messages": request.prompt}

    async def _one(self, client: Any, request: GenerationRequest, params: SamplingParams) -> Generation:
        import httpx

        path, body = self._body(request, params)
        for attempt in range(self.max_retries + 1):
            wait = self.backoff_s * (2**attempt) * (0.5 + random.random())
            try:
                response = await client.post(self.base_url + path, json=body)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                if attempt == self.max_retries:
                    raise UserError(
                        f"cannot reach {self.base_url} after {attempt + 1} tries ({type(exc).__name__}); is the "
                        "server running?"
                    ) from exc
            else:
                if response.status_code == 200:
                    return self._parse(request, params, response)
                if response.status_code not in RETRY_STATUS or attempt == self.max_retries:
                    raise UserError(f"{self.base_url}{path} answered {response.status_code}: {response.text[:200]}")
                retry_after = response.headers.get("retry-after")
                if retry_after:
                    try:
                        wait = max(wait, float(retry_after))
                    except ValueError:
                        pass
            self.retries += 1
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    def _parse(self, request: GenerationRequest, params: SamplingParams, response: Any) -> Generation:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["text"] if "text" in choice else choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise UserError(
                f"{self.base_url} returned a response that is not an OpenAI completion: {response.text[:200]}"
            ) from exc
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        stop_reason = choice.get("stop_reason")  # vLLM names the stop string that matched
        if (
            params.include_stop
            and isinstance(stop_reason, str)
            and stop_reason in params.stop
            and not text.endswith(stop_reason)
        ):
            text += stop_reason
        usage = data.get("usage") or {}
        n_tokens = usage.get("completion_tokens")
        return Generation(
            request.prompt, text, finish, int(n_tokens) if n_tokens is not None else None, usage.get("prompt_tokens")
        )

    def close(self) -> None:
        pass
