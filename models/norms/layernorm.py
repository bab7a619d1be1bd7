"""FrozenLN: the plain LayerNorm baseline (torch's fused kernel, affine on)."""

from __future__ import annotations

from torch import nn

from normlab.plugin import norm_layer

__all__ = ["LayerNorm"]


@norm_layer("layernorm")
class LayerNorm(nn.LayerNorm):
    """torch.nn.LayerNorm over the last dim; a subclass only so every norm kind has a NormLab name."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__(dim, eps=eps)
