"""Batched sampling with a per-sample random stream, for transformers causal LMs.

``model.generate`` draws every row from one global RNG, so a sample depends on its batch
neighbours. Here each row owns a ``torch.Generator`` seeded from its sample seed: the same
(prompt, seed) gives the same tokens whatever else is in the batch (up to floating-point
differences from padding). Finished rows leave the batch (their KV cache rows are dropped), so
long and short answers do not cost each other compute. Trainers reuse this for rollouts.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch


@dataclass
class RowResult:
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "length"
    stop_text: str | None = None


def _filter_top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering (Holtzman et al. 2020): keep the smallest set of tokens whose
    probability mass reaches ``top_p``, renormalised."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return filtered / filtered.sum(dim=-1, keepdim=True)


def next_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generators: Sequence[torch.Generator]
) -> torch.Tensor:
    """Greedy when ``temperature == 0``; otherwise one draw per row from its own generator."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = _filter_top_p(torch.softmax(logits.float() / temperature, dim=-1), top_p)
    return torch.cat([torch.multinomial(probs[i], 1, generator=generators[i]) for i in range(len(generators))])


def _cache_keyword(model: torch.nn.Module) -> str:
    """transformers renamed ``past_key_values`` to ``cache``; accept either."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _forward(model: torch.nn.Module, keyword: str, **inputs):
    out = model(use_cache=True, logits_to_keep=1, **inputs)
    return getattr(out, keyword), out.logits[:, -1, :]


@torch.no_grad()
def sample_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    seeds: Sequence[int],
    max_new_tokens: Sequence[int],
    eos_ids: set[int],
    pad_id: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    stop: Sequence[str] = (),
    decode: Callable[[list[int]], str] | None = None,
    on_step: Callable[[int], None] | None = None,
    on_row: Callable[[int, RowResult], None] | None = None,
) -> list[RowResult]:
    """Sample a continuation for every prompt (token ids). A row ends at an EOS token (kept in
    ``token_ids``), when the decoded tail contains a stop string, or after its token budget.

    ``on_step(tokens)`` is called after each decoding step with the tokens it produced (one per
    active row), ``on_row(index, result)`` as each row finishes: a caller can show progress and
    use a finished answer while the rest of the batch is still being written."""
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
    results = [RowResult() for _ in prompts]
    active = list(range(len(prompts)))
    tail = max((len(s) for s in stop), default=0) + 8
    keyword = _cache_keyword(model)
    cache, logits = _forward(model, keyword, input_ids=ids, attention_mask=mask, position_ids=positions)
    last_pos = positions[:, -1]
    for _ in range(max(max_new_tokens)):
        chosen = next_tokens(logits, temperature, top_p, [generators[i] for i in active])
        keep = []
        ended = []
        for row, token in enumerate(chosen.tolist()):
            index = active[row]
            result = results[index]
            result.token_ids.append(token)
            if token in eos_ids:
                result.finish_reason = "stop"
                ended.append(index)
                continue
            if stop and decode is not None:
                text = decode(result.token_ids[-tail:])
                hit = next((s for s in stop if s in text), None)
                if hit is not None:
                    result.finish_reason, result.stop_text = "stop", hit
                    ended.append(index)
                    continue
            if len(result.token_ids) >= max_new_tokens[index]:
                ended.append(index)
                continue
            keep.append(row)
        if on_step is not None:
            on_step(len(active))
        if on_row is not None:
            for index in ended:
                on_row(index, results[index])
        if not keep:
            break
        if len(keep) < len(active):
            select = torch.tensor(keep, device=device)
            cache.batch_select_indices(select)
            chosen, mask, last_pos = chosen[select], mask[select], last_pos[select]
            active = [active[r] for r in keep]
        mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype, device=device)], dim=1)
        last_pos = last_pos + 1
        cache, logits = _forward(
            model,
            keyword,
            input_ids=chosen[:, None],
            attention_mask=mask,
            position_ids=last_pos[:, None],
            **{keyword: cache},
        )
    return results
