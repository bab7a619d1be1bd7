"""MixUp and CutMix for image batches, driven by their own seeded RNG so resumption replays them exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["BatchMixer"]


class BatchMixer:
    """Mixes each training batch with a permutation of itself and returns soft targets.

    With both MixUp and CutMix enabled, each batch uses CutMix with probability `switch_prob` (timm's
    convention). Targets come back as class probabilities (B, num_classes); label smoothing is left to the
    loss, which accepts probability targets.
    """

    def __init__(
        self,
        *,
        num_classes: int,
        mixup_alpha: float = 0.0,
        cutmix_alpha: float = 0.0,
        switch_prob: float = 0.5,
        seed: int = 0,
    ) -> None:
        if mixup_alpha <= 0 and cutmix_alpha <= 0:
            raise ValueError("BatchMixer needs mixup_alpha > 0 or cutmix_alpha > 0")
        self.num_classes = num_classes
        self.mixup_alpha = mixup_alpha
        self.cutmix_alpha = cutmix_alpha
        self.switch_prob = switch_prob
        self.rng = np.random.default_rng(seed)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, C, H, W), y (B,) int labels -> mixed x (B, C, H, W), soft targets (B, num_classes)."""
        batch = x.shape[0]
        use_cutmix = self.cutmix_alpha > 0 and (self.mixup_alpha <= 0 or self.rng.random() < self.switch_prob)
        alpha = self.cutmix_alpha if use_cutmix else self.mixup_alpha
        lam = float(self.rng.beta(alpha, alpha))
        perm = torch.from_numpy(self.rng.permutation(batch)).to(x.device)
        if use_cutmix:
            x, lam = self._cutmix(x, perm, lam)
        else:
            x = lam * x + (1.0 - lam) * x[perm]
        one_hot = F.one_hot(y, self.num_classes).to(torch.float32)  # (B, K)
        targets = lam * one_hot + (1.0 - lam) * one_hot[perm]
        return x, targets

    def _cutmix(self, x: torch.Tensor, perm: torch.Tensor, lam: float) -> tuple[torch.Tensor, float]:
        height, width = x.shape[-2:]
        cut_ratio = np.sqrt(1.0 - lam)  # the box covers (1 - lam) of the area before clipping
        cut_h, cut_w = int(height * cut_ratio), int(width * cut_ratio)
        cy, cx = int(self.rng.integers(height)), int(self.rng.integers(width))
        top, bottom = np.clip([cy - cut_h // 2, cy + cut_h // 2], 0, height)
        left, right = np.clip([cx - cut_w // 2, cx + cut_w // 2], 0, width)
        mixed = x.clone()
        mixed[..., top:bottom, left:right] = x[perm][..., top:bottom, left:right]
        # Clipping at the border shrinks the box: weight the targets by the area actually pasted.
        lam = 1.0 - float((bottom - top) * (right - left)) / float(height * width)
        return mixed, lam

    def state_dict(self) -> dict[str, Any]:
        return {"bit_generator": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["bit_generator"]
