"""Task losses and evaluation metrics (accuracy, RMSE in original units, perplexity) plus gate statistics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F

from models.norms.autonorm import AutoNorm, gate_entropy
from studies.epoch_metrics import ENTROPY_KEYS, FREEZE_SIGNAL_PREFIXES, SELECTOR_GRAD_VAR

# The gate metrics' names are studies.epoch_metrics', whose evidence reads them back; FREEZE_SIGNAL_PREFIXES
# and SELECTOR_GRAD_VAR are re-exported here, where the training code has always found them.
__all__ = [
    "FREEZE_SIGNAL_PREFIXES",
    "SELECTOR_GRAD_VAR",
    "GateStats",
    "MetricAccumulator",
    "SelectorGradVariance",
    "TaskLoss",
    "TrainGateEntropy",
    "layer_entropies",
    "summed_grad_variance",
]

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
            metrics[f"{FREEZE_SIGNAL_PREFIXES['val']}{i}"] = self._entropy_sum[i] / self._n
        metrics[ENTROPY_KEYS["val"]] = sum(self._entropy_sum) / (self._n * len(self.layers))
        return metrics


class TrainGateEntropy:
    """Mean noise-free gate entropy per gated layer over one epoch's training batches (per sample, or per
    token where a causal head gates each token).

    AutoNorm keeps the noise-free softmax of its last forward in `last_probs`, in train mode too, so
    reading it after every training forward gives the entropy of the gates each batch trained with,
    free of Gumbel noise. Sums stay on the model's device: one host sync per epoch, in `compute`.
    """

    def __init__(self, norms: Sequence[AutoNorm]) -> None:
        self._norms = list(norms)  # AutoNorm layers, in models.norms.gated_norms order
        self._sum: torch.Tensor | None = None  # (L,) summed per-sample entropies
        self._count = 0

    def reset(self) -> None:
        self._sum, self._count = None, 0

    def update(self) -> None:
        """Add the batch the gated layers have just seen (call after each training forward)."""
        if not self._norms:
            return
        # (L, B, 2) per-sample gates, or (L, B, T, 2) per-token gates under a causal (lm) head
        # last_probs is set by the forward this follows.
        probs = torch.stack([cast(torch.Tensor, norm.last_probs) for norm in self._norms])
        entropy = gate_entropy(probs).flatten(1)  # (L, N): one entry per gate decision
        total = entropy.sum(dim=1)  # (L,)
        self._sum = total if self._sum is None else self._sum + total
        self._count += entropy.shape[1]

    def add_totals(self, totals: torch.Tensor, decisions: int) -> None:
        """Add batches summed elsewhere: `totals` (L,) the per-layer entropies summed over `decisions` gate
        decisions per layer (what a compiled step adds up on the device, workers.training.whole_step)."""
        if not self._norms or decisions == 0:
            return
        totals = totals.detach().clone()
        self._sum = totals if self._sum is None else self._sum + totals
        self._count += decisions

    def compute(self) -> dict[str, float]:
        """train_gate_entropy_<i> per layer and train_gate_entropy_mean; empty without gates or batches."""
        if self._sum is None or self._count == 0:
            return {}
        per_layer = (self._sum / self._count).tolist()
        metrics = {f"{FREEZE_SIGNAL_PREFIXES['train']}{i}": value for i, value in enumerate(per_layer)}
        metrics[ENTROPY_KEYS["train"]] = sum(per_layer) / len(per_layer)
        return metrics


def layer_entropies(metrics: Mapping[str, float], signal: str) -> list[float]:
    """The per-layer gate entropies of an epoch's metrics that AutoNorm-S freeze signal `signal` reads."""
    prefix = FREEZE_SIGNAL_PREFIXES[signal]
    values: list[float] = []
    while f"{prefix}{len(values)}" in metrics:
        values.append(float(metrics[f"{prefix}{len(values)}"]))
    return values


class SelectorGradVariance:
    """`selector_grad_var`: how much the AutoNorm selectors' gradient varies from step to step within one
    epoch (the AutoNorm paper blames the Gumbel-Softmax selector's gradient noise for its "stabilisation
    bottleneck"). With g_t the flattened gradient of the selector parameters that train this epoch (P
    elements; read after backward, before clipping, so it is the loss's own gradient) at optimizer step
    t = 1..n, and g_bar its mean over the epoch's n steps,

        selector_grad_var = (1 / P) * (1 / n) * sum_t ||g_t - g_bar||^2

    the per-element variance across steps (population, divided by n), averaged over the elements: the
    trace of the step gradients' covariance over P. Why this one: it is the quantity that sets SGD's
    noise (the numerator of the gradient noise scale tr(Sigma) / |G|^2); it sees noise that turns the
    gradient without changing its length, which the variance of the gradient norm would miss; and it is
    cheap, a running sum of the gradients (P float64 values) and of their squared norms (one scalar) on
    the device, with one host sync per epoch. It counts every source of step-to-step variation, the
    minibatch and the Gumbel draws alike, plus the drift of the mean gradient within the epoch.

    A frozen selector has no gradient (AutoNorm-S): it is left out of P. An epoch in which no selector
    trained (after a global freeze, or a model without AutoNorm) or no step ran reports no value at all
    (the key is absent), rather than a 0 that would read as a perfectly quiet gradient.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter]) -> None:
        self._params = list(params)  # every selector parameter (models.norms.selector_parameters)
        self._trained: list[torch.nn.Parameter] = []
        self._sum: torch.Tensor | None = None  # (P,) float64, summed gradients
        self._square: torch.Tensor | None = None  # () float64, summed squared gradient norms
        self._steps = 0
        self._elements: int | None = None  # P when the sums also hold frozen (zero) elements (add_totals)

    def reset(self) -> None:
        """Start an epoch; the selectors that train are those not frozen now (a freeze comes between
        epochs, never within one)."""
        self._trained = [p for p in self._params if p.requires_grad]
        self._sum, self._square, self._steps, self._elements = None, None, 0, None

    def update(self) -> None:
        """Add this step's selector gradient (call after backward, before clipping)."""
        if not self._trained:
            return
        flat = torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self._trained]
        ).to(torch.float64)
        square = torch.dot(flat, flat)
        if self._sum is None or self._square is None:
            self._sum, self._square = flat, square
        else:
            self._sum.add_(flat)
            self._square = self._square + square
        self._steps += 1

    def add_totals(
        self, grad_sum: torch.Tensor, square_sum: torch.Tensor, steps: int, *, elements: int
    ) -> None:
        """Take an epoch's sums kept elsewhere (a compiled step's, workers.training.whole_step): `grad_sum`
        (P,) over every selector parameter, a frozen one's elements zero, `square_sum` () and the `steps`
        they cover; `elements` of the P trained. Replaces what `update` added (a run uses one or the other)."""
        if elements == 0 or steps == 0:
            self._sum, self._square, self._steps = None, None, 0
            return
        self._sum, self._square = grad_sum.detach().clone(), square_sum.detach().clone()
        self._steps, self._elements = steps, elements

    def compute(self) -> dict[str, float]:
        """{"selector_grad_var": value}, or {} when no selector trained or no step ran this epoch."""
        if self._sum is None or self._square is None or self._steps == 0:
            return {}
        total = float(summed_grad_variance(self._sum, self._square, self._steps))  # the host sync
        elements = self._elements if self._elements is not None else self._sum.numel()
        return {SELECTOR_GRAD_VAR: total / elements}


def summed_grad_variance(grad_sum: torch.Tensor, square_sum: torch.Tensor, steps: int) -> torch.Tensor:
    """sum over elements of the per-element variance across `steps` steps, from the running sums:
    grad_sum (..., P) of the gradients and square_sum (...) of their squared norms -> (...). Computed as
    square_sum / n - ||g_bar||^2 in float64, clamped at 0 against rounding."""
    mean = grad_sum / steps
    return (square_sum / steps - (mean * mean).sum(dim=-1)).clamp_min(0.0)
