"""AutoNorm-S: the gate-freeze schedule, plus the helpers the trainer uses to read gates.

Rule (science.md section 1): train the selectors for epochs 1..T_freeze while tracking the mean gate
entropy; if at the end of epoch T_freeze the entropy has NOT dropped below eps_H, freeze every selector
for the rest of training. The decision is taken once. Freezing sets requires_grad False and grad None,
so AdamW neither updates nor decays those parameters (it skips parameters whose grad is None), while
the backbone keeps training.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from models.norms.autonorm import AutoNorm, gate_entropy

__all__ = ["GateFreezer", "gate_summary", "gated_norms", "mean_gate_entropy", "selector_parameters"]


def gated_norms(model: nn.Module) -> list[tuple[str, AutoNorm]]:
    """Every AutoNorm layer of the model, in module order, with its qualified name."""
    return [(name, module) for name, module in model.named_modules() if isinstance(module, AutoNorm)]


def selector_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The NormSelector parameters of every AutoNorm layer (what AutoNorm-S freezes)."""
    return [param for _, norm in gated_norms(model) for param in norm.selector.parameters()]


def gate_summary(model: nn.Module) -> list[dict[str, Any]]:
    """One dict per AutoNorm layer, from the noise-free probabilities of its last forward:
    {"layer": name, "dyt_weight": batch-mean DyT probability, "entropy": batch-mean entropy}."""
    summary = []
    for name, norm in gated_norms(model):
        probs = norm.last_probs
        if probs is None:
            continue
        summary.append(
            {
                "layer": name,
                "dyt_weight": float(probs[:, 0].mean()),
                "entropy": float(gate_entropy(probs.float()).mean()),
            }
        )
    return summary


def mean_gate_entropy(model: nn.Module) -> float | None:
    """Mean over layers of the last batch-mean gate entropy, or None without gated norms."""
    rows = gate_summary(model)
    return sum(row["entropy"] for row in rows) / len(rows) if rows else None


class GateFreezer:
    """Decides, once, at epoch t_freeze whether to freeze the selectors (epochs are 1-based)."""

    def __init__(self, t_freeze: int = 10, eps_h: float = 0.1) -> None:
        if t_freeze < 1:
            raise ValueError(f"t_freeze must be >= 1, got {t_freeze}")
        self.t_freeze = int(t_freeze)
        self.eps_h = float(eps_h)
        self.frozen = False
        self.freeze_epoch: int | None = None
        self.decided = False
        self.entropy_history: list[float] = []

    def observe(self, epoch: int, mean_entropy: float, model: nn.Module) -> bool:
        """Call after epoch `epoch` finished; returns True when this call froze the selectors."""
        self.entropy_history.append(float(mean_entropy))
        # `>=` rather than `==`: a run resumed past t_freeze without a decision still decides once.
        if self.decided or epoch < self.t_freeze:
            return False
        self.decided = True
        if mean_entropy < self.eps_h:
            return False
        self.frozen = True
        self.freeze_epoch = int(epoch)
        self.apply(model)
        return True

    def apply(self, model: nn.Module) -> None:
        """(Re-)apply the freeze to a model, e.g. after loading a checkpoint; no-op when not frozen."""
        if not self.frozen:
            return
        for param in selector_parameters(model):
            param.requires_grad_(False)
            param.grad = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "t_freeze": self.t_freeze,
            "eps_h": self.eps_h,
            "frozen": self.frozen,
            "freeze_epoch": self.freeze_epoch,
            "decided": self.decided,
            "entropy_history": list(self.entropy_history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t_freeze = int(state["t_freeze"])
        self.eps_h = float(state["eps_h"])
        self.frozen = bool(state["frozen"])
        self.freeze_epoch = None if state["freeze_epoch"] is None else int(state["freeze_epoch"])
        self.decided = bool(state.get("decided", self.frozen))
        self.entropy_history = [float(h) for h in state.get("entropy_history", [])]
