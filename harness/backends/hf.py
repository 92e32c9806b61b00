"""The ``hf`` backend: a transformers causal LM on CPU or GPU, batched and left-padded."""

from __future__ import annotations

from typing import Any

from rlvr.harness.backends.base import Generation, GenerationRequest, OnSample, OnTokens, SamplingParams
from rlvr.harness.backends.hf_sampling import sample_batch
from rlvr.harness.errors import UserError
from rlvr.harness.templates import prompt_text


def encode_prompt(tokenizer: Any, prompt: Any) -> tuple[str, list[int]]:
    """``(text, token ids)`` exactly as every local backend feeds the model. A chat template
    already wrote any BOS token into the text, so only plain prompts get special tokens."""
    text = prompt_text(prompt, tokenizer)
    return text, list(tokenizer(text, add_special_tokens=isinstance(prompt, str)).input_ids)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda but no CUDA GPU is visible; use --device cpu")
    return device


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise UserError(f"unknown --dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return table[dtype]


def load_model(path: str, dtype: str = "auto", device: str = "auto"):
    """``(model, tokenizer, device)`` ready for generation (eval mode, left padding)."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.disable_progress_bar()
    device = resolve_device(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype, device))
    except (OSError, ValueError) as exc:  # a missing or unreadable checkpoint, an unknown architecture
        lines = [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        raise UserError(f"cannot load model {path!r}: {lines[0][:300]}") from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device).eval(), tokenizer, device


def dtype_name(model: Any) -> str:
    """A model's parameter dtype as a config string (``float32``, ``bfloat16``)."""
    return str(next(model.parameters()).dtype).replace("torch.", "")


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


class HFBackend:
    name = "hf"

    def __init__(
        self,
        model_path: str,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = 16,
        max_model_len: int | None = None,
    ):
        import torch

        self.model_path = model_path
        self.model, self.tokenizer, self.device = load_model(model_path, dtype, device)
        self.dtype = dtype_name(self.model)
        self.batch_size = max(1, batch_size)
        self.eos_ids = eos_token_ids(self.model, self.tokenizer)
        self.max_model_len = max_model_len or int(getattr(self.model.config, "max_position_embeddings", 4096))
        self._torch = torch

    def encode(self, prompt: Any) -> tuple[str, list[int]]:
        return encode_prompt(self.tokenizer, prompt)

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        on_sample: OnSample | None = None,
        on_tokens: OnTokens | None = None,
    ) -> list[Generation]:
        encoded = [self.encode(r.prompt) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: len(encoded[i][1]))
        results: list[Generation | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            budgets = [max(1, min(params.max_tokens, self.max_model_len - len(encoded[i][1]))) for i in chunk]

            def finished(row_index: int, row: Any, chunk: list[int] = chunk) -> None:
                i = chunk[row_index]
                results[i] = self._finish(encoded[i], row, params)
                if on_sample is not None:
                    on_sample(i, results[i])

            sample_batch(
                self.model,
                [encoded[i][1] for i in chunk],
                [requests[i].seed for i in chunk],
                budgets,
                self.eos_ids,
                self.tokenizer.pad_token_id,
                params.temperature,
                params.top_p,
                params.stop,
                lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
                on_step=on_tokens,
                on_row=finished,
            )
        return [r for r in results if r is not None]

    def _finish(self, encoded: tuple[str, list[int]], row: Any, params: SamplingParams) -> Generation:
        text = self.tokenizer.decode(row.token_ids, skip_special_tokens=True)
        if row.stop_text is not None:
            cut = text.find(row.stop_text)
            if cut != -1:
                text = text[: cut + len(row.stop_text)] if params.include_stop else text[:cut]
        return Generation(encoded[0], text, row.finish_reason, len(row.token_ids), len(encoded[1]), row.token_ids)

    def close(self) -> None:
        self.model = None
