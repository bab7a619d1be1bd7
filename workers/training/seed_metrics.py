"""Gate statistics of k stacked seeds, per seed, in the keys a single-seed run reports.

The stacked forward returns each gated layer's noise-free gate probabilities as one (k, B, 2) tensor
(causal: (k, B, T, 2)); these helpers reduce them per seed exactly as `models.norms.gate_summary` and
`workers.training.metrics.TrainGateEntropy` reduce a single model's, with one host sync per batch or
epoch instead of one per seed and layer. `StackedSelectorGradVariance` is
`workers.training.metrics.SelectorGradVariance` per seed, on the stacked selector gradients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from models.norms.autonorm import gate_entropy
from studies.epoch_metrics import ENTROPY_KEYS, FREEZE_SIGNAL_PREFIXES, SELECTOR_GRAD_VAR
from workers.training.metrics import summed_grad_variance

__all__ = ["StackedSelectorGradVariance", "StackedTrainGateEntropy", "stacked_gate_summaries"]


def stacked_gate_summaries(
    layers: Sequence[str], probs: Sequence[torch.Tensor]
) -> list[list[dict[str, Any]]]:
    """Per seed, `gate_summary`'s rows: {"layer", "dyt_weight" (mean DyT probability), "entropy"}.

    `probs` holds one (k, B, 2) or (k, B, T, 2) tensor per gated layer, in `layers` order.
    """
    if not probs:
        return []
    num_seeds = probs[0].shape[0]
    dyt = torch.stack([p[..., 0].reshape(num_seeds, -1).mean(dim=1) for p in probs])  # (L, k)
    entropy = torch.stack(
        [gate_entropy(p.float()).reshape(num_seeds, -1).mean(dim=1) for p in probs]
    )  # (L, k)
    dyt_rows, entropy_rows = dyt.T.tolist(), entropy.T.tolist()  # (k, L) each, one host sync
    return [
        [
            {"layer": layer, "dyt_weight": weight, "entropy": value}
            for layer, weight, value in zip(layers, dyt_rows[seed], entropy_rows[seed], strict=True)
        ]
        for seed in range(num_seeds)
    ]


class StackedTrainGateEntropy:
    """Per seed, the mean noise-free gate entropy per gated layer over one epoch's training batches."""

    def __init__(self, num_seeds: int) -> None:
        self.num_seeds = num_seeds
        self._sum: torch.Tensor | None = None  # (k, L) summed per-decision entropies
        self._count = 0

    def reset(self) -> None:
        self._sum, self._count = None, 0

    def update(self, probs: Sequence[torch.Tensor]) -> None:
        """Add one training batch: one (k, B, 2) or (k, B, T, 2) probability tensor per gated layer."""
        if not probs:
            return
        # (k, L, N): one entry per gate decision of each seed and layer
        entropy = torch.stack([gate_entropy(p).reshape(self.num_seeds, -1) for p in probs], dim=1)
        total = entropy.sum(dim=2)  # (k, L)
        self._sum = total if self._sum is None else self._sum + total
        self._count += entropy.shape[2]

    def add_totals(self, totals: torch.Tensor, decisions: int) -> None:
        """Add batches summed elsewhere: `totals` (k, L) the per-seed, per-layer entropies summed over
        `decisions` gate decisions per seed and layer (a compiled step's sums, workers.training.seed_step)."""
        if decisions == 0 or totals.shape[-1] == 0:
            return
        totals = totals.detach().clone()
        self._sum = totals if self._sum is None else self._sum + totals
        self._count += decisions

    def compute(self) -> list[dict[str, float]]:
        """Per seed: train_gate_entropy_<i> per layer and train_gate_entropy_mean (empty dicts without gates)."""
        if self._sum is None or self._count == 0:
            return [{} for _ in range(self.num_seeds)]
        results = []
        for per_layer in (self._sum / self._count).tolist():
            metrics = {f"{FREEZE_SIGNAL_PREFIXES['train']}{i}": value for i, value in enumerate(per_layer)}
            metrics[ENTROPY_KEYS["train"]] = sum(per_layer) / len(per_layer)
            results.append(metrics)
        return results


class StackedSelectorGradVariance:
    """Per seed, `selector_grad_var` (defined by workers.training.metrics.SelectorGradVariance) from the
    stacked (k, ...) selector gradients of each step.

    A seed's frozen selectors have their gradient slices zeroed before this sees them
    (seed_step.SelectorFreezes.zero_grads_): they add nothing to the sums, and `reset` is told how many
    elements each seed still trains, so the per-element average runs over the same selectors as in a
    single-seed run. A seed that trains none reports no value (an empty dict), as a single-seed run does.
    """

    def __init__(self, names: Sequence[str], num_seeds: int) -> None:
        self.names = list(names)  # stacked names of every selector parameter
        self.num_seeds = num_seeds
        self._elements: list[int] = [0] * num_seeds
        self._sum: torch.Tensor | None = None  # (k, P) float64, summed gradients
        self._square: torch.Tensor | None = None  # (k,) float64, summed squared gradient norms
        self._steps = 0

    def reset(self, trained_elements: Sequence[int]) -> None:
        """Start an epoch; `trained_elements[i]`: selector elements seed i trains (not frozen) this epoch."""
        self._elements = [int(n) for n in trained_elements]
        self._sum, self._square, self._steps = None, None, 0

    def update(self, grads: Mapping[str, torch.Tensor]) -> None:
        """Add one step: the stacked gradients by name, frozen slices already zeroed, before clipping."""
        if not self.names:
            return
        flat = torch.cat([grads[name].reshape(self.num_seeds, -1) for name in self.names], dim=1)
        flat = flat.to(torch.float64)  # (k, P)
        square = (flat * flat).sum(dim=1)  # (k,)
        if self._sum is None or self._square is None:
            self._sum, self._square = flat, square
        else:
            self._sum.add_(flat)
            self._square = self._square + square
        self._steps += 1

    def add_totals(self, grad_sum: torch.Tensor, square_sum: torch.Tensor, steps: int) -> None:
        """Take an epoch's sums kept elsewhere (a compiled step's, workers.training.seed_step): `grad_sum`
        (k, P), `square_sum` (k,) and the `steps` they cover. Replaces what `update` added."""
        if not self.names or steps == 0:
            return
        self._sum, self._square = grad_sum.detach().clone(), square_sum.detach().clone()
        self._steps = steps

    def compute(self) -> list[dict[str, float]]:
        """Per seed: {"selector_grad_var": value}, or {} when it trained no selector or no step ran."""
        if self._sum is None or self._square is None or self._steps == 0:
            return [{} for _ in range(self.num_seeds)]
        totals = summed_grad_variance(self._sum, self._square, self._steps).tolist()  # one host sync
        return [
            {SELECTOR_GRAD_VAR: total / elements} if elements > 0 else {}
            for total, elements in zip(totals, self._elements, strict=True)
        ]
