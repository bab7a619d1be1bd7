"""Gate views of AutoNorm runs (science.md sections 1 and 4): which norm each layer's gate chose, how decided
it is, and how both moved over training.

Per method (row label) and layer: the final DyT weight `gate_dyt_weight_<i>` and gate entropy
`gate_entropy_<i>` (noise-free, averaged over the evaluation set by the training loop), mean and t
interval across seeds; and a layers x epochs matrix of each, averaged over seeds (the heatmaps).
A DyT weight near 0 means the layer chose LayerNorm, near 1 DyT; entropy near 0 means decided,
ln 2 undecided.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from studies.evidence._summary import MeanInterval, mean_interval, mean_or_none
from studies.evidence.trials import EvidenceTrial, finite_or_none

__all__ = [
    "GATE_QUANTITIES",
    "GateEvidence",
    "GateQuantity",
    "LayerGates",
    "MethodGates",
    "gate_evidence",
    "layer_gate_values",
]

GateQuantity = Literal["dyt_weight", "entropy"]
GATE_QUANTITIES: tuple[GateQuantity, ...] = ("dyt_weight", "entropy")
# gate_dyt_weight_3, gate_entropy_0; not gate_entropy_mean (the freeze schedule's layer average).
_LAYER_KEY = re.compile(r"^gate_(dyt_weight|entropy)_(\d+)$")


@dataclass(frozen=True)
class LayerGates:
    """One layer's gate at the end of training, across seeds."""

    layer: int
    dyt_weight: MeanInterval
    entropy: MeanInterval


@dataclass(frozen=True)
class MethodGates:
    """One method's (or grid point's) gates: final values per layer and the per-epoch matrices."""

    label: str
    method: str
    group: str | None
    n_trials: int  # completed trials (seeds) that reported gates
    layers: tuple[LayerGates, ...]
    epochs: tuple[int, ...]
    dyt_weight_by_epoch: tuple[tuple[float | None, ...], ...]  # (layers, epochs), mean over seeds
    entropy_by_epoch: tuple[tuple[float | None, ...], ...]  # (layers, epochs), mean over seeds

    def by_epoch(self, quantity: GateQuantity) -> tuple[tuple[float | None, ...], ...]:
        return self.dyt_weight_by_epoch if quantity == "dyt_weight" else self.entropy_by_epoch

    def final(self, quantity: GateQuantity) -> tuple[MeanInterval, ...]:
        return tuple(getattr(layer, quantity) for layer in self.layers)


@dataclass(frozen=True)
class GateEvidence:
    confidence: float
    methods: tuple[MethodGates, ...]


def layer_gate_values(metrics: Mapping[str, Any]) -> dict[GateQuantity, dict[int, float]]:
    """{"dyt_weight": {layer: value}, "entropy": {layer: value}} from one report's metrics."""
    values: dict[GateQuantity, dict[int, float]] = {"dyt_weight": {}, "entropy": {}}
    for key, raw in metrics.items():
        match = _LAYER_KEY.match(key)
        value = finite_or_none(raw)
        if match and value is not None:
            values[match.group(1)][int(match.group(2))] = value  # type: ignore[index]
    return values


def gate_evidence(trials: Iterable[EvidenceTrial], *, confidence: float = 0.95) -> GateEvidence | None:
    """Gate views of every method whose completed trials reported per-layer gates; None when none did."""
    by_label: dict[str, list[EvidenceTrial]] = {}
    for trial in trials:
        if trial.completed and _final_gates(trial) is not None:
            by_label.setdefault(trial.label, []).append(trial)
    if not by_label:
        return None
    return GateEvidence(
        confidence=confidence,
        methods=tuple(_method_gates(group, confidence) for group in by_label.values()),
    )


def _final_gates(trial: EvidenceTrial) -> dict[GateQuantity, dict[int, float]] | None:
    """The gates of the trial's last report (its final metrics, else its last epoch that has gates)."""
    for metrics in (trial.final, *reversed(trial.history)):
        values = layer_gate_values(metrics)
        if values["dyt_weight"] or values["entropy"]:
            return values
    return None


def _method_gates(trials: list[EvidenceTrial], confidence: float) -> MethodGates:
    finals = [_final_gates(t) for t in trials]
    layer_ids = sorted({i for final in finals if final for values in final.values() for i in values})
    layers = tuple(
        LayerGates(
            layer=i,
            dyt_weight=mean_interval([f["dyt_weight"].get(i) for f in finals if f], confidence),
            entropy=mean_interval([f["entropy"].get(i) for f in finals if f], confidence),
        )
        for i in layer_ids
    )
    # epoch -> per-trial gate values at that epoch
    per_epoch: dict[int, list[dict[GateQuantity, dict[int, float]]]] = {}
    for trial in trials:
        for row in trial.history:
            epoch = finite_or_none(row.get("epoch"))
            values = layer_gate_values(row)
            if epoch is not None and (values["dyt_weight"] or values["entropy"]):
                per_epoch.setdefault(int(epoch), []).append(values)
    epochs = tuple(sorted(per_epoch))

    def matrix(quantity: GateQuantity) -> tuple[tuple[float | None, ...], ...]:
        return tuple(
            tuple(mean_or_none(v[quantity].get(i) for v in per_epoch[e]) for e in epochs) for i in layer_ids
        )

    first = trials[0]
    return MethodGates(
        label=first.label,
        method=first.method,
        group=first.group,
        n_trials=len(trials),
        layers=layers,
        epochs=epochs,
        dyt_weight_by_epoch=matrix("dyt_weight"),
        entropy_by_epoch=matrix("entropy"),
    )
