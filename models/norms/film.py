"""FiLM norm: affine-free LayerNorm modulated per sample by gamma = 1 + dgamma and beta, both
predicted from the token mean of the layer input by a small MLP (on padded sequences, the mean over
real tokens only). The MLP's last layer is zero-initialised, so at init the layer is exactly plain
LayerNorm (gamma = 1, beta = 0). In a causal model (`causal`, set by the lm encoder) the MLP reads the
prefix mean of tokens 0..t, so gamma and beta are per token, (B, T, D), and never see a later token."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from models.norms.conditioning import TokenConditionedNorm
from models.norms.mixed import as_samples, mixed_norm, sample_token_mask
from normlab.plugin import norm_layer

__all__ = ["FiLMNorm"]


@norm_layer("film")
class FiLMNorm(TokenConditionedNorm):
    def __init__(self, dim: int, hidden: int | None = None, eps: float = 1e-5) -> None:
        super().__init__()
        hidden = hidden or max(8, dim // 4)
        self.eps = eps
        self.modulator = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, 2 * dim))
        self.zero_init_last()

    def zero_init_last(self) -> None:
        last = cast(nn.Linear, self.modulator[-1])  # built in __init__: Linear(hidden, 2 * dim)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        xs = as_samples(x)  # (B, T, D)
        mask = None if token_mask is None else sample_token_mask(token_mask, x)  # (B, T)
        # (B, D) each, or (B, T, D) each when causal
        dgamma, beta = self.modulator(self.pooled(xs, mask)).chunk(2, dim=-1)
        gamma = 1.0 + dgamma
        no_tanh = torch.zeros_like(gamma)
        y = mixed_norm(xs, gamma.new_zeros(()), gamma, no_tanh, beta, eps=self.eps)
        return y.reshape(x.shape)
