"""The tunable knobs of a study: names, types, ranges and the methods they apply to; and the AutoNorm-S
freeze schedule's defaults and rule.

Plain Python (no pydantic, no yaml, no torch): studies.spec validates specs against this table, and the
training path (workers.training.config, .augment) reads it on machines that have only torch installed.

The freeze schedule's defaults are owned here, and only here: the spec's rules, the evidence and the
catalog lint need them (studies may import no other layer), and a trial reads them through
workers.training.config.TrainConfig. models.norms.freeze.GateFreezer, which models may not import this
from, takes t_freeze, eps_h and scope as required arguments, so it holds no default of its own.
(AutoNorm's Gumbel temperature tau and its post_freeze_gate keep their defaults in models.norms.autonorm:
a trial passes them only where its spec sets them.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from studies.methods import FREEZING_METHODS, GATED_METHODS

__all__ = [
    "DEFAULT_EPS_H",
    "DEFAULT_FREEZE_SCOPE",
    "DEFAULT_FREEZE_SIGNAL",
    "DEFAULT_T_FREEZE",
    "KNOBS",
    "KNOB_MODEL_FIELDS",
    "Knob",
    "freeze_fits",
]

_LN2 = math.log(2.0)
# AutoNorm-S freeze schedule when a spec does not search it: NormLab's T_freeze and eps_H (the source
# summaries give no values), its entropy source and its scope.
DEFAULT_T_FREEZE = 10
DEFAULT_EPS_H = 0.1
DEFAULT_FREEZE_SIGNAL = "train"
DEFAULT_FREEZE_SCOPE = "global"


def freeze_fits(t_freeze: int, epochs: int) -> bool:
    """Whether AutoNorm-S can freeze within `epochs`: it decides after epoch t_freeze, so from
    epochs <= t_freeze on it never freezes and runs as plain AutoNorm. The one statement of the rule:
    the spec's rules refuse a study that breaks it, TrainConfig a trial config (tests, benchmarks)."""
    return 1 <= t_freeze < epochs


# --------------------------------------------------------------------------------------------- knobs


@dataclass(frozen=True)
class Knob:
    """One tunable knob: its type, its valid range and the methods it applies to (None = every method)."""

    name: str
    kind: Literal["float", "int", "categorical"]
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: `low` itself is not allowed (e.g. a learning rate of 0)
    high_open: bool = False
    categories: tuple[str, ...] = ()
    methods: tuple[str, ...] | None = None
    # Fixed, choice and grid values may be null, meaning "switch this feature off" (e.g. no LayerScale).
    nullable: bool = False

    def applies_to(self, method: str) -> bool:
        return self.methods is None or method in self.methods

    def describe_range(self) -> str:
        if self.kind == "categorical":
            return "one of " + ", ".join(self.categories)
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        return f"{left}{_fmt(self.low)}, {_fmt(self.high)}{right}" + (" or null" if self.nullable else "")

    def contains(self, value: float) -> bool:
        assert self.low is not None and self.high is not None
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def _fmt(x: float | None) -> str:
    return "inf" if x is None else f"{x:g}"


_AUTONORM_S = FREEZING_METHODS
_GATED = GATED_METHODS

# Knob -> the model config field it sets; workers.training.config.MODEL_KNOBS builds on this table.
KNOB_MODEL_FIELDS: dict[str, str] = {
    "width_expansion": "mlp_ratio",
    "skip_scale": "skip_scale",
    "init_scale": "init_scale",
    "norm_placement": "norm_placement",
    "activation": "activation",
    "branch": "branch",
    "dropout": "dropout",
    "drop_path": "drop_path",
    "layer_scale_init": "layer_scale_init",
}

KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "t_freeze",
            "int",
            "last epoch of AutoNorm-S's entropy watch; must be below budget.epochs "
            f"(default {DEFAULT_T_FREEZE})",
            1,
            10_000,
            methods=_AUTONORM_S,
        ),
        Knob(
            "eps_h",
            "float",
            f"gate-entropy threshold of AutoNorm-S (entropy lies in [0, ln 2]; default {DEFAULT_EPS_H})",
            0.0,
            _LN2,
            low_open=True,
            methods=_AUTONORM_S,
        ),
        Knob(
            "freeze_signal",
            "categorical",
            "AutoNorm-S entropy source: the epoch's training batches (default) or the validation split",
            categories=("train", "val"),
            methods=_AUTONORM_S,
        ),
        Knob(
            "freeze_scope",
            "categorical",
            "AutoNorm-S freeze: global (mean entropy, all selectors; default) or per_layer (each on its own)",
            categories=("global", "per_layer"),
            methods=_AUTONORM_S,
        ),
        Knob(
            "post_freeze_gate",
            "categorical",
            "AutoNorm-S gate of a frozen selector: sample (default: Gumbel noise as before the freeze), "
            "expected (the noise-free softmax) or hard (its argmax one-hot, in eval too)",
            categories=("sample", "expected", "hard"),
            methods=_AUTONORM_S,
        ),
        Knob(
            "tau",
            "float",
            "Gumbel-Softmax temperature of the gate",
            0.0,
            100.0,
            low_open=True,
            methods=_GATED,
        ),
        Knob("skip_scale", "float", "branch-to-skip ratio beta: h + beta * f(h)", 0.0, 100.0, low_open=True),
        Knob("init_scale", "float", "initial scale of the branch weights", 0.0, 100.0, low_open=True),
        Knob("width_expansion", "float", "MLP hidden width over model width (m/d)", 0.0, 64.0, low_open=True),
        Knob(
            "norm_placement",
            "categorical",
            "where the norm sits in a block",
            categories=("pre", "post", "output", "none"),
        ),
        Knob("activation", "categorical", "MLP activation", categories=("gelu", "relu", "tanh")),
        Knob("branch", "categorical", "MLP branch structure", categories=("two_matrix", "one_matrix")),
        Knob("lr", "float", "peak AdamW learning rate", 0.0, 1.0, low_open=True),
        Knob("weight_decay", "float", "AdamW weight decay", 0.0, 1.0),
        Knob("drop_path", "float", "stochastic-depth rate of the last block", 0.0, 1.0, high_open=True),
        Knob("dropout", "float", "dropout rate", 0.0, 1.0, high_open=True),
        Knob(
            "layer_scale_init",
            "float",
            "LayerScale initial value; null disables LayerScale",
            0.0,
            10.0,
            low_open=True,
            nullable=True,
        ),
        Knob(
            "label_smoothing", "float", "label smoothing of the classification loss", 0.0, 1.0, high_open=True
        ),
        Knob("grad_clip", "float", "gradient-norm clipping threshold", 0.0, 1e6, low_open=True),
        Knob("mixup", "float", "MixUp alpha (0 disables)", 0.0, 10.0),
        Knob("cutmix", "float", "CutMix alpha (0 disables)", 0.0, 10.0),
        Knob(
            "augment",
            "categorical",
            "training-image augmentation (workers.training.augment); unset: crop_flip on vit_lite_paper, "
            "else none",
            categories=("none", "crop_flip", "randaugment", "autoaugment"),
        ),
    )
}
