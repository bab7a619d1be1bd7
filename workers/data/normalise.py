"""Standardisation fitted on the training split only: images per channel, tabular per feature + target."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ChannelStats", "Standardiser", "images_to_unit_float", "to_chw"]


def images_to_unit_float(images: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W, C) -> float32 in [0, 1], same layout."""
    return images.astype(np.float32) / np.float32(255.0)


def to_chw(images: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> contiguous (N, C, H, W)."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))


@dataclass(frozen=True)
class ChannelStats:
    """Per-channel mean and std of training images in [0, 1]."""

    mean: np.ndarray  # (C,)
    std: np.ndarray  # (C,)

    @classmethod
    def fit(cls, train_unit: np.ndarray) -> ChannelStats:
        pixels = train_unit.reshape(-1, train_unit.shape[-1]).astype(np.float64)
        std = pixels.std(axis=0)
        return cls(mean=pixels.mean(axis=0), std=np.where(std > 0, std, 1.0))

    def apply(self, unit: np.ndarray) -> np.ndarray:
        """float [0, 1] (N, H, W, C) -> normalised float32 (N, C, H, W)."""
        normalised = (unit - self.mean.astype(np.float32)) / self.std.astype(np.float32)
        return to_chw(normalised.astype(np.float32))


@dataclass(frozen=True)
class Standardiser:
    """z-scores of features and target from training statistics (constant columns keep scale 1)."""

    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray) -> Standardiser:
        x_std = x.std(axis=0)
        y_std = float(y.std())
        return cls(
            x_mean=x.mean(axis=0),
            x_std=np.where(x_std > 0, x_std, 1.0),
            y_mean=float(y.mean()),
            y_std=y_std if y_std > 0 else 1.0,
        )

    def features(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.x_mean) / self.x_std).astype(np.float32)

    def target(self, y: np.ndarray) -> np.ndarray:
        """(N,) -> (N, 1) float32, matching the tabular model's (B, num_outputs) output."""
        return ((y - self.y_mean) / self.y_std).astype(np.float32).reshape(-1, 1)
