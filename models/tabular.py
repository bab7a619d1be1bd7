"""Tabular Transformer for regression: one token per feature (a per-feature linear embedding, as in
FT-Transformer) plus a class token; the head reads the class token."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from models.backbone import TokenTransformer
from models.config import TransformerConfig

__all__ = ["TabularConfig", "TabularTransformer"]


@dataclass
class TabularConfig(TransformerConfig):
    depth: int = 12  # paper: 12 layers
    heads: int = 8  # paper: 8 heads
    num_features: int = 8  # input columns F (one token each)
    num_outputs: int = 1  # regression targets


class TabularTransformer(TokenTransformer):
    """(B, F) float -> (B, num_outputs)."""

    def __init__(self, config: TabularConfig) -> None:
        super().__init__(config)
        self.config: TabularConfig = config
        bound = 1.0 / math.sqrt(config.dim)
        self.feature_weight = nn.Parameter(
            torch.empty(config.num_features, config.dim).uniform_(-bound, bound)
        )
        self.feature_bias = nn.Parameter(torch.empty(config.num_features, config.dim).uniform_(-bound, bound))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.head = nn.Linear(config.dim, config.num_outputs)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.init_branch_weights()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.config.num_features:
            raise ValueError(f"expected {self.config.num_features} features, got {x.shape[-1]}")
        features = x.unsqueeze(-1) * self.feature_weight + self.feature_bias  # (B, F, D)
        cls = self.cls_token.expand(x.shape[0], -1, -1).to(features.dtype)  # (B, 1, D)
        return torch.cat([cls, features], dim=1)  # (B, F + 1, D)

    def readout(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.head(h[:, 0])  # (B, num_outputs)
