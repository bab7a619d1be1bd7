"""Residual blocks with every Transforming-Rank knob:

    pre:    h + beta * LS(f(norm(h)))
    post:   norm(h + beta * LS(f(h)))
    output: h + beta * LS(norm(f(h)))
    none:   h + beta * LS(f(h))

beta is `skip_scale` (the branch-to-skip ratio; the skip path has gain 1), LS is LayerScale (identity
when disabled) and DropPath drops the whole branch per sample.

Blocks take an optional `token_mask` (B, T) bool (True = real token) and hand it to token-conditioned
norms only (AutoNorm, FiLM: their token mean skips pads); one-argument norms never see it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from models.layers import Attention, DropPath, LayerScale, MlpBranch
from models.norms.conditioning import apply_norm

__all__ = ["PLACEMENTS", "MlpBlock", "ResidualUnit", "TransformerBlock", "residual_branches"]

PLACEMENTS = ("pre", "post", "output", "none")
NormLayer = Callable[[int], nn.Module]


class ResidualUnit(nn.Module):
    def __init__(
        self,
        dim: int,
        branch: nn.Module,
        norm_layer: NormLayer,
        placement: str = "pre",
        skip_scale: float = 1.0,
        layer_scale_init: float | None = None,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown norm placement {placement!r}; choose one of {PLACEMENTS}")
        self.placement = placement
        self.skip_scale = float(skip_scale)
        self.branch = branch
        self.norm = norm_layer(dim) if placement != "none" else nn.Identity()
        self.layer_scale = (
            LayerScale(dim, layer_scale_init) if layer_scale_init is not None else nn.Identity()
        )
        self.drop_path = DropPath(drop_path)

    def _branch(self, x: torch.Tensor, **kwargs: torch.Tensor | None) -> torch.Tensor:
        out = self.branch(x, **kwargs) if kwargs else self.branch(x)
        return self.drop_path(self.layer_scale(out)) * self.skip_scale

    def forward(
        self, h: torch.Tensor, *, token_mask: torch.Tensor | None = None, **kwargs: torch.Tensor | None
    ) -> torch.Tensor:  # (B, T, D); kwargs go to the branch (the attention mask)
        if self.placement == "pre":
            return h + self._branch(apply_norm(self.norm, h, token_mask), **kwargs)
        if self.placement == "post":
            return apply_norm(self.norm, h + self._branch(h, **kwargs), token_mask)
        if self.placement == "output":
            out = self.branch(h, **kwargs) if kwargs else self.branch(h)
            out = apply_norm(self.norm, out, token_mask)
            return h + self.drop_path(self.layer_scale(out)) * self.skip_scale
        return h + self._branch(h, **kwargs)


class TransformerBlock(nn.Module):
    """Attention unit then MLP unit, each a ResidualUnit with the same knobs."""

    def __init__(
        self,
        dim: int,
        heads: int,
        norm_layer: NormLayer,
        mlp_ratio: float = 4.0,
        activation: str = "gelu",
        branch: str = "two_matrix",
        dropout: float = 0.0,
        placement: str = "pre",
        skip_scale: float = 1.0,
        layer_scale_init: float | None = None,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        common: dict[str, Any] = {
            "norm_layer": norm_layer,
            "placement": placement,
            "skip_scale": skip_scale,
            "layer_scale_init": layer_scale_init,
            "drop_path": drop_path,
        }
        self.attn = ResidualUnit(dim, Attention(dim, heads, dropout), **common)
        self.mlp = ResidualUnit(dim, MlpBranch(dim, mlp_ratio, activation, branch, dropout), **common)

    def forward(
        self, h: torch.Tensor, mask: torch.Tensor | None = None, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        h = self.attn(h, mask=mask, token_mask=token_mask)
        return self.mlp(h, token_mask=token_mask)  # (B, T, D)


class MlpBlock(nn.Module):
    """A token-wise residual MLP block (no attention): the unit of the Transforming-Rank studies."""

    def __init__(
        self,
        dim: int,
        norm_layer: NormLayer,
        mlp_ratio: float = 4.0,
        activation: str = "relu",
        branch: str = "two_matrix",
        placement: str = "pre",
        skip_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.mlp = ResidualUnit(
            dim, MlpBranch(dim, mlp_ratio, activation, branch), norm_layer, placement, skip_scale
        )

    def forward(
        self, h: torch.Tensor, mask: torch.Tensor | None = None, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.mlp(h, token_mask=token_mask)


def residual_branches(module: nn.Module) -> list[nn.Module]:
    """The branch f of every residual unit inside `module` (attention and MLP): what the branch init
    scale alpha applies to. Norms, LayerScale and everything outside the blocks are not branches."""
    return [unit.branch for unit in module.modules() if isinstance(unit, ResidualUnit)]
