"""TrainConfig: the typed view of a trial config dict (what Ray Tune passes to the trainable)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from normlab import REGISTRY
from studies.knobs import (
    DEFAULT_EPS_H,
    DEFAULT_FREEZE_SCOPE,
    DEFAULT_FREEZE_SIGNAL,
    DEFAULT_T_FREEZE,
    KNOB_MODEL_FIELDS,
    KNOBS,
    freeze_fits,
    knob_norm_option,
)
from studies.methods import FREEZING_METHODS
from studies.trial_config import ORCHESTRATION_KEYS

__all__ = [
    "COMPILE_MODES",
    "MODEL_KNOBS",
    "NORM_OPTION_KNOBS",
    "RESUME_INSENSITIVE_FIELDS",
    "TRAINING_KNOBS",
    "TrainConfig",
    "model_config",
]

# budget.compile values: how the training forward runs (workers.training.compiled).
COMPILE_MODES: tuple[str, ...] = ("none", "default", "reduce-overhead")

# Knobs that configure the AutoNorm-S freeze controller rather than the model.
TRAINING_KNOBS = frozenset({"t_freeze", "eps_h", "freeze_signal", "freeze_scope"})

# Knobs that go into the gated norm's options (models.norms.AutoNorm), only where the norm is AutoNorm:
# its Gumbel temperature and the gate of a frozen AutoNorm-S selector.
NORM_OPTION_KNOBS = frozenset({"tau", "post_freeze_gate"})

# Knob name -> model config field. NORM_OPTION_KNOBS are handled separately.
MODEL_KNOBS: dict[str, str] = {
    **KNOB_MODEL_FIELDS,  # the knobs a study spec may search (one table, owned by studies.spec)
    # Config fields a trial config may also set directly by their own names.
    "mlp_ratio": "mlp_ratio",
    "depth": "depth",
    "dim": "dim",
    "heads": "heads",
}

# Fields that may differ between an interrupted run and its resumption without changing the result
# semantics (where the run executes, how it shows progress, where the data lives).
RESUME_INSENSITIVE_FIELDS = frozenset({"device", "num_threads", "progress", "data_root", "amp", "compile"})


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs. Defaults follow science.md section 2 (Compact-Transformers recipe)."""

    method: str = "frozen_ln"  # a studies.methods name: decides the norm layer and the freeze schedule
    dataset: str = "digits"  # a workers.data.DATASETS name
    model: str | None = None  # preset or model name; None -> the dataset's default preset
    model_overrides: dict[str, Any] = field(
        default_factory=dict
    )  # raw build_model config fields, applied last
    knobs: dict[str, Any] = field(
        default_factory=dict
    )  # searched knobs (tau, t_freeze, eps_h, skip_scale, ...)
    lr: float = 5e-4  # AdamW peak learning rate (after warmup)
    weight_decay: float = (
        3e-2  # decoupled weight decay on matrices only (not norms, biases, embeddings' 1-D params)
    )
    epochs: int = 10
    batch_size: int = 128
    eval_batch_size: int = 512  # evaluation has no backward pass, so larger batches are cheap
    warmup_epochs: float = 5.0  # linear warmup length; fractional epochs allowed
    min_lr_ratio: float = 0.0  # cosine decays to lr * min_lr_ratio at the last step
    label_smoothing: float = 0.1  # classification losses only
    grad_clip: float | None = 1.0  # max global gradient L2 norm; None or <= 0 disables
    mixup: float = 0.0  # MixUp Beta(alpha, alpha); 0 disables; images only
    cutmix: float = 0.0  # CutMix Beta(alpha, alpha); 0 disables; images only
    # Training-image augmentation: none | crop_flip | randaugment | autoaugment (workers.training.augment);
    # None -> the model's default: crop_flip on vit_lite_paper, none on tiny presets and raw model names.
    augment: str | None = None
    # Corruption eval sets of cifar10_c & co (get_dataset): corruption names and severities 1..5;
    # None -> the dataset's defaults (gaussian_noise, motion_blur, brightness at severity 3).
    corruptions: tuple[str, ...] | None = None
    severities: tuple[int, ...] | None = None
    seed: int = 0  # trial seed: init, data order, dropout, gate noise, mixing
    split_seed: int = 0  # dataset split seed: fixed across trial seeds
    eval_split: Literal["val", "test"] = "val"  # "test": final phase, also evaluate the test split at the end
    data_root: str | None = None  # dataset cache root passed to get_dataset
    device: str = "auto"  # "auto" (cuda when available), "cpu", "cuda", "cuda:1", ...
    num_threads: int | None = None  # torch intra-op threads; None leaves torch's setting alone
    amp: bool = True  # bf16 autocast on CUDA (ignored on CPU, where it would only slow things down)
    # torch.compile mode of the training forward: none | default | reduce-overhead (CUDA graphs); eager
    # fallback with a warning where no compiler is available (workers.training.compiled).
    compile: Literal["none", "default", "reduce-overhead"] = "none"
    max_steps_per_epoch: int | None = None  # smoke-test budget: cap optimizer steps per epoch
    progress: bool | None = None  # tqdm bar per epoch; None -> only when stderr is a TTY

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1 or self.eval_batch_size < 1:
            raise ValueError("batch sizes must be >= 1")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"compile must be one of {', '.join(COMPILE_MODES)}, got {self.compile!r}")
        if self.eval_split not in ("val", "test"):
            raise ValueError(f"eval_split must be 'val' or 'test', got {self.eval_split!r}")
        if self.warmup_epochs < 0 or self.mixup < 0 or self.cutmix < 0:
            raise ValueError("warmup_epochs, mixup and cutmix must be >= 0")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.augment is not None and self.augment not in KNOBS["augment"].categories:
            choices = ", ".join(KNOBS["augment"].categories)
            raise ValueError(f"augment must be one of {choices} (or unset), got {self.augment!r}")
        for name in ("corruptions", "severities"):  # JSON gives lists; keep tuples so configs compare equal
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        known = TRAINING_KNOBS | set(MODEL_KNOBS) | NORM_OPTION_KNOBS | set(_HYPERPARAMETER_FIELDS)
        unknown = {name for name in set(self.knobs) - known if knob_norm_option(name) is None}
        if unknown:
            raise ValueError(f"unknown knobs {sorted(unknown)}; known knobs: {sorted(known)}")
        for name in ("freeze_signal", "freeze_scope", "post_freeze_gate"):
            allowed = KNOBS[name].categories
            if name in self.knobs and self.knobs[name] not in allowed:
                raise ValueError(f"knob {name} must be one of {', '.join(allowed)}, got {self.knobs[name]!r}")
        if self.method in FREEZING_METHODS and not freeze_fits(self.t_freeze, self.epochs):
            # A spec that breaks the rule is refused at submission (studies.spec.rules); this is a trial config
            # built outside a study (tests, benchmarks), which would otherwise run as plain AutoNorm.
            raise ValueError(
                f"autonorm_s needs 1 <= t_freeze < epochs so that its selectors can freeze, got t_freeze "
                f"{self.t_freeze} (default {DEFAULT_T_FREEZE}) with epochs {self.epochs}; set knobs "
                f"t_freeze below {self.epochs} or raise epochs above {self.t_freeze}"
            )

    @classmethod
    def from_trial_config(cls, config: Mapping[str, Any], **overrides: Any) -> TrainConfig:
        """Build from a trial config dict; orchestration keys are skipped, unknown keys are an error.

        Knobs named like a training hyperparameter (lr, weight_decay, batch_size, ...) override the
        top-level value, so a search space may put them either place.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(config) - names - ORCHESTRATION_KEYS
        if unknown:
            raise ValueError(f"unknown trial config keys {sorted(unknown)}")
        values: dict[str, Any] = {k: v for k, v in config.items() if k in names}
        values["knobs"] = dict(values.get("knobs") or {})
        values["model_overrides"] = dict(values.get("model_overrides") or {})
        for name in _HYPERPARAMETER_FIELDS:
            if name in values["knobs"]:
                values[name] = values["knobs"][name]
        for name in ("mixup", "cutmix"):
            values[name] = _mixing_alpha(values.get(name, 0.0), default=_DEFAULT_ALPHA[name])
        values.update(overrides)
        return cls(**values)

    @property
    def t_freeze(self) -> int:
        return int(self.knobs.get("t_freeze", DEFAULT_T_FREEZE))  # NormLab default (the paper gives none)

    @property
    def eps_h(self) -> float:
        return float(self.knobs.get("eps_h", DEFAULT_EPS_H))  # NormLab default (the paper gives none)

    @property
    def freeze_signal(self) -> str:
        """Where AutoNorm-S reads its gate entropy: "train" (the epoch's training batches) or "val"."""
        return str(self.knobs.get("freeze_signal", DEFAULT_FREEZE_SIGNAL))

    @property
    def freeze_scope(self) -> str:
        """ "global" (mean entropy, every selector together) or "per_layer" (each selector on its own)."""
        return str(self.knobs.get("freeze_scope", DEFAULT_FREEZE_SCOPE))

    @property
    def post_freeze_gate(self) -> str:
        """The gate of a frozen AutoNorm-S selector (models.norms.autonorm.POST_FREEZE_GATES): "sample"
        (default: Gumbel noise as before the freeze, so results from before the knob stay comparable),
        "expected" or "hard". The model reads it from its norm options (`model_config`)."""
        return str(self.knobs.get("post_freeze_gate", "sample"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Hyperparameters a search space may also place among the knobs.
_HYPERPARAMETER_FIELDS = (
    "lr",
    "weight_decay",
    "batch_size",
    "warmup_epochs",
    "label_smoothing",
    "grad_clip",
    "mixup",
    "cutmix",
    "augment",
)

# timm's defaults when a spec just says `mixup: true`.
_DEFAULT_ALPHA = {"mixup": 0.8, "cutmix": 1.0}


def _mixing_alpha(value: Any, *, default: float) -> float:
    if value is None or value is False:
        return 0.0
    if value is True:
        return default
    return float(value)


def norm_option_names(norm_kind: str) -> tuple[str, ...]:
    import models.norms  # noqa: F401  (registers the built-in norm kinds; torch only, imported when needed)

    record = REGISTRY.norms.find(norm_kind)
    return record.options if record is not None else ()


def model_config(
    cfg: TrainConfig,
    *,
    norm_kind: str,
    model_fields: Mapping[str, Any],
    method_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The build_model config for this trial: dataset task fields, the method's norm, knobs, then overrides."""
    config: dict[str, Any] = dict(model_fields)
    config["norm"] = norm_kind
    for knob, value in cfg.knobs.items():
        if knob in MODEL_KNOBS:
            config[MODEL_KNOBS[knob]] = value
    # The method's fixed options, then its knobs', then the spec's explicit norm_options. A knob sets a
    # norm option only where the method's norm takes it: tau belongs to the gated norm alone.
    norm_options = dict(method_options or {})
    accepted = set(norm_option_names(norm_kind))
    for knob, value in cfg.knobs.items():
        option = knob_norm_option(knob)
        if option is not None and option in accepted:
            norm_options[option] = float(value) if KNOBS[knob].kind == "float" else value
    norm_options.update(cfg.model_overrides.get("norm_options") or {})
    config.update({k: v for k, v in cfg.model_overrides.items() if k != "norm_options"})
    if norm_options:
        config["norm_options"] = norm_options
    return config
