"""RMSNorm as a NormLab plugin: a norm layer, a method that trains with it, and a knob for its epsilon.

RMSNorm (Zhang & Sennrich, 2019) rescales by the root mean square of the features, without LayerNorm's
centring: y = x / sqrt(mean(x^2) + eps) * g. Name this file in a spec's `plugins` and the method
`rmsnorm` can be compared with the built-ins (rmsnorm_study.yaml).
"""

from __future__ import annotations

import torch
from torch import nn

from normlab.plugin import knob, method, norm_layer


@norm_layer("rmsnorm")
class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned per-feature gain."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., dim) -> (..., dim)
        scale = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * scale * self.weight


method("rmsnorm", norm="rmsnorm", description="RMSNorm in every norm slot (a plugin)")
knob(
    "rms_eps",
    "float",
    "RMSNorm's epsilon, added to the mean square",
    1e-8,
    1e-2,
    methods=("rmsnorm",),
    norm_option="eps",
)
