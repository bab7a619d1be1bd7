"""AutoNorm-S: the gate-freeze schedule, plus the helpers the trainer uses to read gates.

Rule (the paper, science.md section 1): the selectors train normally for epochs 1..T_freeze while the
gate entropy H is watched; if H has NOT fallen below eps_H at ANY epoch up to T_freeze, the selectors
are frozen for the rest of training. The decision is taken once, after epoch T_freeze (a reading below
eps_H before then already settles it: that selector will never freeze). Scope `global` watches the mean
of the per-layer entropies and freezes every selector together; `per_layer` watches each layer's own
entropy and freezes that layer's selector alone. Freezing sets requires_grad False and grad None, so
AdamW neither updates nor decays those parameters (it skips parameters whose grad is None), while the
backbone keeps training. It also marks the layer `selector_frozen`, so its gate follows the layer's
`post_freeze_gate` from then on (models/norms/autonorm.py; by default it keeps sampling). Where H comes
from (training batches or the validation split) is the caller's choice: `observe` takes one reading
per gated layer.

T_freeze, eps_H and the scope have no defaults here: a study's defaults are studies.knobs' (which models
may not import), and a trial passes them in (workers.training.config.TrainConfig), so each has one owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from models.norms.autonorm import AutoNorm, gate_entropy

__all__ = [
    "FREEZE_SCOPES",
    "GateFreezer",
    "gate_summary",
    "gated_norms",
    "mean_gate_entropy",
    "selector_parameters",
]

FREEZE_SCOPES: tuple[str, ...] = ("global", "per_layer")


def gated_norms(model: nn.Module) -> list[tuple[str, AutoNorm]]:
    """Every AutoNorm layer of the model, in module order, with its qualified name."""
    return [(name, module) for name, module in model.named_modules() if isinstance(module, AutoNorm)]


def selector_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The NormSelector parameters of every AutoNorm layer (what AutoNorm-S freezes)."""
    return [param for _, norm in gated_norms(model) for param in norm.selector.parameters()]


def gate_summary(model: nn.Module) -> list[dict[str, Any]]:
    """One dict per AutoNorm layer, from the noise-free probabilities of its last forward:
    {"layer": name, "dyt_weight": batch-mean DyT probability, "entropy": batch-mean entropy}.
    Causal (per-token, (B, T, 2)) gates are averaged over samples and tokens alike."""
    summary = []
    for name, norm in gated_norms(model):
        probs = norm.last_probs
        if probs is None:
            continue
        summary.append(
            {
                "layer": name,
                "dyt_weight": float(probs[..., 0].mean()),
                "entropy": float(gate_entropy(probs.float()).mean()),
            }
        )
    return summary


def mean_gate_entropy(model: nn.Module) -> float | None:
    """Mean over layers of the last batch-mean gate entropy, or None without gated norms."""
    rows = gate_summary(model)
    return sum(row["entropy"] for row in rows) / len(rows) if rows else None


class GateFreezer:
    """Watches the gate entropy of epochs 1..t_freeze and decides, once, which selectors to freeze.

    Epochs are 1-based. `frozen_layers` holds the indices (in `gated_norms` order) of frozen selectors.
    """

    def __init__(self, *, t_freeze: int, eps_h: float, scope: str) -> None:
        if t_freeze < 1:
            raise ValueError(f"t_freeze must be >= 1, got {t_freeze}")
        if scope not in FREEZE_SCOPES:
            raise ValueError(f"freeze scope must be one of {', '.join(FREEZE_SCOPES)}, got {scope!r}")
        self.t_freeze = int(t_freeze)
        self.eps_h = float(eps_h)
        self.scope = scope
        self.frozen_layers: list[int] = []
        self.freeze_epoch: int | None = None
        self.decided = False
        self.entropy_history: list[list[float]] = []  # per observed epoch: one entropy per gated layer
        self._legacy_all_frozen = False  # a checkpoint from before per-layer state froze every selector

    @property
    def frozen(self) -> bool:
        """Whether any selector is frozen."""
        return bool(self.frozen_layers) or self._legacy_all_frozen

    def observe(self, epoch: int, entropies: Sequence[float] | float, model: nn.Module) -> bool:
        """Call after epoch `epoch` finished with its entropy reading: one value per gated layer (a single
        float is the global mean, for scope `global` only). Returns True when this call froze selectors."""
        num_layers = len(gated_norms(model))
        reading = self._reading(entropies, num_layers)
        self.entropy_history.append(reading)
        # `>=` rather than `==`: a run resumed past t_freeze without a decision still decides once.
        if self.decided or epoch < self.t_freeze:
            return False
        self.decided = True
        # Every reading so far counts: normally epochs 1..t_freeze, the whole watch window.
        never_below = [min(unit) >= self.eps_h for unit in zip(*self._units(), strict=True)]
        if self.scope == "global":
            to_freeze = list(range(num_layers)) if never_below[0] else []
        else:
            to_freeze = [i for i, stayed_high in enumerate(never_below) if stayed_high]
        if not to_freeze:
            return False
        self.frozen_layers = to_freeze
        self.freeze_epoch = int(epoch)
        self.apply(model)
        return True

    def apply(self, model: nn.Module) -> None:
        """(Re-)apply the freeze to a model, e.g. after loading a checkpoint; no-op when nothing is frozen."""
        norms = gated_norms(model)
        if self._legacy_all_frozen:
            self.frozen_layers, self._legacy_all_frozen = list(range(len(norms))), False
        for index in self.frozen_layers:
            norm = norms[index][1]
            norm.selector_frozen = True
            for param in norm.selector.parameters():
                param.requires_grad_(False)
                param.grad = None

    def layer_metrics(self, num_layers: int) -> dict[str, int]:
        """gates_frozen (1 when any selector is frozen), freeze_epoch (-1 if none) and gate_frozen_<i>."""
        frozen = set(self.frozen_layers) if not self._legacy_all_frozen else set(range(num_layers))
        metrics = {
            "gates_frozen": int(bool(frozen)),
            "freeze_epoch": self.freeze_epoch if self.freeze_epoch is not None else -1,
        }
        metrics.update({f"gate_frozen_{i}": int(i in frozen) for i in range(num_layers)})
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "t_freeze": self.t_freeze,
            "eps_h": self.eps_h,
            "scope": self.scope,
            "frozen": self.frozen,
            "frozen_layers": list(self.frozen_layers),
            "freeze_epoch": self.freeze_epoch,
            "decided": self.decided,
            "entropy_history": [list(reading) for reading in self.entropy_history],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t_freeze = int(state["t_freeze"])
        self.eps_h = float(state["eps_h"])
        self.scope = str(state.get("scope", "global"))
        self.freeze_epoch = None if state["freeze_epoch"] is None else int(state["freeze_epoch"])
        self.decided = bool(state.get("decided", state["frozen"]))
        history = state.get("entropy_history", [])
        # Older checkpoints kept one global float per epoch and one global frozen flag.
        self.entropy_history = [
            [float(h)] if isinstance(h, (int, float)) else [float(v) for v in h] for h in history
        ]
        if "frozen_layers" in state:
            self.frozen_layers = [int(i) for i in state["frozen_layers"]]
            self._legacy_all_frozen = False
        else:
            self.frozen_layers, self._legacy_all_frozen = [], bool(state["frozen"])

    def _reading(self, entropies: Sequence[float] | float, num_layers: int) -> list[float]:
        if isinstance(entropies, (int, float)):
            if self.scope != "global":
                raise ValueError("a per_layer freeze needs one entropy per gated layer, got a single value")
            return [float(entropies)]
        reading = [float(h) for h in entropies]
        if len(reading) != num_layers:
            raise ValueError(f"got {len(reading)} entropies for a model with {num_layers} gated layers")
        return reading

    def _units(self) -> list[list[float]]:
        """Per observed epoch, the values the rule compares with eps_h: the layer mean, or every layer."""
        if self.scope == "global":
            return [[sum(reading) / len(reading)] for reading in self.entropy_history]
        return self.entropy_history
