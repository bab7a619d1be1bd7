"""The common backbone config: every size and Transforming-Rank knob is a field."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["TransformerConfig", "config_field_names"]


@dataclass
class TransformerConfig:
    dim: int = 128  # token width d
    depth: int = 8  # number of Transformer blocks
    heads: int = 4  # attention heads (dim must be divisible by heads)
    mlp_ratio: float = 2.0  # width expansion m/d of the two-matrix MLP branch
    dropout: float = 0.1  # dropout in attention, MLP and after the embedding
    drop_path: float = 0.1  # stochastic depth of the LAST block; linear schedule from 0 (timm)
    layer_scale_init: float | None = 1e-4  # LayerScale init value; None disables LayerScale
    norm: str = "layernorm"  # norm kind, see models.norms.NORM_KINDS
    norm_options: dict[str, Any] = field(default_factory=dict)  # passed to build_norm, e.g. {"tau": 0.5}
    norm_placement: str = "pre"  # pre | post | output | none
    skip_scale: float = 1.0  # beta: branch-to-skip ratio, h + beta * f(...)
    init_scale: float = 1.0  # alpha: multiplies the init std (0.02) of the attention and MLP branch weights
    activation: str = "gelu"  # gelu | relu | tanh
    branch: str = "two_matrix"  # two_matrix (W_down act(W_up x)) | one_matrix (act(W x))

    def __post_init__(self) -> None:
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} must be divisible by heads {self.heads}")
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


def config_field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}
