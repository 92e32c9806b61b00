"""A small OpenAI-compatible HTTP server for tests: /v1/completions and /v1/chat/completions.

With ``--model DIR`` it generates with our hf backend (so its samples can be compared with
``--backend hf`` sample for sample); otherwise it answers deterministically from the seed.
``--fail-first N --fail-status S`` makes the first N requests fail with status S (429 carries
Retry-After) to exercise retries; ``/stats`` reports requests, the peak number in flight and the
seeds received.
"""

import argparse
import asyncio
import threading

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

STATE = {"requests": 0, "in_flight": 0, "max_in_flight": 0, "seeds": [], "failed": 0}
LOCK = threading.Lock()


def build_app(model_dir, fail_first, fail_status, delay):
    app = FastAPI()
    backend = None
    if model_dir:
        from rlvr.harness.backends.hf import HFBackend

        backend = HFBackend(model_dir, batch_size=4)
    gen_lock = threading.Lock()

    def generate(prompt, body):
        from rlvr.harness.backends.base import GenerationRequest, SamplingParams

        seed = int(body.get("seed") or 0)
        stop = tuple(body.get("stop") or ())
        if backend is None:
            text = f"sample with seed {seed}. The answer is \\boxed{{{seed % 3}}}."
            limit = int(body.get("max_tokens") or 16)
            words = text.split(" ")
            finish = "length" if len(words) > limit else "stop"
            text = " ".join(words[:limit])
            return text, finish, min(len(words), limit), None, None
        params = SamplingParams(
            float(body.get("temperature") or 0),
            float(body.get("top_p") or 1),
            int(body.get("max_tokens") or 16),
            stop,
            True,
        )
        with gen_lock:
            g = backend.generate([GenerationRequest(prompt, seed)], params)[0]
        # Like vLLM: the stop string is cut from the text and named in stop_reason.
        hit = next((s for s in stop if g.text.endswith(s)), None)
        text = g.text[: -len(hit)] if hit else g.text
        return text, g.finish_reason, g.n_tokens, g.n_prompt_tokens, hit

    async def handle(request: Request, chat: bool):
        body = await request.json()
        with LOCK:
            STATE["requests"] += 1
            STATE["in_flight"] += 1
            STATE["max_in_flight"] = max(STATE["max_in_flight"], STATE["in_flight"])
            fail = STATE["failed"] < fail_first
            if fail:
                STATE["failed"] += 1
        try:
            await asyncio.sleep(delay)
            if fail:
                headers = {"Retry-After": "0.05"} if fail_status == 429 else {}
                return JSONResponse(
                    {"error": {"message": "injected failure"}}, status_code=fail_status, headers=headers
                )
            if body.get("n", 1) != 1:
                return JSONResponse({"error": {"message": "n must be 1"}}, status_code=400)
            with LOCK:
                STATE["seeds"].append(body.get("seed"))
            prompt = body["messages"] if chat else body["prompt"]
            text, finish, n_tokens, n_prompt, stop_reason = await asyncio.to_thread(generate, prompt, body)
            choice = {"index": 0, "finish_reason": finish, "stop_reason": stop_reason}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            return {
                "id": "x",
                "object": "text_completion",
                "model": body.get("model"),
                "choices": [choice],
                "usage": {"completion_tokens": n_tokens, "prompt_tokens": n_prompt},
            }
        finally:
            with LOCK:
                STATE["in_flight"] -= 1

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await handle(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await handle(request, chat=True)

    @app.get("/stats")
    async def stats():
        with LOCK:
            return dict(STATE)

    return app


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--fail-status", type=int, default=429)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.model, args.fail_first, args.fail_status, args.delay),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
