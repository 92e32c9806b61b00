"""Seeded Gaussian weight perturbations, shared by RandOpt and CoRP.

A perturbation is a list of components ``(seed, σ, w)`` with weight-space delta
Δ = Σ_j w_j σ_j ε(seed_j). As in the authors' code (RandOpt ``perturb_self_weights``, CoRP
``_apply_components_from_base``): ε is built tensor by tensor, each tensor drawing standard-normal
noise of its own shape from a fresh generator seeded with the component's seed (so every tensor
uses the first ``numel`` draws of the same stream), in bf16 by default; all parameters are
perturbed; σ is absolute (weight units). Components accumulate in fp32, the sum is cast to the
parameter dtype and added once. Noise is never stored: it is regenerated from the seed.

Restoring copies back an exact saved copy of the base weights (the released RandOpt code
subtracts the noise again, which is exact only up to rounding; its own README recommends the
copy). Memory is therefore about twice the model, never N models — plus an optional bounded
cache of recently drawn noise (``noise_cache_gb``): CoRP's merged specs reuse the same seeds
many times, and a cached draw is the very tensor a fresh draw would give, so results do not change.

Noise is drawn on the parameters' device, and a CPU and a CUDA generator seeded alike give
different streams, so a spec names a model only together with the device type it was drawn on:
``spec.json`` records it (``noise_device``) and ``Perturber.apply_json`` refuses, in one line, a
spec drawn on another device type. Drawing on the CPU always would make specs portable but is
not cheap on a GPU: a full draw of the 135M model takes 1.3 s fp32 / 2 s bf16 on 2 CPU cores
(measured), about 30 s for a 3B model per seed, and a CoRP spec has tens of seeds.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from rlvr.harness.errors import UserError

NOISE_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class Component:
    seed: int
    sigma: float
    weight: float = 1.0


Spec = list[Component]


def merge_components(components: Iterable[Component]) -> Spec:
    """Sum weights of components sharing (seed, σ) — one axis in amplitude space — dropping zeros,
    in a canonical (seed, σ) order so the fp32 accumulation, hence the weights, never depend on
    the order a spec was written in."""
    weights: dict[tuple[int, float], float] = {}
    for c in components:
        weights[(c.seed, c.sigma)] = weights.get((c.seed, c.sigma), 0.0) + c.weight
    return [Component(seed, sigma, w) for (seed, sigma), w in sorted(weights.items()) if w != 0.0]


def tensor_noise(seed: int, shape: torch.Size, device: torch.device, noise_dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator(device=device).manual_seed(int(seed))
    return torch.randn(shape, generator=generator, dtype=noise_dtype, device=device)


def noise_sketch(seed: int, dims: int = 512, noise_dtype: str = "bfloat16") -> np.ndarray:
    """ε(seed) on the first ``dims`` coordinates of every tensor (all tensors share the stream
    prefix): a fixed random projection for weight-space diagnostics such as the split-half test."""
    return np.asarray(
        tensor_noise(seed, torch.Size([dims]), torch.device("cpu"), NOISE_DTYPES[noise_dtype]).float().numpy(),
        dtype=float,
    )


class Perturber:
    """Applies specs to a model in place and restores its exact base weights."""

    def __init__(self, model: torch.nn.Module, noise_dtype: str = "bfloat16", noise_cache_gb: float = 0.0):
        if noise_dtype not in NOISE_DTYPES:
            raise ValueError(f"noise_dtype must be one of {sorted(NOISE_DTYPES)}")
        self.model = model
        self.noise_dtype = NOISE_DTYPES[noise_dtype]
        # Tied weights (e.g. a shared embedding / LM head) are one parameter, perturbed once.
        self.params = [(name, p) for name, p in model.named_parameters()]
        self.base = {name: p.detach().clone() for name, p in self.params}
        self.applied: Spec = []
        self.cache_bytes = int(noise_cache_gb * 1024**3)
        self._cache: OrderedDict[int, list[torch.Tensor]] = OrderedDict()
        self.seed_bytes = sum(p.numel() * self.noise_dtype.itemsize for _, p in self.params)
        self.draws = 0  # full-model noise draws (cache misses), for cost accounting

    @property
    def noise_device(self) -> str:
        """The device type(s) the noise is drawn on: that of the parameters (``cpu``, ``cuda``, ...)."""
        return "+".join(sorted({p.device.type for _, p in self.params}))

    def check_spec(self, data: dict[str, Any]) -> None:
        """Refuse a JSON spec whose noise was drawn on another device type or in another dtype:
        its seeds would give other noise here, hence another model."""
        recorded = data.get("noise_device")
        if recorded is not None and recorded != self.noise_device:
            raise UserError(
                f"this spec's noise was drawn on {recorded}, and this model is on {self.noise_device}: "
                f"{recorded} and {self.noise_device} generators give different noise from the same seed; "
                f"load the base model on {recorded} to rebuild it"
            )
        dtype = data.get("noise_dtype")
        if dtype is not None and NOISE_DTYPES.get(dtype) is not self.noise_dtype:
            raise UserError(f"this spec's noise was drawn in {dtype}; make the Perturber with noise_dtype={dtype}")

    def apply_json(self, data: dict[str, Any]) -> None:
        """Apply a ``spec.json`` (``spec_to_json``) after ``check_spec``."""
        self.check_spec(data)
        self.apply(spec_from_json(data))

    def _cached_noise(self, spec: Spec) -> dict[int, list[torch.Tensor]]:
        """Every tensor's noise for the spec's seeds that are cached or can be cached without
        evicting another seed of the same spec (LRU over the rest). Seeds left out are drawn
        tensor by tensor in ``apply``, so memory stays within the cache budget however many
        components a spec has (a 40-seed CoRP spec of a 135M model in fp32 is 22 GB of noise)."""
        if self.cache_bytes <= 0:
            return {}
        slots = self.cache_bytes // max(1, self.seed_bytes)
        seeds = [c.seed for c in spec]
        out = {}
        for seed in seeds:
            if seed in self._cache:
                self._cache.move_to_end(seed)
                out[seed] = self._cache[seed]
        for seed in seeds:
            if seed in out:
                continue
            while len(self._cache) >= slots:
                victim = next((s for s in self._cache if s not in out), None)
                if victim is None:
                    return out
                del self._cache[victim]
            self._cache[seed] = out[seed] = [
                tensor_noise(seed, p.shape, p.device, self.noise_dtype) for _, p in self.params
            ]
            self.draws += 1
        return out

    @torch.no_grad()
    def restore(self) -> None:
        for name, p in self.params:
            p.copy_(self.base[name])

    @torch.no_grad()
    def apply(self, spec: Sequence[Component]) -> None:
        """Base + Σ w σ ε(seed), computed from the exact base (previous specs are discarded)."""
        spec = merge_components(spec)
        cached = self._cached_noise(spec)
        self.draws += sum(c.seed not in cached for c in spec)
        for index, (name, p) in enumerate(self.params):
            delta = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
            for c in spec:
                noise = (
                    cached[c.seed][index]
                    if c.seed in cached
                    else tensor_noise(c.seed, p.shape, p.device, self.noise_dtype)
                )
                delta.add_(noise.float(), alpha=c.weight * c.sigma)
            p.copy_(self.base[name])
            p.add_(delta.to(p.dtype))


def spec_to_json(
    spec: Sequence[Component],
    base_model: str,
    noise_dtype: str,
    extra: dict[str, Any] | None = None,
    noise_device: str | None = None,
) -> dict[str, Any]:
    return {
        "base_model": base_model,
        "noise_dtype": noise_dtype,
        **({"noise_device": noise_device} if noise_device is not None else {}),
        "components": [asdict(c) for c in spec],
        **(extra or {}),
    }


def spec_from_json(data: dict[str, Any]) -> Spec:
    return [Component(int(c["seed"]), float(c["sigma"]), float(c.get("weight", 1.0))) for c in data["components"]]


def save_consolidated(
    out: Path,
    spec: Sequence[Component],
    base_model_path: str,
    base_name: str,
    noise_dtype: str,
    extra: dict[str, Any] | None = None,
    dtype: str = "auto",
    device: str = "auto",
    noise_device: str | None = None,
) -> Path:
    """Write ``spec.json`` (base + seeds/σ/weights + the device type the noise was drawn on) and
    the merged HF checkpoint beside it. ``noise_device``: where the search drew its noise; the
    checkpoint is refused (one line) if this process would draw it on another device type."""
    from rlvr.harness.backends.hf import load_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer, _ = load_model(base_model_path, dtype, device)
    perturber = Perturber(model, noise_dtype)
    data = spec_to_json(spec, base_name, noise_dtype, extra, noise_device or perturber.noise_device)
    perturber.check_spec(data)
    (out / "spec.json").write_text(json.dumps(data, indent=2))
    perturber.apply(spec)
    merged = out / "merged"
    model.save_pretrained(merged, safe_serialization=True)
    tokenizer.save_pretrained(merged)
    return merged
