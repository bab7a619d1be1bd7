"""FiLM norm: affine-free LayerNorm modulated per sample by gamma = 1 + dgamma and beta, both
predicted from the token mean of the layer input by a small MLP. The MLP's last layer is zero-initialised,
so at init the layer is exactly plain LayerNorm (gamma = 1, beta = 0)."""

from __future__ import annotations

import torch
from torch import nn

from models.norms.mixed import as_samples, mixed_norm, token_mean

__all__ = ["FiLMNorm"]


class FiLMNorm(nn.Module):
    def __init__(self, dim: int, hidden: int | None = None, eps: float = 1e-5) -> None:
        super().__init__()
        hidden = hidden or max(8, dim // 4)
        self.eps = eps
        self.modulator = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, 2 * dim))
        nn.init.zeros_(self.modulator[-1].weight)
        nn.init.zeros_(self.modulator[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = as_samples(x)  # (B, T, D)
        dgamma, beta = self.modulator(token_mean(xs)).chunk(2, dim=-1)  # (B, D) each
        gamma = 1.0 + dgamma
        no_tanh = torch.zeros_like(gamma)
        y = mixed_norm(xs, gamma.new_zeros(()), gamma, no_tanh, beta, eps=self.eps)
        return y.reshape(x.shape)
