"""A residual-MLP image classifier: the Transforming-Rank residual MLP with a task head, so rank studies
can train it on a study dataset like any other model.

    (B, C, H, W) -> flatten -> input projection (C*H*W -> d) -> ResidualMLP (depth blocks of width d)
                 -> final norm (pre / output placements, as every backbone) -> linear head

The paper states its rank results for residual MLP branches; `models.residual_mlp.ResidualMLP` is that
stack but has no task head, so a study could not train it. This wrapper adds the least around it: one
input projection (fan-in init, gain 1, so a standardised image enters the stream with unit RMS per
coordinate, the scale of a normalised token) and a head. Everything the rank claims measure is the
residual MLP's own stream: `rank_view(x)` hands models.rank the trunk and the projected inputs, each
example one token, so init_rank_report measures Z_l (examples x width), the per-vector Jacobian
d h_L / d h_0 and the branch Jacobians of the trunk itself, not of the projection or the head.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from models.layers import fan_in_init
from models.norms import norm_factory
from models.norms.conditioning import zero_init_conditioning
from models.residual_mlp import ResidualMLP, ResidualMLPConfig

__all__ = ["MlpClassifier", "MlpClassifierConfig"]


@dataclass
class MlpClassifierConfig(ResidualMLPConfig):
    image_size: int = 8  # square input side in pixels
    in_channels: int = 1  # image channels
    num_classes: int = 10  # classifier outputs

    def trunk_config(self) -> ResidualMLPConfig:
        """The residual MLP's own fields (everything but the task fields)."""
        return ResidualMLPConfig(**{f.name: getattr(self, f.name) for f in fields(ResidualMLPConfig)})


class MlpClassifier(nn.Module):
    """(B, C, H, W) float -> (B, num_classes) logits through a residual MLP of width `dim`."""

    def __init__(self, config: MlpClassifierConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or MlpClassifierConfig()
        features = config.in_channels * config.image_size**2
        self.input_proj = nn.Linear(features, config.dim)
        fan_in_init(self.input_proj, gain=1.0)  # unit-RMS stream for standardised pixels
        self.trunk = ResidualMLP(config.trunk_config())
        # Post-norm blocks already end in a norm; "none" means no normalization anywhere (as TokenTransformer).
        needs_final_norm = config.norm_placement in ("pre", "output")
        norm_layer = norm_factory(config.norm, config.norm_options)
        self.final_norm = norm_layer(config.dim) if needs_final_norm else nn.Identity()
        self.head = nn.Linear(config.dim, config.num_classes)
        zero_init_conditioning(self)  # the final norm's gates too start at (0.5, 0.5), as the trunk's

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """The residual stream's input h_0: (B, C, H, W) -> (B, dim)."""
        return self.input_proj(x.flatten(1))

    def rank_view(self, x: torch.Tensor) -> tuple[ResidualMLP, torch.Tensor]:
        """What models.rank measures: the residual MLP and its input tokens (B, dim), one per example."""
        return self.trunk, self.tokens(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.trunk.forward_blocks(self.tokens(x).unsqueeze(1))  # (B, 1, D): one token per example
        return self.head(self.final_norm(h)[:, 0])  # (B, num_classes)
