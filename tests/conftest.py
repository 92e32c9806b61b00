import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """A tiny random Llama with the real tokenizer (see ``rlvr.harness.models.tiny_random_model``):
    trainer and population mechanics run on it in seconds."""
    from rlvr.harness.models import tiny_random_model

    return str(tiny_random_model(tmp_path_factory.mktemp("tiny-model") / "tiny-llama", favoured="01234"))


@pytest.fixture(scope="session")
def digits_source(tmp_path_factory) -> str:
    """A training file the tiny model answers right by chance (sums from 0 to 4), so rewards vary."""
    import json

    path = tmp_path_factory.mktemp("data") / "digits_train.jsonl"
    rows = [
        {"id": f"d{a}+{b}", "question": f"What is {a} + {b}?", "answer": str(a + b)}
        for a in range(5)
        for b in range(5)
        if a + b <= 4
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="session")
def server():
    """One ``rlvr serve`` (default settings, two workers) for every module that needs a plain
    server: each start warms its math workers' parsers, ~4 s. Tests that need other settings, or
    that stop the server, start their own."""
    from server_helpers import Server

    s = Server()
    yield s
    s.stop()
