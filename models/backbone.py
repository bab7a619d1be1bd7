"""The shared Transformer trunk. Every backbone subclasses it and supplies the task parts:

    embed(x) -> (B, T, D) tokens,  attention_mask(x) -> bool mask | None,  readout(h, x) -> outputs,
    token_mask(x) -> (B, T) bool of real tokens | None (only backbones with padding override it)

so rank measurements (models.rank) can take the Jacobian of `forward_blocks` w.r.t. embedded tokens on
any backbone.

Init: each subclass builds its task parts and then calls `init_branch_weights()` last. That draws the
residual branches' Linears (attention qkv / proj, MLP up / down) with std 0.02 * init_scale and then
re-zeroes the last layer of every token-conditioned norm, so AutoNorm gates start at exactly (0.5, 0.5)
and FiLM starts as plain LayerNorm. Norms, embeddings, tokenizers and heads keep their own init.
"""

from __future__ import annotations

import torch
from torch import nn

from models.blocks import TransformerBlock, residual_branches
from models.config import TransformerConfig
from models.layers import init_linear
from models.norms import norm_factory
from models.norms.conditioning import apply_norm, zero_init_conditioning

__all__ = ["TokenTransformer"]


class TokenTransformer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        norm_layer = norm_factory(config.norm, config.norm_options)
        # Linear stochastic-depth schedule: 0 at the first block, drop_path at the last.
        rates = [config.drop_path * i / max(1, config.depth - 1) for i in range(config.depth)]
        self.blocks = nn.ModuleList(
            TransformerBlock(
                config.dim,
                config.heads,
                norm_layer,
                mlp_ratio=config.mlp_ratio,
                activation=config.activation,
                branch=config.branch,
                dropout=config.dropout,
                placement=config.norm_placement,
                skip_scale=config.skip_scale,
                layer_scale_init=config.layer_scale_init,
                drop_path=rate,
            )
            for rate in rates
        )
        # Post-norm blocks already end in a norm; "none" means no normalization anywhere.
        needs_final_norm = config.norm_placement in ("pre", "output")
        self.final_norm = norm_layer(config.dim) if needs_final_norm else nn.Identity()
        self.embed_drop = nn.Dropout(config.dropout)

    def init_branch_weights(self) -> None:
        """timm ViT init of the residual branches, std 0.02 scaled by init_scale (the branch init scale
        alpha), then the zero start of every selector / FiLM last layer, whatever ran before."""
        for branch in residual_branches(self.blocks):
            init_linear(branch, std=0.02 * self.config.init_scale)
        zero_init_conditioning(self)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def attention_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        return None

    def token_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        """(B, T) bool, True = real token, for token-conditioned norms; None when every token is real."""
        return None

    def readout(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward_blocks(
        self, h: torch.Tensor, mask: torch.Tensor | None = None, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        for block in self.blocks:
            h = block(h, mask=mask, token_mask=token_mask)  # (B, T, D)
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed_drop(self.embed(x))  # (B, T, D)
        token_mask = self.token_mask(x)
        h = self.forward_blocks(h, self.attention_mask(x), token_mask)
        return self.readout(apply_norm(self.final_norm, h, token_mask), x)
