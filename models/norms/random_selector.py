"""Random Selector baseline: a * DyT(x) + (1 - a) * LN(x) with a ~ U(0, 1) drawn per sample at every
training forward. In eval a = 0.5 (our choice, documented: the expectation of the training mixture,
and deterministic)."""

from __future__ import annotations

import torch
from torch import nn

from models.norms.mixed import as_samples, mixed_norm
from normlab.plugin import norm_layer

__all__ = ["RandomSelectorNorm"]


@norm_layer("random")
class RandomSelectorNorm(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.dyt_alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.dyt_weight = nn.Parameter(torch.ones(dim))
        self.dyt_bias = nn.Parameter(torch.zeros(dim))
        self.ln_weight = nn.Parameter(torch.ones(dim))
        self.ln_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = as_samples(x)  # (B, T, D)
        batch = xs.shape[0]
        if self.training:
            a = torch.rand(batch, 1, device=x.device, dtype=self.dyt_weight.dtype)  # (B, 1)
        else:
            a = torch.full((batch, 1), 0.5, device=x.device, dtype=self.dyt_weight.dtype)
        cl = (1.0 - a) * self.ln_weight  # (B, D)
        cd = a * self.dyt_weight
        c0 = a * self.dyt_bias + (1.0 - a) * self.ln_bias
        return mixed_norm(xs, self.dyt_alpha, cl, cd, c0, eps=self.eps).reshape(x.shape)
