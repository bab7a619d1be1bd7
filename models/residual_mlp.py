"""A standalone residual MLP with the Transforming-Rank knobs, for init-only rank studies.

Input tokens (T, D) or (B, T, D) -> the residual stream after `depth` blocks, same shape. No embedding,
no head and no final norm: what is measured is the residual stream itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from models.blocks import MlpBlock, residual_branches
from models.layers import fan_in_init
from models.norms import norm_factory
from models.norms.conditioning import zero_init_conditioning

__all__ = ["ResidualMLP", "ResidualMLPConfig"]


@dataclass
class ResidualMLPConfig:
    dim: int = 64  # width d of the residual stream
    depth: int = 8  # number of residual blocks
    mlp_ratio: float = 4.0  # width expansion m/d (two_matrix only)
    norm: str = "layernorm"  # norm kind, see models.norms.NORM_KINDS
    norm_options: dict[str, Any] = field(default_factory=dict)  # passed to build_norm
    norm_placement: str = "pre"  # pre | post | output | none
    skip_scale: float = 1.0  # beta: branch-to-skip ratio
    init_scale: float = 1.0  # alpha: branch weights ~ N(0, alpha^2 / fan_in); norms keep their own init
    activation: str = "relu"  # relu | gelu | tanh
    branch: str = "two_matrix"  # two_matrix | one_matrix


class ResidualMLP(nn.Module):
    def __init__(self, config: ResidualMLPConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or ResidualMLPConfig()
        norm_layer = norm_factory(config.norm, config.norm_options)
        self.blocks = nn.ModuleList(
            MlpBlock(
                config.dim,
                norm_layer,
                mlp_ratio=config.mlp_ratio,
                activation=config.activation,
                branch=config.branch,
                placement=config.norm_placement,
                skip_scale=config.skip_scale,
            )
            for _ in range(config.depth)
        )
        self.final_norm = nn.Identity()
        for branch in residual_branches(self.blocks):
            fan_in_init(branch, gain=config.init_scale)
        zero_init_conditioning(self)  # AutoNorm gates at (0.5, 0.5), FiLM = plain LN, as documented

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.dim() == 3 else x.unsqueeze(0)  # (B, T, D)

    def attention_mask(self, x: torch.Tensor) -> None:
        return None

    def token_mask(self, x: torch.Tensor) -> None:
        return None

    def forward_blocks(
        self, h: torch.Tensor, mask: torch.Tensor | None = None, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        for block in self.blocks:
            h = block(h, token_mask=token_mask)
        return h

    def readout(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return h if x.dim() == 3 else h.squeeze(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.forward_blocks(self.embed(x)), x)
