"""DyT (Dynamic Tanh, Zhu et al. 2025; reference jiachenzhu/DyT): weight * tanh(alpha * x) + bias."""

from __future__ import annotations

import torch
from torch import nn

from models.norms.mixed import as_samples, mixed_norm
from normlab.plugin import norm_layer

__all__ = ["DyT"]


@norm_layer("dyt")
class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))  # ONE scalar, as in the reference
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = as_samples(x)  # (B, T, D)
        batch = xs.shape[0]
        # The mixed-norm kernel with the LN branch off: one fused pass instead of three eager ones.
        cd = self.weight.expand(batch, -1)  # (B, D)
        c0 = self.bias.expand(batch, -1)  # (B, D)
        y = mixed_norm(xs, self.alpha, torch.zeros_like(cd), cd, c0, use_ln=False)
        return y.reshape(x.shape)

    def extra_repr(self) -> str:
        return f"dim={self.weight.numel()}"
