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
copy). Memory is therefore about twice the model, never N models.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

NOISE_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class Component:
    seed: int
    sigma: float
    weight: float = 1.0

    @property
    def amplitude(self) -> float:
        return self.weight * self.sigma


Spec = list[Component]


def merge_components(components: Iterable[Component]) -> Spec:
    """Sum weights of components sharing (seed, σ) — one axis in amplitude space — dropping zeros."""
    weights: dict[tuple[int, float], float] = {}
    for c in components:
        weights[(c.seed, c.sigma)] = weights.get((c.seed, c.sigma), 0.0) + c.weight
    return [Component(seed, sigma, w) for (seed, sigma), w in weights.items() if w != 0.0]


def tensor_noise(seed: int, shape: torch.Size, device: torch.device, noise_dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator(device=device).manual_seed(int(seed))
    return torch.randn(shape, generator=generator, dtype=noise_dtype, device=device)


class Perturber:
    """Applies specs to a model in place and restores its exact base weights."""

    def __init__(self, model: torch.nn.Module, noise_dtype: str = "bfloat16"):
        if noise_dtype not in NOISE_DTYPES:
            raise ValueError(f"noise_dtype must be one of {sorted(NOISE_DTYPES)}")
        self.model = model
        self.noise_dtype = NOISE_DTYPES[noise_dtype]
        self.noise_dtype_name = noise_dtype
        self.params = [(name, p) for name, p in model.named_parameters()]
        self.base = {name: p.detach().clone() for name, p in self.params}
        self.applied: Spec = []

    @torch.no_grad()
    def restore(self) -> None:
        for name, p in self.params:
            p.copy_(self.base[name])
        self.applied = []

    @torch.no_grad()
    def apply(self, spec: Sequence[Component]) -> None:
        """Base + Σ w σ ε(seed), computed from the exact base (previous specs are discarded)."""
        spec = merge_components(spec)
        for name, p in self.params:
            delta = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
            for c in spec:
                delta.add_(tensor_noise(c.seed, p.shape, p.device, self.noise_dtype).float(), alpha=c.weight * c.sigma)
            p.copy_(self.base[name])
            p.add_(delta.to(p.dtype))
        self.applied = list(spec)

    @torch.no_grad()
    def commit(self) -> None:
        """Make the current weights the new base (CoRP's recentring)."""
        for name, p in self.params:
            self.base[name] = p.detach().clone()
        self.applied = []


def spec_to_json(spec: Sequence[Component], base_model: str, noise_dtype: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"base_model": base_model, "noise_dtype": noise_dtype, "components": [asdict(c) for c in spec], **(extra or {})}


def spec_from_json(data: dict[str, Any]) -> Spec:
    return [Component(int(c["seed"]), float(c["sigma"]), float(c.get("weight", 1.0))) for c in data["components"]]


def save_consolidated(out: Path, spec: Sequence[Component], base_model_path: str, base_name: str, noise_dtype: str, extra: dict[str, Any] | None = None,
                      dtype: str = "auto", device: str = "auto") -> Path:
    """Write ``spec.json`` (base + seeds/σ/weights) and the merged HF checkpoint beside it."""
    from harness.backends.hf import load_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(json.dumps(spec_to_json(spec, base_name, noise_dtype, extra), indent=2))
    model, tokenizer, _ = load_model(base_model_path, dtype, device)
    Perturber(model, noise_dtype).apply(spec)
    merged = out / "merged"
    model.save_pretrained(merged, safe_serialization=True)
    tokenizer.save_pretrained(merged)
    return merged
