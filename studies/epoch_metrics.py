"""Names of the per-epoch gate metrics the training loop writes and the evidence reads back.

The training loop (workers.training.metrics) writes under these names and studies.evidence reads them, so
they live here, below both, torch-free: one name, one owner.
"""

from __future__ import annotations

__all__ = ["ENTROPY_KEYS", "FREEZE_SIGNAL_PREFIXES", "SELECTOR_GRAD_VAR"]

# Where each AutoNorm-S freeze signal's per-layer gate entropies sit in an epoch's metrics (<prefix><layer>).
FREEZE_SIGNAL_PREFIXES: dict[str, str] = {"train": "train_gate_entropy_", "val": "gate_entropy_"}
# freeze_signal -> the layer-mean entropy that signal watches (train_gate_entropy_mean, gate_entropy_mean).
ENTROPY_KEYS: dict[str, str] = {signal: f"{prefix}mean" for signal, prefix in FREEZE_SIGNAL_PREFIXES.items()}
# How much the AutoNorm selectors' gradient varied across an epoch's steps (SelectorGradVariance).
SELECTOR_GRAD_VAR = "selector_grad_var"
