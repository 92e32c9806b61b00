"""Generation backends: per-sample seeds, stop strings and finish reasons on the hf backend; the
openai backend against a real local HTTP server (retries, backoff, concurrency, chat and
completions, and sample-for-sample agreement with the hf backend); vLLM's guarded import."""

import contextlib
import os
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ROOT
from eval_helpers import rlvr, samples
from rlvr.harness.backends.base import GenerationRequest, SamplingParams, sample_seed
from rlvr.harness.errors import UserError
from rlvr.harness.models import embedded_model_dir
from rlvr.harness.templates import BUILTIN, render
from server_helpers import free_port


@pytest.fixture(scope="module")
def hf():
    from rlvr.harness.backends.hf import HFBackend

    backend = HFBackend(str(embedded_model_dir()), batch_size=8)
    yield backend
    backend.close()


@pytest.mark.slow
def test_sample_depends_only_on_its_seed_not_its_batch(hf):
    prompts = [
        render(BUILTIN["chat"], q, "Answer briefly.") for q in ("What is 3+4?", "Name a prime.", "What is 10/2?")
    ]
    params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12)
    together = hf.generate([GenerationRequest(p, s) for p in prompts for s in (11, 12)], params)
    alone = hf.generate([GenerationRequest(prompts[1], 12)], params)[0]
    assert alone.text == together[3].text
    assert together[2].text != together[3].text or together[2].token_ids != together[3].token_ids
    again = hf.generate([GenerationRequest(prompts[1], 12), GenerationRequest(prompts[0], 11)], params)
    assert again[0].text == together[3].text and again[1].text == together[0].text


def test_greedy_matches_transformers_generate(hf):
    import torch

    prompt = render(BUILTIN["qwen_math"], "What is 6 times 7?")
    mine = hf.generate([GenerationRequest(prompt, 0)], SamplingParams(max_tokens=20))[0]
    ids = torch.tensor([hf.encode(prompt)[1]])
    ref = hf.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False)
    assert mine.token_ids == ref[0, ids.shape[1] :].tolist()


def test_stop_strings_finish_reasons_and_token_counts(hf):
    prompt = render(BUILTIN["no_template"], "Count: 1, 2, 3, 4,")
    full = hf.generate([GenerationRequest(prompt, 0)], SamplingParams(max_tokens=16))[0]
    assert full.finish_reason == "length" and full.n_tokens == 16 and len(full.token_ids) == 16
    word = full.text.split()[2]
    kept = hf.generate([GenerationRequest(prompt, 0)], SamplingParams(max_tokens=16, stop=(word,), include_stop=True))[
        0
    ]
    cut = hf.generate([GenerationRequest(prompt, 0)], SamplingParams(max_tokens=16, stop=(word,), include_stop=False))[
        0
    ]
    assert kept.finish_reason == "stop" and kept.text.endswith(word) and kept.n_tokens < 16
    assert cut.text == kept.text[: -len(word)]
    eos = hf.generate(
        [GenerationRequest(render(BUILTIN["chat"], "Say only: yes", ""), 0)], SamplingParams(max_tokens=64)
    )[0]
    assert eos.finish_reason == "stop" and eos.token_ids[-1] in hf.eos_ids


def test_sample_seeds_are_stable_and_distinct():
    assert sample_seed(0, "gsm8k/0001", 3) == sample_seed(0, "gsm8k/0001", 3)
    seeds = {sample_seed(s, f"p{i}", j) for s in range(2) for i in range(50) for j in range(4)}
    assert len(seeds) == 400 and all(0 <= s < 2**31 for s in seeds)


class OpenAIServer:
    def __init__(self, *args):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "openai_server.py"), "--port", str(self.port), *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/stats", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("openai test server did not start")

    def stats(self):
        return httpx.get(self.url + "/stats").json()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def server(request):
    srv = OpenAIServer(*getattr(request, "param", ()))
    yield srv
    srv.stop()


@pytest.mark.parametrize("server", [("--fail-first", "3", "--fail-status", "429", "--delay", "0.05")], indirect=True)
def test_openai_backend_retries_limits_concurrency_and_sends_per_sample_seeds(server):
    from rlvr.harness.backends.openai_api import OpenAIBackend

    backend = OpenAIBackend("test-model", server.url + "/v1", concurrency=3, backoff_s=0.01)
    requests = [GenerationRequest(f"question {i}", 1000 + i) for i in range(9)] + [
        GenerationRequest([{"role": "user", "content": "hi"}], 7)
    ]
    out = backend.generate(requests, SamplingParams(temperature=0.7, max_tokens=32))
    assert [g.text for g in out[:2]] == [
        "sample with seed 1000. The answer is \\boxed{1}.",
        "sample with seed 1001. The answer is \\boxed{2}.",
    ]
    assert out[-1].text.startswith("sample with seed 7.") and out[-1].prompt == [{"role": "user", "content": "hi"}]
    assert all(g.finish_reason == "stop" and g.n_tokens == 8 for g in out)
    stats = server.stats()
    assert backend.retries == 3 and stats["failed"] == 3
    assert stats["max_in_flight"] <= 3
    assert sorted(stats["seeds"]) == sorted([1000 + i for i in range(9)] + [7])
    short = backend.generate([GenerationRequest("q", 5)], SamplingParams(max_tokens=3))[0]
    assert short.finish_reason == "length"


@pytest.mark.parametrize(
    "server",
    [
        (
            "--delay",
            "0.05",
        )
    ],
    indirect=True,
)
def test_openai_backend_reports_each_answer_as_it_arrives(server):
    """Progress and per-sample writing (issue 32): every answer is reported once, as it arrives."""
    from rlvr.harness.backends.openai_api import OpenAIBackend

    backend = OpenAIBackend("test-model", server.url + "/v1", concurrency=2)
    requests = [GenerationRequest(f"question {i}", 2000 + i) for i in range(5)]
    seen, tokens = [], []
    out = backend.generate(
        requests, SamplingParams(max_tokens=32), on_sample=lambda i, g: seen.append((i, g)), on_tokens=tokens.append
    )
    assert sorted(i for i, _ in seen) == list(range(5)) and all(out[i] is g for i, g in seen)
    assert sum(tokens) == sum(g.n_tokens for g in out) == 40


@pytest.mark.parametrize("server", [("--fail-first", "100", "--fail-status", "400")], indirect=True)
def test_openai_backend_reports_client_errors_in_one_line(server):
    from rlvr.harness.backends.openai_api import OpenAIBackend

    backend = OpenAIBackend("m", server.url + "/v1", max_retries=2, backoff_s=0.01)
    with pytest.raises(UserError, match="answered 400"):
        backend.generate([GenerationRequest("q", 1)], SamplingParams())
    assert server.stats()["requests"] == 1  # a 400 is not retried
    dead = OpenAIBackend("m", f"http://127.0.0.1:{free_port()}/v1", max_retries=1, backoff_s=0.01)
    with pytest.raises(UserError, match="cannot reach"):
        dead.generate([GenerationRequest("q", 1)], SamplingParams())


@pytest.mark.slow
def test_eval_through_an_openai_server_matches_the_hf_backend(tmp_path, tiny_model):
    srv = OpenAIServer("--model", tiny_model)
    try:
        common = [
            "--benchmarks",
            "gsm8k",
            "--limit",
            "2",
            "--n",
            "2",
            "--temperature",
            "0.9",
            "--max-tokens",
            "16",
            "--template",
            "r1",
            "--no-progress",
        ]
        remote = rlvr(
            "eval",
            *common,
            "--backend",
            "openai",
            "--base-url",
            srv.url + "/v1",
            "--model",
            "smol",
            "--out",
            str(tmp_path / "remote"),
        )
        assert remote.returncode == 0, remote.stderr
        local = rlvr("eval", *common, "--backend", "hf", "--model", tiny_model, "--out", str(tmp_path / "local"))
        assert local.returncode == 0, local.stderr
    finally:
        srv.stop()
    key = lambda r: (r["id"], r["sample_idx"])  # noqa: E731
    remote_rows = sorted(samples(tmp_path / "remote"), key=key)
    local_rows = sorted(samples(tmp_path / "local"), key=key)
    assert [
        (key(r), r["completion"], r["finish_reason"], r["n_tokens"], r["prompt"], r["correct"]) for r in remote_rows
    ] == [(key(r), r["completion"], r["finish_reason"], r["n_tokens"], r["prompt"], r["correct"]) for r in local_rows]


def test_vllm_backend_without_vllm_or_with_the_wrong_build_is_one_line(monkeypatch):
    from rlvr.harness.backends import vllm_engine

    monkeypatch.setattr(vllm_engine, "vllm_build", lambda: "none")
    with pytest.raises(UserError, match="needs vLLM: `make install`.*or use --backend hf"):
        vllm_engine.require_vllm()
    monkeypatch.setattr(vllm_engine, "vllm_build", lambda: "cuda")
    with pytest.raises(UserError, match="its cuda build but device cpu"):
        vllm_engine.require_vllm("cpu")
