"""Small building blocks shared by every backbone: DropPath, LayerScale, branches, attention."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ACTIVATIONS",
    "Attention",
    "DropPath",
    "LayerScale",
    "MlpBranch",
    "activation_layer",
    "explicit_attention",
]

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh}
BRANCHES = ("two_matrix", "one_matrix")


def activation_layer(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class DropPath(nn.Module):
    """Stochastic depth per sample (timm): drops the whole branch, rescales survivors by 1/keep."""

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = float(drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1.0 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob:.3f}"


class LayerScale(nn.Module):
    """Per-channel learnable branch gain (CaiT), initialised small so deep stacks start near identity."""

    def __init__(self, dim: int, init_value: float = 1e-4) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_value)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class MlpBranch(nn.Module):
    """two_matrix: W_down act(W_up x) with hidden width m = mlp_ratio * d; one_matrix: act(W x), W (d, d)."""

    def __init__(
        self, dim: int, mlp_ratio: float = 4.0, activation: str = "gelu", branch: str = "two_matrix",
        dropout: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        if branch not in BRANCHES:
            raise ValueError(f"unknown branch {branch!r}; choose one of {BRANCHES}")
        self.branch = branch
        hidden = max(1, round(mlp_ratio * dim)) if branch == "two_matrix" else dim
        self.fc_up = nn.Linear(dim, hidden)
        self.act = activation_layer(activation)
        self.drop = nn.Dropout(dropout)
        self.fc_down = nn.Linear(hidden, dim) if branch == "two_matrix" else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.act(self.fc_up(x)))  # (..., m)
        return self.drop(self.fc_down(x))  # (..., d)


class Attention(nn.Module):
    """Multi-head self-attention on (B, T, D) with an optional boolean mask (True = may attend).

    `explicit_math` (off by default) computes attention as plain matmuls and a softmax instead of the
    fused SDPA kernels. The compiled seed-batched step sets it around its compiled call: every op of that
    form has a vmap batching rule and a derivative under any compiler, while the fused kernels' backwards
    have no batching rule (vmap loops over the seeds) and cuDNN's has no vmap derivative at all. Under
    bf16 autocast its scores are rounded to bf16 before the (float32) softmax, as SDPA's math backend
    does; the flash kernel keeps them in float32.
    """

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_dropout = dropout
        self.proj_drop = nn.Dropout(dropout)
        self.explicit_math = False

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, D/H)
        dropout = self.attn_dropout if self.training else 0.0
        if self.explicit_math:
            out = explicit_attention(q, k, v, mask, dropout)  # (B, H, T, D/H)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, H, T, D/H)
        out = out.transpose(1, 2).reshape(batch, tokens, dim)
        return self.proj_drop(self.proj(out))


def explicit_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout: float
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) masked) v with dropout on the weights: SDPA's math, unfused.
    q, k, v (B, H, T, d); mask broadcastable to (B, H, T, T), True = may attend."""
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)  # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.dropout(scores.softmax(dim=-1), p=dropout) if dropout > 0 else scores.softmax(dim=-1)
    return weights.to(v.dtype) @ v  # (B, H, T, d)


def init_linear(module: nn.Module, std: float) -> None:
    """Truncated-normal weights (timm's ViT init) and zero biases for every Linear inside `module`."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.trunc_normal_(sub.weight, std=std, a=-2 * std, b=2 * std)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)


def fan_in_init(module: nn.Module, gain: float) -> None:
    """N(0, gain^2 / fan_in) weights and zero biases: the variance-preserving init of rank studies."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, std=gain / math.sqrt(sub.in_features))
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
