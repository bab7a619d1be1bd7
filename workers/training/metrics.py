"""Task losses and evaluation metrics (accuracy, RMSE in original units, perplexity) plus gate statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["GateStats", "MetricAccumulator", "TaskLoss"]

_CLASSIFICATION_TASKS = frozenset(
    {"image_classification", "sequence_classification", "token_classification", "language_modeling"}
)


@dataclass(frozen=True)
class TaskLoss:
    """The training loss of one task: cross-entropy (label smoothed, pads ignored) or MSE for regression."""

    task: str
    label_smoothing: float = 0.0
    ignore_index: int = -100

    def __call__(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        output = output.float()  # the loss in float32 even under bf16 autocast
        if self.task == "regression":
            return F.mse_loss(output, target.float().view_as(output))
        if self.task not in _CLASSIFICATION_TASKS:
            raise ValueError(f"unknown task {self.task!r}")
        num_classes = output.shape[-1]
        logits = output.reshape(-1, num_classes)  # (B*T, K) for token tasks, (B, K) otherwise
        if target.is_floating_point():  # MixUp/CutMix soft targets (B, K)
            return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)
        return F.cross_entropy(
            logits, target.reshape(-1), ignore_index=self.ignore_index, label_smoothing=self.label_smoothing
        )


@dataclass
class MetricAccumulator:
    """Accumulates one evaluation pass and reduces it to the dataset's metric.

    accuracy: fraction of correct labels (token tasks: over non-pad tokens); rmse: sqrt of the mean squared
    error of the standardised targets times `target_std` (original units); perplexity: exp of the mean
    token cross-entropy over non-pad tokens (no label smoothing).
    """

    metric: str
    target_std: float = 1.0
    ignore_index: int = -100
    # Sums stay on the model's device as tensors: one host sync per pass, not per batch.
    _total: torch.Tensor | float = 0.0
    _count: torch.Tensor | float = 0.0
    _loss_sum: torch.Tensor | float = 0.0
    _loss_count: torch.Tensor | float = 0.0

    def update(self, output: torch.Tensor, target: torch.Tensor) -> None:
        output = output.float()
        if self.metric == "rmse":
            err = output - target.float().view_as(output)
            self._total = self._total + err.pow(2).sum()
            self._count += err.numel()
            return
        num_classes = output.shape[-1]
        logits = output.reshape(-1, num_classes)
        labels = target.reshape(-1)
        valid = labels != self.ignore_index
        if self.metric == "accuracy":
            self._total = self._total + ((logits.argmax(-1) == labels) & valid).sum()
            self._count = self._count + valid.sum()
        elif self.metric == "perplexity":
            loss = F.cross_entropy(logits, labels, ignore_index=self.ignore_index, reduction="sum")
            self._total = self._total + loss
            self._count = self._count + valid.sum()
        else:
            raise ValueError(f"unknown metric {self.metric!r}")

    def compute(self) -> float:
        count = float(self._count)
        if count == 0:
            return math.nan
        mean = float(self._total) / count
        if self.metric == "accuracy":
            return mean
        if self.metric == "rmse":
            return math.sqrt(mean) * self.target_std
        return math.exp(min(mean, 700.0))  # exp overflows float64 beyond ~709


@dataclass
class GateStats:
    """Per-layer gate DyT weight and entropy averaged over the evaluation batches (weighted by batch size)."""

    layers: list[str] = field(default_factory=list)
    _weight_sum: list[float] = field(default_factory=list)
    _entropy_sum: list[float] = field(default_factory=list)
    _n: float = 0.0

    def update(self, summaries: Sequence[dict], batch_size: int) -> None:
        if not summaries:
            return
        if not self.layers:
            self.layers = [s["layer"] for s in summaries]
            self._weight_sum = [0.0] * len(summaries)
            self._entropy_sum = [0.0] * len(summaries)
        for i, summary in enumerate(summaries):
            self._weight_sum[i] += float(summary["dyt_weight"]) * batch_size
            self._entropy_sum[i] += float(summary["entropy"]) * batch_size
        self._n += batch_size

    def compute(self) -> dict[str, float]:
        """gate_dyt_weight_<i>, gate_entropy_<i> per layer and gate_entropy_mean; empty without gates."""
        if not self.layers or self._n == 0:
            return {}
        metrics: dict[str, float] = {}
        for i in range(len(self.layers)):
            metrics[f"gate_dyt_weight_{i}"] = self._weight_sum[i] / self._n
            metrics[f"gate_entropy_{i}"] = self._entropy_sum[i] / self._n
        metrics["gate_entropy_mean"] = sum(self._entropy_sum) / (self._n * len(self.layers))
        return metrics
