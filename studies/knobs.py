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
from collections.abc import Mapping

from normlab import REGISTRY, Knob
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
    "knob_model_field",
    "knob_norm_option",
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

_AUTONORM_S = FREEZING_METHODS
_GATED = GATED_METHODS

for _knob in (
    Knob(
        "t_freeze",
        "int",
        f"last epoch of AutoNorm-S's entropy watch; must be below budget.epochs (default {DEFAULT_T_FREEZE})",
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
        norm_option="post_freeze_gate",
    ),
    Knob(
        "tau",
        "float",
        "Gumbel-Softmax temperature of the gate",
        0.0,
        100.0,
        low_open=True,
        methods=_GATED,
        norm_option="tau",
    ),
    Knob(
        "skip_scale",
        "float",
        "branch-to-skip ratio beta: h + beta * f(h)",
        0.0,
        100.0,
        low_open=True,
        model_field="skip_scale",
    ),
    Knob(
        "init_scale",
        "float",
        "initial scale of the branch weights",
        0.0,
        100.0,
        low_open=True,
        model_field="init_scale",
    ),
    Knob(
        "width_expansion",
        "float",
        "MLP hidden width over model width (m/d)",
        0.0,
        64.0,
        low_open=True,
        model_field="mlp_ratio",
    ),
    Knob(
        "norm_placement",
        "categorical",
        "where the norm sits in a block",
        categories=("pre", "post", "output", "none"),
        model_field="norm_placement",
    ),
    Knob(
        "activation",
        "categorical",
        "MLP activation",
        categories=("gelu", "relu", "tanh"),
        model_field="activation",
    ),
    Knob(
        "branch",
        "categorical",
        "MLP branch structure",
        categories=("two_matrix", "one_matrix"),
        model_field="branch",
    ),
    Knob("lr", "float", "peak AdamW learning rate", 0.0, 1.0, low_open=True),
    Knob("weight_decay", "float", "AdamW weight decay", 0.0, 1.0),
    Knob(
        "drop_path",
        "float",
        "stochastic-depth rate of the last block",
        0.0,
        1.0,
        high_open=True,
        model_field="drop_path",
    ),
    Knob("dropout", "float", "dropout rate", 0.0, 1.0, high_open=True, model_field="dropout"),
    Knob(
        "layer_scale_init",
        "float",
        "LayerScale initial value; null disables LayerScale",
        0.0,
        10.0,
        low_open=True,
        nullable=True,
        model_field="layer_scale_init",
    ),
    Knob("label_smoothing", "float", "label smoothing of the classification loss", 0.0, 1.0, high_open=True),
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
):
    REGISTRY.knobs.add(_knob)

# Every knob a spec may name, built-ins and plugins' (a live view: a plugin's knobs appear once it
# registers, or inside the registry's overlay while the API validates its study).
KNOBS: Mapping[str, Knob] = REGISTRY.knobs.as_mapping()
# The built-in knobs that set a model config field; knob_model_field answers for a plugin's knob too.
KNOB_MODEL_FIELDS: dict[str, str] = {k.name: k.model_field for k in REGISTRY.knobs if k.model_field}


def knob_model_field(name: str) -> str | None:
    found = REGISTRY.knobs.find(name)
    return found.model_field if found is not None else None


def knob_norm_option(name: str) -> str | None:
    found = REGISTRY.knobs.find(name)
    return found.norm_option if found is not None else None
