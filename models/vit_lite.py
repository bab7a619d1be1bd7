"""ViT-Lite (Hassani et al., Compact Transformers): conv patch tokenizer, class token, learnable
positional embedding, pre-norm Transformer, linear head on the class token."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.backbone import TokenTransformer
from models.config import TransformerConfig

__all__ = ["ViTLite", "ViTLiteConfig"]


@dataclass
class ViTLiteConfig(TransformerConfig):
    image_size: int = 32  # square input side in pixels
    in_channels: int = 3  # image channels
    num_classes: int = 10  # classifier outputs
    patch_size: int = 4  # conv tokenizer kernel = stride

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not divisible by patch_size {self.patch_size}")


class ViTLite(TokenTransformer):
    """(B, C, H, W) float -> (B, num_classes) logits."""

    def __init__(self, config: ViTLiteConfig) -> None:
        super().__init__(config)
        self.config: ViTLiteConfig = config
        num_patches = (config.image_size // config.patch_size) ** 2
        self.tokenizer = nn.Conv2d(
            config.in_channels, config.dim, config.patch_size, stride=config.patch_size
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, config.dim))
        self.head = nn.Linear(config.dim, config.num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.init_branch_weights()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        patches = self.tokenizer(x).flatten(2).transpose(1, 2)  # (B, N, D)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        return torch.cat([cls, patches], dim=1) + self.pos_embed  # (B, N + 1, D)

    def readout(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.head(h[:, 0])  # (B, num_classes)
