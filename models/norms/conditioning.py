"""Norms conditioned on the token mean of their input (AutoNorm's selector, FiLM's modulator).

Two things set them apart from one-argument norms (LayerNorm, DyT, AdaNorm, Random Selector):
- on padded sequences the token mean must skip pad positions, so they take an optional
  `token_mask` keyword (B, T) bool, True = real token; `apply_norm` passes it only to them;
- their conditioning MLP's last layer starts at exactly zero (gates (0.5, 0.5), FiLM = plain LN), and a
  backbone that re-initialises its own weights calls `zero_init_conditioning` after it, so the
  invariant holds whatever order the inits run in;
- in a causal model (the encoder's lm head) position t must not see later tokens, so the model calls
  `set_causal_conditioning` once at construction: each norm then conditions position t on the mean of
  the (real) tokens 0..t, and its gate / modulation is per token, (B, T, ...), instead of per sample.
  Causality is a fixed property of the model, like its attention mask, hence an attribute rather than
  an argument threaded through every block's forward.
"""

from __future__ import annotations

import torch
from torch import nn

from models.norms.mixed import causal_token_mean, token_mean

__all__ = ["TokenConditionedNorm", "apply_norm", "set_causal_conditioning", "zero_init_conditioning"]


class TokenConditionedNorm(nn.Module):
    """Base of norms whose parameters are predicted from the (masked) token mean: per sample, or per
    token from the causal prefix mean when `causal` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.causal = False

    def pooled(self, xs: torch.Tensor, token_mask: torch.Tensor | None) -> torch.Tensor:
        """What the conditioning MLP reads: (B, T, D) -> (B, D) token mean, or (B, T, D) prefix means."""
        if self.causal:
            return causal_token_mean(xs, token_mask)
        return token_mean(xs, token_mask)

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError

    def zero_init_last(self) -> None:
        """Zero the last layer of the conditioning MLP: the documented start of the layer."""
        raise NotImplementedError


def apply_norm(norm: nn.Module, x: torch.Tensor, token_mask: torch.Tensor | None) -> torch.Tensor:
    """norm(x), with the token mask passed on only to norms that condition on the tokens."""
    if token_mask is not None and isinstance(norm, TokenConditionedNorm):
        return norm(x, token_mask=token_mask)
    return norm(x)


def set_causal_conditioning(model: nn.Module, causal: bool = True) -> None:
    """Make every token-conditioned norm inside `model` condition causally (prefix means) or not."""
    for module in model.modules():
        if isinstance(module, TokenConditionedNorm):
            module.causal = bool(causal)


def zero_init_conditioning(model: nn.Module) -> None:
    """Re-zero the conditioning MLPs' last layers of every token-conditioned norm inside `model`."""
    for module in model.modules():
        if isinstance(module, TokenConditionedNorm):
            module.zero_init_last()
