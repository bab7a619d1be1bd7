"""AdaNorm (Xu et al. 2019; reference lancopku/AdaNorm).

z = (x - mean) / (std + eps) with the unbiased std; y = C * z * (1 - k * z) where the factor
(1 - k z) is detached, so the gradient sees C * z scaled by a constant. No learnable gain or bias.
"""

from __future__ import annotations

import torch
from torch import nn

from normlab.plugin import norm_layer

__all__ = ["AdaNorm"]


@norm_layer("adanorm")
class AdaNorm(nn.Module):
    def __init__(self, dim: int, k: float = 0.1, scale: float = 2.0, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.k, self.scale, self.eps = dim, k, scale, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        std = centred.std(dim=-1, keepdim=True, unbiased=True)
        z = centred / (std + self.eps)
        return self.scale * z * (1.0 - self.k * z).detach()

    def extra_repr(self) -> str:
        return f"dim={self.dim}, k={self.k}, scale={self.scale}"
