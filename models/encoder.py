"""Transformer encoder for token sequences with three heads:
sequence (B, T) -> (B, num_classes) by masked mean pooling over non-pad tokens;
token (B, T) -> (B, T, num_classes); lm (B, T) -> (B, T, vocab_size) with causal attention.

Pad tokens (pad_id) are never attended to, are excluded from pooling, and are excluded from the token
mean that AutoNorm's selector and FiLM's modulator read, so padding a batch further changes nothing.

The lm head is causal (`EncoderConfig.causal`) in attention and in those norms alike: position t's gate
/ FiLM modulation comes from the mean of the real tokens 0..t of its sample (so gates are per token,
(B, T, 2)), and no logit at position t depends on a token after t. The sequence and token heads see the
whole sequence and condition on one token mean per sample."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.backbone import TokenTransformer
from models.config import TransformerConfig
from models.norms.conditioning import set_causal_conditioning

__all__ = ["HEADS", "Encoder", "EncoderConfig"]

HEADS = ("sequence", "token", "lm")


@dataclass
class EncoderConfig(TransformerConfig):
    depth: int = 12  # paper: 12 layers
    heads: int = 8  # paper: 8 heads
    vocab_size: int = 1000  # token ids in [0, vocab_size)
    max_len: int = 128  # learnable positions; longer inputs are rejected
    num_classes: int = 2  # outputs of the sequence / token heads
    head: str = "sequence"  # sequence | token | lm
    pad_id: int = 0  # pad tokens: never attended to, excluded from pooling and from norms' token means

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head not in HEADS:
            raise ValueError(f"unknown head {self.head!r}; choose one of {HEADS}")

    @property
    def causal(self) -> bool:
        """Whether position t may only see tokens 0..t: in attention and in token-conditioned norms."""
        return self.head == "lm"


class Encoder(TokenTransformer):
    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.config: EncoderConfig = config
        set_causal_conditioning(self, config.causal)
        self.token_embed = nn.Embedding(config.vocab_size, config.dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, config.max_len, config.dim))
        out = config.vocab_size if config.head == "lm" else config.num_classes
        self.head = nn.Linear(config.dim, out)
        nn.init.trunc_normal_(self.token_embed.weight, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.init_branch_weights()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.shape[1]
        if tokens > self.config.max_len:
            raise ValueError(f"sequence length {tokens} exceeds max_len {self.config.max_len}")
        return self.token_embed(x) + self.pos_embed[:, :tokens]  # (B, T, D)

    def attention_mask(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.shape[1]
        keys = (x != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, T)
        if self.config.causal:
            causal = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).tril()
            keys = keys & causal  # (B, 1, T, T)
        # Every query may attend to itself, so an all-pad row never yields a NaN softmax.
        eye = torch.eye(tokens, dtype=torch.bool, device=x.device)
        return keys | eye  # (B, 1, T, T)

    def token_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        real = x != self.config.pad_id  # (B, T)
        # A pad-free batch passes None: the norms then keep their plain token mean (the unmasked fused
        # kernel on CPU), which is the same function without the per-token weights.
        return None if bool(real.all()) else real

    def readout(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.config.head != "sequence":
            return self.head(h)  # (B, T, out)
        keep = (x != self.config.pad_id).unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp_min(1.0)  # (B, D)
        return self.head(pooled)  # (B, num_classes)
